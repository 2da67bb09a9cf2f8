// Package dbtest gives each test its own empty, migrated database on every
// dialect, so behaviour suites run the same cases against real PostgreSQL,
// MySQL/MariaDB and SQLite, in parallel.
//
// Servers are found in this order:
//
//  1. DBQUEUE_TEST_POSTGRES_DSN and DBQUEUE_TEST_MYSQL_DSN, e.g.
//     postgres://postgres@127.0.0.1:5432/test and root@tcp(127.0.0.1:3306)/test.
//     The user must be allowed to create schemas (PostgreSQL) and databases (MySQL).
//  2. testcontainers-go, where a Docker engine answers.
//  3. Otherwise the dialect's tests skip, naming the variables — except when
//     CI is set, where a missing database fails the test.
//
// SQLite needs no server and always runs.
package dbtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql access for assertions
	"github.com/testcontainers/testcontainers-go"
	tcmysql "github.com/testcontainers/testcontainers-go/modules/mysql"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"

	"github.com/dbqueue/dbqueue"
	_ "github.com/dbqueue/dbqueue/driver/dbqmysql" // every test runs on all three
	_ "github.com/dbqueue/dbqueue/driver/dbqpgx"
	_ "github.com/dbqueue/dbqueue/driver/dbqsqlite"
	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/migrations"
)

// The environment variables that name the test servers.
const (
	EnvPostgres = "DBQUEUE_TEST_POSTGRES_DSN"
	EnvMySQL    = "DBQUEUE_TEST_MYSQL_DSN"
)

// Dialects are the dialects every behaviour suite runs on.
var Dialects = []dbqueue.Dialect{dbqueue.Postgres, dbqueue.MySQL, dbqueue.SQLite}

// DB is one test's own database, migrated.
type DB struct {
	Dialect dbqueue.Dialect
	// DSN opens this database with dbqueue.Open or cmd/migrate.
	DSN string
	// SQL is a database/sql handle on it for assertions.
	SQL *sql.DB
}

// Each runs fn as a parallel subtest on every dialect, each with its own
// fresh, migrated database.
func Each(t *testing.T, fn func(t *testing.T, db *DB)) {
	t.Helper()
	for _, d := range Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			fn(t, New(t, d))
		})
	}
}

// New creates an empty database of the dialect for this test, migrates it,
// and drops it when the test ends.
func New(t testing.TB, d dbqueue.Dialect) *DB {
	t.Helper()
	db := Empty(t, d)
	if err := migrations.Up(context.Background(), db.SQL, d); err != nil {
		t.Fatalf("migrate %s: %v", d, err)
	}
	return db
}

// Empty is New without the migrations.
func Empty(t testing.TB, d dbqueue.Dialect) *DB {
	t.Helper()
	ctx := context.Background()
	name := "dbq_" + randomName()
	var dsn string
	switch d {
	case dbqueue.SQLite:
		dsn = "sqlite:" + filepath.Join(t.TempDir(), "queue.db")
	case dbqueue.Postgres:
		base := server(t, d)
		admin := mustOpen(t, "pgx", base)
		exec(t, admin, "CREATE SCHEMA "+name)
		t.Cleanup(func() {
			exec(t, admin, "DROP SCHEMA "+name+" CASCADE")
			admin.Close()
		})
		dsn = withQuery(base, "search_path", name)
	case dbqueue.MySQL:
		base := server(t, d)
		parsed, err := dbqueue.ParseDSN(base)
		if err != nil {
			t.Fatalf("%s: %v", EnvMySQL, err)
		}
		admin := mustOpen(t, "mysql", parsed.Conn)
		exec(t, admin, "CREATE DATABASE "+name+" CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
		t.Cleanup(func() {
			exec(t, admin, "DROP DATABASE "+name)
			admin.Close()
		})
		cfg, _ := mysql.ParseDSN(parsed.Conn)
		cfg.DBName = name
		dsn = cfg.FormatDSN()
	default:
		t.Fatalf("dbtest: unknown dialect %q", d)
	}
	parsed, err := dbqueue.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	db := mustOpen(t, parsed.Driver, parsed.Conn)
	t.Cleanup(func() { db.Close() })
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("reach %s test database: %v", d, err)
	}
	return &DB{Dialect: d, DSN: dsn, SQL: db}
}

// Queue opens a queue on the test database, closed when the test ends.
func (db *DB) Queue(t testing.TB, opts ...dbqueue.Option) *dbqueue.Queue {
	t.Helper()
	q, err := dbqueue.Open(context.Background(), db.DSN, opts...)
	if err != nil {
		t.Fatalf("open queue on %s: %v", db.Dialect, err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

// Now is the SQL expression for the database clock in Unix seconds.
func (db *DB) Now() string { return db.sql().Now() }

// Timestamp turns a Unix-seconds SQL expression into a value comparable
// with a timestamp column (failed_at).
func (db *DB) Timestamp(expr string) string {
	switch db.Dialect {
	case dbqueue.Postgres:
		return "to_timestamp(" + expr + ")"
	case dbqueue.MySQL:
		return "FROM_UNIXTIME(" + expr + ")"
	}
	return "datetime(" + expr + ",'unixepoch')"
}

func (db *DB) sql() dialect.Dialect {
	d, err := dialect.For(string(db.Dialect), dialect.DefaultTables, false, 1)
	if err != nil {
		panic(err)
	}
	return d
}

// Count runs a COUNT(*) query (with '?' placeholders) and returns the count.
func (db *DB) Count(t testing.TB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.SQL.QueryRow(db.Dialect.Rebind(query), args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// Exec runs a statement (with '?' placeholders).
func (db *DB) Exec(t testing.TB, query string, args ...any) {
	t.Helper()
	if _, err := db.SQL.Exec(db.Dialect.Rebind(query), args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

func exec(t testing.TB, db *sql.DB, stmt string) {
	t.Helper()
	if _, err := db.Exec(stmt); err != nil {
		t.Errorf("%s: %v", stmt, err)
	}
}

func mustOpen(t testing.TB, driver, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func withQuery(dsn, key, value string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return dsn
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}

func randomName() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// servers caches the base DSN of each server for the test binary.
var servers struct {
	sync.Mutex
	dsn    map[dbqueue.Dialect]string
	reason map[dbqueue.Dialect]string
}

// server returns the base DSN of the dialect's server, starting a container
// when no variable names one, or skips (fails under CI) when none is found.
func server(t testing.TB, d dbqueue.Dialect) string {
	t.Helper()
	servers.Lock()
	defer servers.Unlock()
	if servers.dsn == nil {
		servers.dsn = map[dbqueue.Dialect]string{}
		servers.reason = map[dbqueue.Dialect]string{}
	}
	if dsn, ok := servers.dsn[d]; ok {
		return dsn
	}
	if reason, ok := servers.reason[d]; ok {
		missing(t, reason)
	}
	env := EnvPostgres
	if d == dbqueue.MySQL {
		env = EnvMySQL
	}
	if dsn := os.Getenv(env); dsn != "" {
		servers.dsn[d] = dsn
		return dsn
	}
	dsn, err := startContainer(d)
	if err != nil {
		servers.reason[d] = fmt.Sprintf("no %s test database: set %s (e.g. %s), or run a Docker engine for testcontainers (%v)",
			d, env, example(d), err)
		missing(t, servers.reason[d])
	}
	servers.dsn[d] = dsn
	return dsn
}

func example(d dbqueue.Dialect) string {
	if d == dbqueue.MySQL {
		return "root@tcp(127.0.0.1:3306)/test"
	}
	return "postgres://postgres@127.0.0.1:5432/test"
}

// missing skips the test, or fails it under CI, where a database that
// cannot be reached is a broken run and never a skip.
func missing(t testing.TB, reason string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatal(reason)
	}
	t.Skip(reason)
}

func startContainer(d dbqueue.Dialect) (dsn string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("testcontainers: %v", r)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	provider, err := testcontainers.ProviderDefault.GetProvider()
	if err != nil {
		return "", err
	}
	defer provider.Close()
	if err := provider.Health(ctx); err != nil {
		return "", err
	}
	switch d {
	case dbqueue.Postgres:
		c, err := tcpostgres.Run(ctx, "postgres:16-alpine",
			tcpostgres.WithDatabase("test"), tcpostgres.BasicWaitStrategies())
		if err != nil {
			return "", err
		}
		return c.ConnectionString(ctx, "sslmode=disable")
	default:
		c, err := tcmysql.Run(ctx, "mysql:8.4", tcmysql.WithDatabase("test"),
			tcmysql.WithUsername("root"), tcmysql.WithPassword("test"))
		if err != nil {
			return "", err
		}
		conn, err := c.ConnectionString(ctx)
		return strings.TrimSpace(conn), err
	}
}
