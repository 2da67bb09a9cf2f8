// Package dbtest gives each test its own empty, migrated database on every
// dialect, so behaviour suites run the same cases against real PostgreSQL,
// MySQL/MariaDB and SQLite, in parallel.
//
// Servers are found in this order:
//
//  1. DBQUEUE_TEST_POSTGRES_DSN and DBQUEUE_TEST_MYSQL_DSN, e.g.
//     postgres://postgres@127.0.0.1:5432/test and root@tcp(127.0.0.1:3306)/test.
//     The user must be allowed to create schemas (PostgreSQL) and databases (MySQL).
//  2. Containers, where a Docker engine seems present (DOCKER_HOST is set
//     or /var/run/docker.sock exists): the nested module in ./containers,
//     run once per test binary with `go run`, starts them with
//     testcontainers-go and prints their DSNs. It is a module of its own
//     so that testcontainers stays out of dbqueue's go.mod and go.sum.
//  3. Otherwise the dialect's tests skip, naming the variables — except when
//     CI is set, where a missing database fails the test.
//
// SQLite needs no server and always runs.
package dbtest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	osexec "os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql access for assertions

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
	d, err := dialect.For(string(db.Dialect), dialect.DefaultTables, dialect.MySQLServer{})
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

// IDs runs a query (with '?' placeholders) whose rows are one integer
// each, and returns them in order.
func (db *DB) IDs(t testing.TB, query string, args ...any) []int64 {
	t.Helper()
	rows, err := db.SQL.Query(db.Dialect.Rebind(query), args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return ids
}

// PgxExecModes are pgx's query exec modes, for tests that run in each: a
// transaction pooler needs exec or simple_protocol.
var PgxExecModes = []string{"cache_statement", "cache_describe", "describe_exec", "exec", "simple_protocol"}

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

// WithQuery returns the URL dsn with its query parameter key set to value
// (dsn unchanged if it is not a URL).
func WithQuery(dsn, key, value string) string { return withQuery(dsn, key, value) }

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
	env := envOf(d)
	if dsn := os.Getenv(env); dsn != "" {
		servers.dsn[d] = dsn
		return dsn
	}
	dsn, err := containerDSN(d)
	if err != nil {
		servers.reason[d] = fmt.Sprintf("no %s test database: set %s (e.g. %s), or run a Docker engine so dbtest can start one (%v)",
			d, env, example(d), err)
		missing(t, servers.reason[d])
	}
	servers.dsn[d] = dsn
	return dsn
}

func envOf(d dbqueue.Dialect) string {
	if d == dbqueue.MySQL {
		return EnvMySQL
	}
	return EnvPostgres
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

// containers is the one helper process per test binary that runs the
// database containers: the nested module in ./containers, which keeps
// testcontainers-go out of dbqueue's go.mod. It starts a server for each
// dialect whose variable is unset, prints their DSNs as JSON, and keeps
// them until its stdin (held by this process, never closed) reaches EOF
// when the test binary exits.
var containers struct {
	once    sync.Once
	servers containerServers
	err     error
}

type containerServers struct {
	Postgres      string `json:"postgres"`
	PostgresError string `json:"postgres_error"`
	MySQL         string `json:"mysql"`
	MySQLError    string `json:"mysql_error"`
}

// containerDSN returns the DSN of the dialect's container, starting the
// helper on first use.
func containerDSN(d dbqueue.Dialect) (string, error) {
	containers.once.Do(func() {
		containers.servers, containers.err = startContainers()
	})
	if containers.err != nil {
		return "", containers.err
	}
	dsn, msg := containers.servers.Postgres, containers.servers.PostgresError
	if d == dbqueue.MySQL {
		dsn, msg = containers.servers.MySQL, containers.servers.MySQLError
	}
	if dsn == "" {
		if msg == "" {
			msg = "the containers helper printed no DSN"
		}
		return "", fmt.Errorf("containers helper: %s", msg)
	}
	return dsn, nil
}

// dockerPresent is a cheap guess that a Docker engine exists, so that
// machines without one skip at once instead of compiling testcontainers.
func dockerPresent() bool {
	if os.Getenv("DOCKER_HOST") != "" {
		return true
	}
	_, err := os.Stat("/var/run/docker.sock")
	return err == nil
}

// containersDir is the nested module's directory, next to this file.
func containersDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot locate internal/dbtest's source")
	}
	dir := filepath.Join(filepath.Dir(file), "containers")
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return "", fmt.Errorf("no containers module at %s: %w", dir, err)
	}
	return dir, nil
}

func startContainers() (containerServers, error) {
	var none containerServers
	if !dockerPresent() {
		return none, errors.New("no Docker engine: neither DOCKER_HOST nor /var/run/docker.sock")
	}
	dir, err := containersDir()
	if err != nil {
		return none, err
	}
	var args []string
	for _, d := range []dbqueue.Dialect{dbqueue.Postgres, dbqueue.MySQL} {
		if os.Getenv(envOf(d)) == "" {
			args = append(args, "-"+string(d))
		}
	}
	cmd := osexec.Command("go", append([]string{"run", "."}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -mod=mod"), "GOWORK=off")
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return none, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return none, err
	}
	if err := cmd.Start(); err != nil {
		return none, fmt.Errorf("go run %s: %w", dir, err)
	}
	// Kept for the life of the test binary: the helper stops its containers
	// when this pipe closes, at exit.
	containerStdin = stdin

	type result struct {
		line []byte
		err  error
	}
	got := make(chan result, 1)
	go func() {
		line, err := bufio.NewReader(stdout).ReadBytes('\n')
		got <- result{line, err}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case r := <-got:
		var s containerServers
		if r.err != nil || json.Unmarshal(r.line, &s) != nil {
			_ = cmd.Process.Kill()
			return none, fmt.Errorf("go run in %s printed no DSNs (%q, %v): %s", dir, r.line, r.err, stderr.tail())
		}
		return s, nil
	case <-time.After(10 * time.Minute):
		_ = cmd.Process.Kill()
		return none, fmt.Errorf("go run in %s printed no DSNs in 10m: %s", dir, stderr.tail())
	}
}

// containerStdin holds the helper's stdin open until the test binary exits.
var containerStdin io.WriteCloser

// lockedBuffer collects the helper's stderr for error messages.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) tail() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := strings.TrimSpace(b.buf.String())
	if len(s) > 2000 {
		s = "…" + s[len(s)-2000:]
	}
	return s
}

// RollUpMetrics makes jobs_metrics_hourly the sums of the jobs_metrics
// rows, as workers keep it: for tests that insert minutes by hand and
// read a range in whole hours.
func (db *DB) RollUpMetrics(t testing.TB) {
	t.Helper()
	db.Exec(t, "DELETE FROM jobs_metrics_hourly")
	db.Exec(t, dialect.RollUpMetricsText(db.sql()))
}
