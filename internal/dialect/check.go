package dialect

import (
	"context"
	"fmt"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// checkVersion asks the server who it is, so a queue opened with the wrong
// driver or dialect fails at once with a clear error rather than later
// with a syntax error. unread, when the query fails, is what to check.
func checkVersion(ctx context.Context, ex sqldb.Execer, query, want string, ok func(string) bool, unread string) error {
	var v string
	if err := ex.QueryRow(ctx, query).Scan(&v); err != nil {
		return fmt.Errorf("dbqueue: cannot confirm the connection is a %s database: %w: %s", want, err, unread)
	}
	if !ok(v) {
		return fmt.Errorf("dbqueue: the connection is not a %s database (the server says it is %q): use the driver package of the database you connect to", want, v)
	}
	return nil
}

// serverUnread is what to check when a server of the database named did
// not answer checkVersion's query.
func serverUnread(name string) string {
	return "check that the DSN names a running " + name + " server (host, port, user, password, database) and that the driver package is that database's"
}
