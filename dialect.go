package dbqueue

import (
	"database/sql"
	"fmt"
	"strings"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// Dialect names the SQL dialect of a queue's database. It decides the SQL
// dbqueue writes: each database has its own way to claim rows without
// blocking.
type Dialect string

// The supported dialects.
const (
	Postgres Dialect = "postgres"
	MySQL    Dialect = "mysql"
	SQLite   Dialect = "sqlite"
)

// Valid reports whether d is one of the supported dialects.
func (d Dialect) Valid() bool {
	switch d {
	case Postgres, MySQL, SQLite:
		return true
	}
	return false
}

// Rebind rewrites a query written with '?' placeholders for d ($1, $2, …
// on PostgreSQL), for tests and tools that share SQL across databases.
func (d Dialect) Rebind(query string) string {
	if d == Postgres {
		return sqldb.Rebind(query)
	}
	return query
}

// driverImports names the package that brings each dialect's driver.
var driverImports = map[Dialect]string{
	Postgres: "github.com/dbqueue/dbqueue/driver/dbqpgx",
	MySQL:    "github.com/dbqueue/dbqueue/driver/dbqmysql",
	SQLite:   "github.com/dbqueue/dbqueue/driver/dbqsqlite",
}

// DriverImport is the import path of the driver package for d, whose
// import makes d's DSNs known to Open and the migrations.
func DriverImport(d Dialect) string { return driverImports[d] }

// DSN is a parsed data source name: which dialect it is, which
// database/sql driver opens it, and the driver's own form of it.
type DSN struct {
	Dialect Dialect
	// Driver is the database/sql driver name: "pgx", "mysql" or "sqlite".
	Driver string
	// Conn is the DSN in the driver's own syntax.
	Conn string
}

// ParseDSN recognises the DSN forms of the driver packages the program
// imports:
//
//	postgres://user:pass@host:5432/db?sslmode=disable   (driver/dbqpgx; also postgresql://)
//	mysql://user:pass@host:3306/db?param=value           (driver/dbqmysql)
//	user:pass@tcp(host:3306)/db?param=value              (driver/dbqmysql, go-sql-driver/mysql form)
//	sqlite:./queue.db  sqlite://./queue.db  sqlite::memory: (driver/dbqsqlite)
//
// A DSN whose driver package is not imported gets an error naming it.
func ParseDSN(dsn string) (DSN, error) {
	o, err := opener(dsn)
	if err != nil {
		return DSN{}, err
	}
	driver, conn, err := o.Parse(strings.TrimSpace(dsn))
	if err != nil {
		return DSN{}, err
	}
	return DSN{Dialect: Dialect(o.Dialect), Driver: driver, Conn: conn}, nil
}

// OpenSQL opens a database/sql pool on the database a DSN names, with the
// driver package the program imports for it, for code that needs plain SQL
// on the queue's database: migrations, tools, tests. The caller closes it.
func OpenSQL(dsn string) (*sql.DB, Dialect, error) {
	parsed, err := ParseDSN(dsn)
	if err != nil {
		return nil, "", err
	}
	db, err := sql.Open(parsed.Driver, parsed.Conn)
	if err != nil {
		return nil, "", fmt.Errorf("dbqueue: open %s: %w", sqldb.Redact(dsn), err)
	}
	return db, parsed.Dialect, nil
}

// opener finds the registered driver for dsn, or says which to import.
func opener(dsn string) (sqldb.Opener, error) {
	dsn = strings.TrimSpace(dsn)
	if dsn == "" {
		return sqldb.Opener{}, fmt.Errorf("dbqueue: empty DSN: name a database, e.g. postgres://user@127.0.0.1:5432/app, mysql://root@127.0.0.1:3306/app or sqlite:./queue.db")
	}
	if o, ok := sqldb.OpenerFor(dsn); ok {
		return o, nil
	}
	scheme, rest, hasScheme := strings.Cut(dsn, ":")
	var want Dialect
	switch strings.ToLower(scheme) {
	case "postgres", "postgresql":
		want = Postgres
	case "mysql":
		want = MySQL
	case "sqlite", "sqlite3", "file":
		want = SQLite
	default:
		if hasScheme && strings.HasPrefix(rest, "//") {
			return sqldb.Opener{}, fmt.Errorf("dbqueue: unknown DSN scheme %q: use postgres://, mysql://, sqlite: or a go-sql-driver/mysql DSN (user:pass@tcp(host:3306)/db)", scheme)
		}
		if strings.Contains(dsn, "@tcp(") || strings.Contains(dsn, "@unix(") {
			want = MySQL
		} else if key, _, kv := strings.Cut(dsn, "="); kv && !strings.ContainsAny(key, ":/@?") {
			return sqldb.Opener{}, fmt.Errorf("dbqueue: DSN %q is a key=value DSN, which dbqueue does not read: write it as a URL, postgres://user:pass@host:5432/db?sslmode=disable", sqldb.Redact(dsn))
		} else {
			return sqldb.Opener{}, fmt.Errorf("dbqueue: DSN %q is not postgres://, mysql://, sqlite: nor a go-sql-driver/mysql DSN (user:pass@tcp(host:3306)/db)", sqldb.Redact(dsn))
		}
	}
	return sqldb.Opener{}, fmt.Errorf("dbqueue: no %s driver in this program for DSN %s: add import _ %q", want, sqldb.Redact(dsn), driverImports[want])
}
