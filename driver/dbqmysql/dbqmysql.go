// Package dbqmysql runs dbqueue on MySQL 8 and MariaDB 10.6+ through
// go-sql-driver/mysql. Importing it registers mysql:// DSNs and the
// driver's own form (user:pass@tcp(host:3306)/db) with dbqueue.Open and
// the migrations:
//
//	import _ "github.com/dbqueue/dbqueue/driver/dbqmysql"
//
// or hand dbqueue the *sql.DB you have (opened with parseTime=true):
//
//	q, err := dbqueue.New(ctx, dbqmysql.New(db))
package dbqmysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

func init() {
	sqldb.RegisterOpener(sqldb.Opener{
		Dialect: "mysql",
		Import:  "github.com/dbqueue/dbqueue/driver/dbqmysql",
		Match:   Match,
		Parse: func(dsn string) (string, string, error) {
			conn, err := Parse(dsn)
			return "mysql", conn, err
		},
		Open: func(ctx context.Context, dsn string) (sqldb.DB, error) {
			conn, err := Parse(dsn)
			if err != nil {
				return nil, err
			}
			// The queue's own pool runs every session in READ COMMITTED, the
			// isolation its claims need, so they skip a SET TRANSACTION each.
			connector, err := (&mysql.MySQLDriver{}).OpenConnector(conn)
			if err != nil {
				return nil, fmt.Errorf("dbqueue: open %s: %w", sqldb.Redact(dsn), err)
			}
			return readCommittedSessions(connector), nil
		},
	})
	sqldb.RegisterClassifier(classify)
}

func classify(err error) sqldb.Class {
	var my *mysql.MySQLError
	if !errors.As(err, &my) {
		if errors.Is(err, mysql.ErrPktTooLarge) { // refused by the driver before sending
			return sqldb.Refused
		}
		return sqldb.Other
	}
	switch my.Number {
	case 1213, 1205: // ER_LOCK_DEADLOCK, ER_LOCK_WAIT_TIMEOUT
		// On Galera, 1213 is also a certification failure (a transaction on
		// another node wrote the same rows first; row locks are local to a
		// node) and a brute-force abort (a replicated write set needed a
		// row this transaction had locked). Either rolled the transaction
		// back, so it is safe to run again.
		return sqldb.Retryable
	case 1047: // ER_UNKNOWN_COM_ERROR
		// Galera's "WSREP has not yet prepared node for application use":
		// the node is joining, or has lost the cluster's primary component
		// for a moment. Any other 1047 is a real unknown command.
		if strings.Contains(my.Message, "WSREP") {
			return sqldb.Retryable
		}
	case 1146, 1054, 1176: // ER_NO_SUCH_TABLE, ER_BAD_FIELD_ERROR, ER_KEY_DOES_NOT_EXITS (the claim index: migrate)
		return sqldb.Missing
	case 1366, 1300, 1406, 1153, 1301, 1118:
		// ER_TRUNCATED_WRONG_VALUE_FOR_FIELD ("Incorrect string value"),
		// ER_INVALID_CHARACTER_STRING, ER_DATA_TOO_LONG,
		// ER_NET_PACKET_TOO_LARGE, ER_WARN_ALLOWED_PACKET_OVERFLOWED,
		// ER_TOO_BIG_ROWSIZE (also a text over a tenth of the redo log):
		// the data itself, which no retry changes.
		return sqldb.Refused
	case 1105: // ER_UNKNOWN_ERROR: a prepared statement's long parameter over max_allowed_packet
		if strings.Contains(my.Message, "max_allowed_packet") {
			return sqldb.Refused
		}
	}
	return sqldb.Other
}

// Driver is a database/sql pool on MySQL or MariaDB as a dbqueue.Driver.
type Driver struct{ conn sqldb.Conn }

// New returns the driver for a *sql.DB the caller owns, opened with
// go-sql-driver/mysql and parseTime=true: the queue's Close leaves it open.
func New(db *sql.DB) *Driver {
	return &Driver{conn: sqldb.StdConn(db, "mysql")}
}

// Conn is for dbqueue's own use.
func (d *Driver) Conn() sqldb.Conn { return d.conn }

// Match reports whether dsn is a MySQL DSN: mysql://… or the driver's own
// form, user:pass@tcp(host:3306)/db.
func Match(dsn string) bool {
	scheme, rest, hasScheme := strings.Cut(strings.TrimSpace(dsn), ":")
	if strings.EqualFold(scheme, "mysql") {
		return true
	}
	if hasScheme && strings.HasPrefix(rest, "//") {
		return false // another URL scheme
	}
	if strings.Contains(dsn, "@tcp(") || strings.Contains(dsn, "@unix(") {
		return true // the driver's form, even with a fault Parse reports
	}
	_, err := mysql.ParseDSN(dsn)
	return err == nil && strings.Contains(dsn, "/")
}

// Parse turns a MySQL DSN into go-sql-driver/mysql's form with
// parseTime=true (needed for timestamps and by the migration lock) and,
// unless it sets it itself, interpolateParams=true (one round trip per
// statement).
func Parse(dsn string) (string, error) {
	conn, err := parse(dsn)
	// The driver's and url.Parse's errors may quote the password.
	return conn, sqldb.RedactError(dsn, err)
}

func parse(dsn string) (string, error) {
	dsn = strings.TrimSpace(dsn)
	scheme, _, _ := strings.Cut(dsn, ":")
	if strings.EqualFold(scheme, "mysql") {
		cfg, err := mysqlURL(dsn)
		if err != nil {
			return "", err
		}
		_, query, _ := strings.Cut(dsn, "?")
		return defaults(cfg, query).FormatDSN(), nil
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", fmt.Errorf("dbqueue: bad MySQL DSN %s: %w: write it as user:pass@tcp(host:3306)/db?param=value or mysql://user:pass@host:3306/db", sqldb.Redact(dsn), err)
	}
	query := ""
	if i := strings.LastIndex(dsn, "?"); i >= 0 {
		query = dsn[i+1:]
	}
	return defaults(cfg, query).FormatDSN(), nil
}

func mysqlURL(dsn string) (*mysql.Config, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, fmt.Errorf("dbqueue: bad MySQL DSN %s: %w", sqldb.Redact(dsn), sqldb.URLError(err))
	}
	cfg := mysql.NewConfig()
	cfg.Net = "tcp"
	port := u.Port()
	if port == "" {
		port = "3306"
	}
	cfg.Addr = net.JoinHostPort(u.Hostname(), port) // brackets an IPv6 host
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
	if cfg.DBName == "" {
		return nil, fmt.Errorf("dbqueue: MySQL DSN %q names no database: add it as the path, mysql://user@host:3306/app", sqldb.Redact(dsn))
	}
	// Re-parse the query through the driver so its own params are understood.
	if u.RawQuery != "" {
		parsed, err := mysql.ParseDSN(cfg.FormatDSN() + "?" + u.RawQuery)
		if err != nil {
			return nil, fmt.Errorf("dbqueue: bad MySQL DSN parameter%s: %w: see go-sql-driver/mysql's DSN parameters for the values it takes", badParam(cfg.FormatDSN(), u.RawQuery), err)
		}
		cfg = parsed
	}
	return cfg, nil
}

// badParam names the first parameter of rawQuery that the driver refuses
// on its own (" parseTime"), so the error says which one to fix; "" when
// none does alone. Values are left out: a parameter may hold a secret.
func badParam(base, rawQuery string) string {
	for _, kv := range strings.Split(rawQuery, "&") {
		if kv == "" {
			continue
		}
		if _, err := mysql.ParseDSN(base + "?" + kv); err != nil {
			name, _, _ := strings.Cut(kv, "=")
			if n, uerr := url.QueryUnescape(name); uerr == nil {
				name = n
			}
			return fmt.Sprintf(" %q", name)
		}
	}
	return "s"
}

// defaults sets parseTime, and interpolateParams unless the DSN's own
// query (raw, as the user wrote it) sets it: FormatDSN leaves out a false
// value, so the parsed config cannot tell "false" from "unset". Unless
// the DSN sets maxAllowedPacket, it is 0: the driver reads the server's
// max_allowed_packet when it connects and refuses a larger statement
// before sending it (mysql.ErrPktTooLarge, which dbqueue classifies as
// refused). With the driver's default of 64 MiB over a server's 16 MiB,
// the server answers such a statement by closing the connection while it
// is still being written, and that reads as a lost connection, which is
// retried.
func defaults(cfg *mysql.Config, rawQuery string) *mysql.Config {
	cfg.ParseTime = true
	if !strings.Contains(rawQuery, "interpolateParams=") {
		cfg.InterpolateParams = true
	}
	if !strings.Contains(rawQuery, "maxAllowedPacket=") {
		cfg.MaxAllowedPacket = 0
	}
	return cfg
}
