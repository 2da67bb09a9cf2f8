//go:build linux

package dbtest

import (
	"context"
	"fmt"
	"net"
	"os"
	osexec "os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/migrations"
)

// Server is a private database server started for one test, in a temporary
// directory on a free loopback port, so the test may crash and restart it
// without touching the servers other tests share. It is stopped and its
// directory removed when the test ends.
type Server struct {
	Dialect dbqueue.Dialect
	// DSN reaches the server as its superuser, naming no test database.
	DSN string

	t       testing.TB
	dir     string
	port    int
	mariadb *osexec.Cmd   // the running mariadbd, nil for PostgreSQL
	exited  chan struct{} // closed when mariadb has exited
	args    []string      // more mariadbd options (a Galera node's: galera.go)
}

// The server binaries a private server needs; variables so a machine with
// other paths can say so.
var (
	PostgresBin = envOr("DBQUEUE_TEST_PG_BIN", "/usr/lib/postgresql/15/bin")
	MariaDBD    = envOr("DBQUEUE_TEST_MARIADBD", "/usr/sbin/mariadbd")
	MariaDBInit = envOr("DBQUEUE_TEST_MARIADB_INSTALL_DB", "/usr/bin/mariadb-install-db")
)

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// StartServer initialises and starts a private server of the dialect
// (PostgreSQL or MariaDB). Missing binaries skip the test, or fail it under
// CI.
func StartServer(t testing.TB, d dbqueue.Dialect) *Server {
	t.Helper()
	s := &Server{Dialect: d, t: t, port: freePort(t)}
	switch d {
	case dbqueue.Postgres:
		s.initPostgres()
	case dbqueue.MySQL:
		s.initMariaDB()
	default:
		t.Fatalf("dbtest: no private server for %s", d)
	}
	s.start()
	return s
}

func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// asPostgres runs a PostgreSQL tool as the postgres OS user when the test
// runs as root (initdb and postgres refuse to run as root), in dir: a
// directory of the server's own that the postgres user can enter. The
// test's working directory may be one it cannot (a clone in a fresh
// mktemp -d, a home directory of mode 0700), and a child that starts
// there fails with "Permission denied".
func asPostgres(dir, name string, args ...string) *osexec.Cmd {
	var cmd *osexec.Cmd
	if os.Geteuid() == 0 {
		cmd = osexec.Command("runuser", append([]string{"-u", "postgres", "--", name}, args...)...)
	} else {
		cmd = osexec.Command(name, args...)
	}
	cmd.Dir = dir
	return cmd
}

// postgresUser is the postgres OS user's credential when the test runs as
// root, for a server that refuses to run as root (why says which); nil
// otherwise. With no postgres user it skips the test, or fails it under
// CI.
func postgresUser(t testing.TB, why string) *syscall.Credential {
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		missing(t, why+" and there is no postgres OS user to run it as: "+err.Error())
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

func (s *Server) initPostgres() {
	t := s.t
	initdb := filepath.Join(PostgresBin, "initdb")
	if _, err := os.Stat(initdb); err != nil {
		missing(t, fmt.Sprintf("no PostgreSQL server binaries for a private server: %v (set DBQUEUE_TEST_PG_BIN)", err))
	}
	s.mkdir()
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			missing(t, "initdb refuses to run as root and there is no postgres OS user to run it as: "+err.Error())
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(s.dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	out, err := asPostgres(s.dir, initdb, "-D", s.data(), "-U", "postgres", "-A", "trust", "--no-sync").CombinedOutput()
	if err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	s.DSN = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

func (s *Server) initMariaDB() {
	t := s.t
	for _, bin := range []string{MariaDBD, MariaDBInit} {
		if _, err := os.Stat(bin); err != nil {
			missing(t, fmt.Sprintf("no MariaDB binaries for a private server: %v (set DBQUEUE_TEST_MARIADBD and DBQUEUE_TEST_MARIADB_INSTALL_DB)", err))
		}
	}
	s.mkdir()
	// --no-defaults: the system my.cnf sets user=mysql and its own datadir.
	// Root then logs in from localhost with no password.
	args := []string{"--no-defaults", "--datadir=" + s.data(), "--auth-root-authentication-method=normal", "--skip-test-db"}
	if os.Geteuid() == 0 {
		args = append(args, "--user=root")
	}
	install := osexec.Command(MariaDBInit, args...)
	install.Dir = s.dir // every child starts in a directory of its own
	out, err := install.CombinedOutput()
	if err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	s.DSN = fmt.Sprintf("root@tcp(127.0.0.1:%d)/", s.port)
}

func (s *Server) mkdir() {
	dir, err := os.MkdirTemp("", "dbqueue-"+string(s.Dialect)+"-")
	if err != nil {
		s.t.Fatal(err)
	}
	s.dir = dir
	s.t.Cleanup(func() {
		s.stop()
		_ = os.RemoveAll(dir)
	})
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }
func (s *Server) log() string  { return filepath.Join(s.dir, "server.log") }

// start starts the server and waits until it accepts connections.
func (s *Server) start() {
	t := s.t
	switch s.Dialect {
	case dbqueue.Postgres:
		// fsync off: the test kills processes, not the machine, and what a
		// commit wrote reaches the kernel either way.
		opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off -c max_connections=200", s.port, s.dir)
		out, err := asPostgres(s.dir, filepath.Join(PostgresBin, "pg_ctl"), "-D", s.data(), "-l", s.log(), "-w", "-t", "60", "-o", opts, "start").CombinedOutput()
		if err != nil {
			logs, _ := os.ReadFile(s.log())
			t.Fatalf("pg_ctl start: %v\n%s\n%s", err, out, logs)
		}
	case dbqueue.MySQL:
		args := []string{"--no-defaults", "--datadir=" + s.data(), "--port=" + strconv.Itoa(s.port),
			"--bind-address=127.0.0.1", "--socket=" + filepath.Join(s.dir, "sock"),
			"--pid-file=" + filepath.Join(s.dir, "pid"), "--log-error=" + s.log(),
			"--skip-log-bin", "--innodb-flush-log-at-trx-commit=2", "--max-connections=300"}
		if os.Geteuid() == 0 {
			args = append(args, "--user=root")
		}
		args = append(args, s.args...)
		cmd := osexec.Command(MariaDBD, args...)
		cmd.Dir = s.dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatalf("start mariadbd: %v", err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		s.mariadb, s.exited = cmd, exited
		deadline := time.Now().Add(60 * time.Second)
		for {
			err := s.ping()
			if err == nil {
				break
			}
			select {
			case <-exited:
				logs, _ := os.ReadFile(s.log())
				t.Fatalf("mariadbd exited: %v\n%s", cmd.ProcessState, logs)
			default:
			}
			if time.Now().After(deadline) {
				logs, _ := os.ReadFile(s.log())
				t.Fatalf("mariadbd did not accept connections in 60s: %v\n%s", err, logs)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func (s *Server) ping() error {
	db, _, err := dbqueue.OpenSQL(s.DSN)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return db.PingContext(ctx)
}

// stop is an immediate shutdown: PostgreSQL's immediate mode (no
// checkpoint, crash recovery at the next start) or SIGKILL for mariadbd.
func (s *Server) stop() {
	switch s.Dialect {
	case dbqueue.Postgres:
		if _, err := os.Stat(filepath.Join(s.data(), "postmaster.pid")); err != nil {
			return
		}
		out, err := asPostgres(s.dir, filepath.Join(PostgresBin, "pg_ctl"), "-D", s.data(), "-m", "immediate", "-w", "stop").CombinedOutput()
		if err != nil {
			s.t.Errorf("pg_ctl stop -m immediate: %v\n%s", err, out)
		}
	case dbqueue.MySQL:
		if s.mariadb == nil {
			return
		}
		_ = s.mariadb.Process.Kill()
		<-s.exited
		s.mariadb = nil
	}
}

// Restart shuts the server down immediately, as a crash does, and starts it
// again on the same port and data directory, waiting until it accepts
// connections. Every open connection is lost.
func (s *Server) Restart() {
	s.t.Helper()
	s.stop()
	s.start()
}

// Logs returns the server's log, for failure reports.
func (s *Server) Logs() string {
	b, _ := os.ReadFile(s.log())
	return string(b)
}

// NewOn is New on a private server: a fresh, migrated database (a schema on
// PostgreSQL) for the test.
func NewOn(t testing.TB, s *Server) *DB {
	t.Helper()
	name := "dbq_" + randomName()
	var dsn string
	switch s.Dialect {
	case dbqueue.Postgres:
		admin := mustOpen(t, "pgx", s.DSN)
		defer admin.Close()
		exec(t, admin, "CREATE SCHEMA "+name)
		dsn = withQuery(s.DSN, "search_path", name)
	case dbqueue.MySQL:
		parsed, err := dbqueue.ParseDSN(s.DSN)
		if err != nil {
			t.Fatal(err)
		}
		admin := mustOpen(t, "mysql", parsed.Conn)
		defer admin.Close()
		exec(t, admin, "CREATE DATABASE "+name+" CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
		cfg, _ := mysql.ParseDSN(parsed.Conn)
		cfg.DBName = name
		dsn = cfg.FormatDSN()
	}
	parsed, err := dbqueue.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	db := mustOpen(t, parsed.Driver, parsed.Conn)
	t.Cleanup(func() { db.Close() })
	if err := migrations.Up(context.Background(), db, s.Dialect); err != nil {
		t.Fatalf("migrate %s: %v", s.Dialect, err)
	}
	return &DB{Dialect: s.Dialect, DSN: dsn, SQL: db}
}
