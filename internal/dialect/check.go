package dialect

import (
	"context"
	"fmt"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// checkVersion asks the server who it is, so a queue opened with the wrong
// driver or dialect fails at once with a clear error rather than later
// with a syntax error.
func checkVersion(ctx context.Context, ex sqldb.Execer, query, want string, ok func(string) bool) error {
	var v string
	if err := ex.QueryRow(ctx, query).Scan(&v); err != nil || !ok(v) {
		if err == nil {
			err = fmt.Errorf("the server says it is %q", v)
		}
		return fmt.Errorf("dbqueue: the connection is not a %s database (%v): use the driver package of the database you connect to", want, err)
	}
	return nil
}
