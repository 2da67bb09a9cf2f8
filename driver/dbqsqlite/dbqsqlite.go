// Package dbqsqlite runs dbqueue on SQLite through modernc.org/sqlite, pure
// Go: the embedded default that needs no server and no cgo. Importing it
// registers sqlite: DSNs with dbqueue.Open and the migrations:
//
//	import _ "github.com/dbqueue/dbqueue/driver/dbqsqlite"
//	q, err := dbqueue.Open(ctx, "sqlite:./queue.db")
package dbqsqlite

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

func init() {
	sqldb.RegisterOpener(sqldb.Opener{
		Dialect: "sqlite",
		Import:  "github.com/dbqueue/dbqueue/driver/dbqsqlite",
		Match: func(dsn string) bool {
			scheme, _, _ := strings.Cut(strings.TrimSpace(dsn), ":")
			switch strings.ToLower(scheme) {
			case "sqlite", "sqlite3", "file":
				return true
			}
			return false
		},
		Parse: func(dsn string) (string, string, error) {
			conn, err := Parse(dsn)
			return "sqlite", conn, err
		},
		Open: func(ctx context.Context, dsn string) (sqldb.DB, error) {
			conn, err := Parse(dsn)
			if err != nil {
				return nil, err
			}
			db, err := sql.Open("sqlite", conn)
			if err != nil {
				return nil, fmt.Errorf("dbqueue: open %s: %w", sqldb.Redact(dsn), err)
			}
			if strings.Contains(conn, ":memory:") {
				db.SetMaxOpenConns(1) // each connection would be its own database
			}
			return sqldb.SQLDB(db, true), nil
		},
	})
}

// Driver is a database/sql pool on SQLite as a dbqueue.Driver.
type Driver struct{ conn sqldb.Conn }

// New returns the driver for a *sql.DB the caller owns, opened with
// modernc.org/sqlite ("sqlite"); open it from Parse's DSN to get the
// pragmas a queue needs. The queue's Close leaves it open.
func New(db *sql.DB) *Driver {
	return &Driver{conn: sqldb.StdConn(db, "sqlite")}
}

// Conn is for dbqueue's own use.
func (d *Driver) Conn() sqldb.Conn { return d.conn }

// Parse turns sqlite:./queue.db, sqlite://./queue.db, sqlite::memory: or
// file:queue.db into a modernc.org/sqlite DSN with the pragmas a queue
// needs: WAL so readers do not block the writer, a busy timeout so
// contention waits instead of failing, and BEGIN IMMEDIATE so a
// transaction takes the write lock before it reads.
func Parse(dsn string) (string, error) {
	dsn = strings.TrimSpace(dsn)
	scheme, rest, _ := strings.Cut(dsn, ":")
	path := strings.TrimPrefix(rest, "//")
	if strings.EqualFold(scheme, "file") {
		path = rest
	}
	if path == "" {
		return "", fmt.Errorf("dbqueue: SQLite DSN %q names no file: use sqlite:./queue.db or sqlite::memory:", sqldb.Redact(dsn))
	}
	base, query, _ := strings.Cut(path, "?")
	params := url.Values{}
	if query != "" {
		params, _ = url.ParseQuery(query)
	}
	if !strings.Contains(query, "busy_timeout") {
		params.Add("_pragma", "busy_timeout(10000)")
	}
	if base != ":memory:" && !strings.Contains(query, "journal_mode") {
		params.Add("_pragma", "journal_mode(WAL)")
	}
	if !strings.Contains(query, "synchronous") {
		params.Add("_pragma", "synchronous(NORMAL)")
	}
	if params.Get("_txlock") == "" {
		params.Set("_txlock", "immediate")
	}
	return "file:" + base + "?" + params.Encode(), nil
}
