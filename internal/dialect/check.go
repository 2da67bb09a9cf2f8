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
	if err := ex.QueryRow(ctx, query).Scan(&v); err != nil {
		if want == "sqlite" {
			return fmt.Errorf("dbqueue: cannot open the sqlite database file: %w: check that the DSN's path names a file this process may create or write, in a directory that exists", err)
		}
		return fmt.Errorf("dbqueue: cannot confirm the connection is a %s database: %w: check that the DSN names a running %s server (host, port, user, password, database) and that the driver package is that database's", want, err, want)
	}
	if !ok(v) {
		return fmt.Errorf("dbqueue: the connection is not a %s database (the server says it is %q): use the driver package of the database you connect to", want, v)
	}
	return nil
}
