package dbqueue

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// Dialect names the SQL dialect of a queue's database. It decides the SQL
// dbqueue writes: each has its own way to claim rows without blocking.
type Dialect = sqldb.Dialect

// The supported dialects.
const (
	Postgres = sqldb.Postgres
	MySQL    = sqldb.MySQL
	SQLite   = sqldb.SQLite
)

// DSN is a parsed data source name: which dialect it is, which
// database/sql driver opens it, and the driver's own form of it.
type DSN struct {
	Dialect Dialect
	// Driver is the database/sql driver name: "pgx", "mysql" or "sqlite".
	Driver string
	// Conn is the DSN in the driver's own syntax.
	Conn string
}

// ParseDSN recognises the DSN forms dbqueue accepts:
//
//	postgres://user:pass@host:5432/db?sslmode=disable   (also postgresql://)
//	mysql://user:pass@host:3306/db?param=value
//	user:pass@tcp(host:3306)/db?param=value              (go-sql-driver/mysql form)
//	sqlite:./queue.db  sqlite://./queue.db  sqlite::memory:
//
// MySQL DSNs get parseTime=true (needed for timestamps and by the migration
// lock) and, unless they set it themselves, interpolateParams=true (one round
// trip per statement). SQLite DSNs get WAL, a busy timeout and immediate
// write transactions.
func ParseDSN(dsn string) (DSN, error) {
	dsn = strings.TrimSpace(dsn)
	if dsn == "" {
		return DSN{}, fmt.Errorf("dbqueue: empty DSN: name a database, e.g. postgres://user@127.0.0.1:5432/app, mysql://root@127.0.0.1:3306/app or sqlite:./queue.db")
	}
	scheme, rest, hasScheme := strings.Cut(dsn, ":")
	switch strings.ToLower(scheme) {
	case "postgres", "postgresql":
		if _, err := url.Parse(dsn); err != nil {
			return DSN{}, fmt.Errorf("dbqueue: bad PostgreSQL DSN %s: %w", redact(dsn), urlError(err))
		}
		return DSN{Dialect: Postgres, Driver: "pgx", Conn: dsn}, nil
	case "mysql":
		cfg, err := mysqlURL(dsn)
		if err != nil {
			return DSN{}, err
		}
		_, query, _ := strings.Cut(dsn, "?")
		return DSN{Dialect: MySQL, Driver: "mysql", Conn: mysqlDefaults(cfg, query).FormatDSN()}, nil
	case "sqlite", "sqlite3", "file":
		path := strings.TrimPrefix(rest, "//")
		if scheme == "file" {
			path = rest
		}
		if path == "" {
			return DSN{}, fmt.Errorf("dbqueue: SQLite DSN %q names no file: use sqlite:./queue.db or sqlite::memory:", dsn)
		}
		return DSN{Dialect: SQLite, Driver: "sqlite", Conn: sqliteConn(path)}, nil
	}
	if hasScheme && strings.HasPrefix(rest, "//") {
		return DSN{}, fmt.Errorf("dbqueue: unknown DSN scheme %q: use postgres://, mysql://, sqlite: or a go-sql-driver/mysql DSN (user:pass@tcp(host:3306)/db)", scheme)
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return DSN{}, fmt.Errorf("dbqueue: DSN %q is not postgres://, mysql://, sqlite: nor a go-sql-driver/mysql DSN: %w", redact(dsn), err)
	}
	query := ""
	if i := strings.LastIndex(dsn, "?"); i >= 0 {
		query = dsn[i+1:]
	}
	return DSN{Dialect: MySQL, Driver: "mysql", Conn: mysqlDefaults(cfg, query).FormatDSN()}, nil
}

// urlError drops the DSN, password included, that url.Parse puts in its
// errors; the caller shows a redacted one.
func urlError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func mysqlURL(dsn string) (*mysql.Config, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, fmt.Errorf("dbqueue: bad MySQL DSN %s: %w", redact(dsn), urlError(err))
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
		return nil, fmt.Errorf("dbqueue: MySQL DSN %q names no database: add it as the path, mysql://user@host:3306/app", redact(dsn))
	}
	// Re-parse the query through the driver so its own params are understood.
	if u.RawQuery != "" {
		parsed, err := mysql.ParseDSN(cfg.FormatDSN() + "?" + u.RawQuery)
		if err != nil {
			return nil, fmt.Errorf("dbqueue: bad MySQL DSN parameters: %w", err)
		}
		cfg = parsed
	}
	return cfg, nil
}

// mysqlDefaults sets parseTime, and interpolateParams unless the DSN's own
// query (raw, as the user wrote it) sets it: FormatDSN leaves out a false
// value, so the parsed config cannot tell "false" from "unset".
func mysqlDefaults(cfg *mysql.Config, rawQuery string) *mysql.Config {
	cfg.ParseTime = true
	if !strings.Contains(rawQuery, "interpolateParams=") {
		cfg.InterpolateParams = true
	}
	return cfg
}

// sqliteConn builds a modernc.org/sqlite DSN for path with the pragmas a
// queue needs: WAL so readers do not block the writer, a busy timeout so
// contention waits instead of failing, and BEGIN IMMEDIATE so a transaction
// takes the write lock before it reads.
func sqliteConn(path string) string {
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
	return "file:" + base + "?" + params.Encode()
}

// redact hides a password in a DSN shown in an error.
func redact(dsn string) string {
	at := strings.LastIndex(dsn, "@")
	colon := strings.Index(dsn, ":")
	if at < 0 || colon < 0 || colon > at {
		return dsn
	}
	return dsn[:colon+1] + "***" + dsn[at:]
}
