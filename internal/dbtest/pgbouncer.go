//go:build linux

package dbtest

import (
	"context"
	"fmt"
	"net"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/migrations"
)

// PgBouncerBin is the pgbouncer binary StartPgBouncer runs; a variable so a
// machine with another path can say so.
var PgBouncerBin = envOr("DBQUEUE_TEST_PGBOUNCER", "/usr/sbin/pgbouncer")

// PgBouncer is a private PgBouncer started for one test, in transaction
// pooling mode, in front of one PostgreSQL database. It is stopped and its
// directory removed when the test ends.
type PgBouncer struct {
	// DSN reaches the upstream database through PgBouncer, with no query
	// exec mode set: callers add the one they test
	// (default_query_exec_mode=exec, …).
	DSN string
	// AdminDSN reaches PgBouncer's admin console (SHOW POOLS, SHOW STATS),
	// which speaks only the simple query protocol.
	AdminDSN string
	// PoolSize is the most server connections PgBouncer opens to the
	// database (default_pool_size and max_db_connections).
	PoolSize int

	dir    string
	cmd    *osexec.Cmd
	exited chan struct{}
}

// StartPgBouncer starts a private PgBouncer with pool_mode=transaction in
// front of the PostgreSQL database upstream names (a postgres:// URL whose
// user logs in without a password), opening at most poolSize server
// connections to it. A missing pgbouncer binary skips the test, or fails it
// under CI.
func StartPgBouncer(t testing.TB, upstream string, poolSize int) *PgBouncer {
	t.Helper()
	if _, err := os.Stat(PgBouncerBin); err != nil {
		missing(t, fmt.Sprintf("no pgbouncer binary: %v (apt-get install pgbouncer, or set DBQUEUE_TEST_PGBOUNCER)", err))
	}
	cfg, err := pgx.ParseConfig(upstream)
	if err != nil {
		t.Fatalf("dbtest: StartPgBouncer: upstream DSN: %v", err)
	}
	dir, err := os.MkdirTemp("", "dbqueue-pgbouncer-")
	if err != nil {
		t.Fatal(err)
	}
	b := &PgBouncer{dir: dir, PoolSize: poolSize, exited: make(chan struct{})}
	t.Cleanup(func() {
		b.stop()
		_ = os.RemoveAll(dir)
	})
	port := freePort(t)
	const alias = "dbq"
	ini := fmt.Sprintf(`[databases]
%s = host=%s port=%d dbname=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
admin_users = %s
stats_users = %s
pool_mode = transaction
default_pool_size = %d
min_pool_size = 0
reserve_pool_size = 0
max_db_connections = %d
max_client_conn = 5000
server_reset_query =
logfile = %s
pidfile = %s
`, alias, cfg.Host, cfg.Port, cfg.Database, port,
		filepath.Join(dir, "userlist.txt"), cfg.User, cfg.User,
		poolSize, poolSize, filepath.Join(dir, "pgbouncer.log"), filepath.Join(dir, "pgbouncer.pid"))
	files := map[string]string{
		"pgbouncer.ini": ini,
		"userlist.txt":  fmt.Sprintf("%q \"\"\n", cfg.User),
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := osexec.Command(PgBouncerBin, filepath.Join(dir, "pgbouncer.ini"))
	// Started in its own directory, which the postgres user owns: the
	// test's may be one it cannot enter.
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// pgbouncer refuses to run as root. Go sets the parent-death signal
	// after switching users, so it survives the switch.
	if cred := postgresUser(t, "pgbouncer refuses to run as root"); cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatal(err)
		}
		cmd.SysProcAttr.Credential = cred
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start pgbouncer: %v", err)
	}
	b.cmd = cmd
	go func() { _ = cmd.Wait(); close(b.exited) }()

	b.DSN = fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", cfg.User, port, alias)
	b.AdminDSN = fmt.Sprintf("postgres://%s@127.0.0.1:%d/pgbouncer?sslmode=disable&default_query_exec_mode=simple_protocol", cfg.User, port)
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-b.exited:
			t.Fatalf("pgbouncer exited: %v\n%s", cmd.ProcessState, b.Logs())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("pgbouncer did not listen on port %d in 20s: %v\n%s", port, err, b.Logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return b
}

func (b *PgBouncer) stop() {
	if b.cmd == nil {
		return
	}
	_ = b.cmd.Process.Signal(syscall.SIGINT) // PgBouncer's immediate shutdown
	select {
	case <-b.exited:
	case <-time.After(5 * time.Second):
		_ = b.cmd.Process.Kill()
		<-b.exited
	}
	b.cmd = nil
}

// Logs returns PgBouncer's log, for failure reports.
func (b *PgBouncer) Logs() string {
	data, _ := os.ReadFile(filepath.Join(b.dir, "pgbouncer.log"))
	return string(data)
}

// Admin runs a SHOW command on the admin console and returns its rows as
// maps from column name to text.
func (b *PgBouncer) Admin(ctx context.Context, command string) ([]map[string]string, error) {
	conn, err := pgx.Connect(ctx, b.AdminDSN)
	if err != nil {
		return nil, fmt.Errorf("pgbouncer admin console: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, command)
	if err != nil {
		return nil, fmt.Errorf("pgbouncer admin %s: %w", command, err)
	}
	defer rows.Close()
	var out []map[string]string
	fields := rows.FieldDescriptions()
	for rows.Next() {
		raw := rows.RawValues()
		row := map[string]string{}
		for i, f := range fields {
			row[f.Name] = string(raw[i])
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgbouncer admin %s: %w", command, err)
	}
	return out, nil
}

// ServerConns reports how many server connections PgBouncer holds to its
// database now (SHOW POOLS: active, idle, used, tested and logging in).
func (b *PgBouncer) ServerConns(ctx context.Context) (int, error) {
	pools, err := b.Admin(ctx, "SHOW POOLS")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range pools {
		if p["database"] == "pgbouncer" {
			continue
		}
		for _, col := range []string{"sv_active", "sv_idle", "sv_used", "sv_tested", "sv_login"} {
			v, _ := strconv.Atoi(p[col])
			n += v
		}
	}
	return n, nil
}

// DirectAppName is the application_name of NewDatabase's DSN, so that a
// test counting the server connections PgBouncer opens can leave out the
// direct ones.
const DirectAppName = "dbqtest_direct"

// NewDatabase creates a fresh, migrated PostgreSQL database (not a schema:
// PgBouncer in transaction pooling cannot carry a per-client search_path)
// on the test server, and drops it when the test ends. Its DSN is direct,
// naming the database, with application_name DirectAppName.
func NewDatabase(t testing.TB) *DB {
	t.Helper()
	base := server(t, dbqueue.Postgres)
	name := "dbq_" + randomName()
	admin := mustOpen(t, "pgx", base)
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		admin.Close()
		t.Fatalf("create database %s: %v", name, err)
	}
	dsn := withQuery(withDatabase(t, base, name), "application_name", DirectAppName)
	db := mustOpen(t, "pgx", dsn)
	t.Cleanup(func() {
		db.Close()
		// WITH (FORCE) ends what a stopped PgBouncer or a killed child
		// left behind (PostgreSQL 13+).
		exec(t, admin, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		admin.Close()
	})
	if err := migrations.Up(context.Background(), db, dbqueue.Postgres); err != nil {
		t.Fatalf("migrate %s: %v", name, err)
	}
	return &DB{Dialect: dbqueue.Postgres, DSN: dsn, SQL: db}
}

// withDatabase returns the postgres:// URL dsn naming database name instead.
func withDatabase(t testing.TB, dsn, name string) string {
	t.Helper()
	scheme, rest, ok := strings.Cut(dsn, "://")
	if !ok {
		t.Fatalf("dbtest: %s is not a postgres:// URL", EnvPostgres)
	}
	hostPart, query, _ := strings.Cut(rest, "?")
	hostPart, _, _ = strings.Cut(hostPart, "/")
	out := scheme + "://" + hostPart + "/" + name
	if query != "" {
		out += "?" + query
	}
	return out
}

// PgBouncerQueueDSN returns dsn with the pgx query exec mode mode set
// (exec, cache_describe, simple_protocol, describe_exec), as a dbqueue
// user behind PgBouncer sets it.
func PgBouncerQueueDSN(dsn, mode string) string {
	return withQuery(dsn, "default_query_exec_mode", mode)
}
