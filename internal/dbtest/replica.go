//go:build linux

package dbtest

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
)

// Replicated is a private PostgreSQL primary with one asynchronous streaming
// replica, for failover tests: the test stops the primary as a crash does,
// promotes the replica by hand, and checks what clients configured with both
// hosts see. (For synchronous replication with a real failover manager, see
// Patroni.) Both servers are stopped and their directories removed when the
// test ends.
type Replicated struct {
	Primary *Server
	Replica *Server
	// Options are those the pair was started with.
	Options ReplicaOptions
	// DSN names both servers, primary first, with
	// target_session_attrs=read-write: pgx tries each host in turn and keeps
	// the first that accepts writes, so after a promotion new connections
	// reach the new primary. It names no test database (see NewOnReplicated).
	DSN string

	t     testing.TB
	delay *delayProxy // nil without ReplicaOptions.Delay
}

// ReplicaOptions say how the replica follows the primary.
type ReplicaOptions struct {
	// Delay holds the replication stream from primary to replica this
	// long in a proxy, as a replica in another zone sees it. StopPrimary
	// drops what the proxy holds, as a primary whose host or network
	// fails takes the WAL it had not yet delivered with it: commits
	// acknowledged in the last Delay before the stop are lost. On
	// loopback without it the replica is microseconds behind.
	Delay time.Duration
}

// StartReplicated starts a private primary (as StartServer does) and a
// streaming replica cloned from it with pg_basebackup -R, on its own free
// port, in hot standby, and returns once the replica streams. Missing
// binaries skip the test, or fail it under CI.
func StartReplicated(t testing.TB, opts ReplicaOptions) *Replicated {
	t.Helper()
	basebackup := filepath.Join(PostgresBin, "pg_basebackup")
	if _, err := os.Stat(basebackup); err != nil {
		missing(t, fmt.Sprintf("no pg_basebackup for a private replica: %v (set DBQUEUE_TEST_PG_BIN)", err))
	}
	primary := StartServer(t, dbqueue.Postgres)
	replica := &Server{Dialect: dbqueue.Postgres, t: t, port: freePort(t)}
	replica.mkdir()
	if err := chownPostgres(replica.dir); err != nil {
		missing(t, "pg_basebackup must run as the postgres OS user: "+err.Error())
	}
	// -R writes primary_conninfo and standby.signal; the application name
	// is what pg_stat_replication and synchronous_standby_names see.
	upstream := primary.port
	var delay *delayProxy
	if opts.Delay > 0 {
		delay = startDelayProxy(t, primary.port, opts.Delay)
		upstream = delay.port
	}
	conninfo := fmt.Sprintf("host=127.0.0.1 port=%d user=postgres application_name=dbq_replica", upstream)
	out, err := asPostgres(replica.dir, basebackup, "-d", conninfo, "-D", replica.data(), "-R", "-X", "stream", "--no-sync", "-c", "fast").CombinedOutput()
	if err != nil {
		t.Fatalf("pg_basebackup: %v\n%s\n%s", err, out, primary.Logs())
	}
	replica.DSN = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", replica.port)
	replica.start()

	r := &Replicated{
		Primary: primary, Replica: replica, Options: opts, t: t, delay: delay,
		DSN: fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write", primary.port, replica.port),
	}
	admin := mustOpen(t, "pgx", primary.DSN)
	defer admin.Close()
	r.poll(60*time.Second, "the replica to stream", func(ctx context.Context) (bool, error) {
		var state, syncState string
		err := admin.QueryRowContext(ctx, "SELECT state, sync_state FROM pg_stat_replication WHERE application_name = 'dbq_replica'").Scan(&state, &syncState)
		if err == sql.ErrNoRows {
			return false, nil
		}
		return err == nil && state == "streaming" && syncState == "async", err
	})
	return r
}

// chownPostgres gives dir to the postgres OS user when the test runs as
// root, as the PostgreSQL tools refuse to run as root.
func chownPostgres(dir string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("no postgres OS user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return os.Chown(dir, uid, gid)
}

// poll is pollFor with both servers' logs.
func (r *Replicated) poll(limit time.Duration, what string, done func(ctx context.Context) (bool, error)) {
	r.t.Helper()
	pollFor(r.t, limit, what, done, func() string {
		return "primary log:\n" + r.Primary.Logs() + "\nreplica log:\n" + r.Replica.Logs()
	})
}

// pollFor asks done every 20ms (each call bounded to 2s) until it says
// true, failing the test with logs() after limit. Errors count as not
// done yet (a server may be starting).
func pollFor(t testing.TB, limit time.Duration, what string, done func(ctx context.Context) (bool, error), logs func() string) {
	t.Helper()
	deadline := time.Now().Add(limit)
	var last error
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		ok, err := done(ctx)
		cancel()
		if ok {
			return
		}
		if err != nil {
			last = err
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: not within %v (last error: %v)\n%s", what, limit, last, logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// StopPrimary shuts the primary down immediately, as a crash does: SIGQUIT
// to the postmaster, PostgreSQL's immediate mode (no checkpoint, every
// connection cut), sent directly rather than through pg_ctl so the primary
// stops acknowledging commits within a millisecond of the call. With
// ReplicaOptions.Delay the replication stream is cut in the same instant
// and what the proxy held is dropped. It returns once the server has
// exited.
func (r *Replicated) StopPrimary() {
	r.t.Helper()
	pidFile := filepath.Join(r.Primary.data(), "postmaster.pid")
	b, err := os.ReadFile(pidFile)
	if err != nil {
		r.t.Fatalf("StopPrimary: %v", err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		r.t.Fatalf("StopPrimary: postmaster.pid: %v", err)
	}
	if r.delay != nil {
		r.delay.cut()
	}
	if err := syscall.Kill(pid, syscall.SIGQUIT); err != nil {
		r.t.Fatalf("StopPrimary: SIGQUIT to the postmaster %d: %v", pid, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		// The postmaster removes its pid file as it exits.
		if _, err := os.Stat(pidFile); os.IsNotExist(err) && syscall.Kill(pid, 0) == syscall.ESRCH {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("StopPrimary: the primary did not exit within 30s of SIGQUIT\n%s", r.Primary.Logs())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Promote promotes the replica (pg_promote, waiting for it) and returns
// once it accepts writes: pg_is_in_recovery() is false and
// transaction_read_only is off, which is what target_session_attrs
// checks.
func (r *Replicated) Promote() {
	r.t.Helper()
	admin := mustOpen(r.t, "pgx", r.Replica.DSN)
	defer admin.Close()
	var promoted bool
	if err := admin.QueryRow("SELECT pg_promote(wait => true, wait_seconds => 60)").Scan(&promoted); err != nil || !promoted {
		r.t.Fatalf("pg_promote: %v (promoted %v)\n%s", err, promoted, r.Replica.Logs())
	}
	r.poll(60*time.Second, "the promoted replica to accept writes", func(ctx context.Context) (bool, error) {
		var recovery bool
		var readOnly string
		err := admin.QueryRowContext(ctx, "SELECT pg_is_in_recovery(), current_setting('transaction_read_only')").Scan(&recovery, &readOnly)
		return err == nil && !recovery && readOnly == "off", err
	})
}

// NewOnReplicated is NewOn for a replicated pair: a fresh, migrated schema
// made on the primary and streamed to the replica, and a DSN naming both
// hosts (see Replicated.DSN), so the DB's handles follow a promotion.
func NewOnReplicated(t testing.TB, r *Replicated) *DB {
	t.Helper()
	return newOnMultiHost(t, r.DSN)
}

// newOnMultiHost is NewOn for a DSN naming several PostgreSQL hosts with
// target_session_attrs=read-write: the schema is made on whichever accepts
// writes.
func newOnMultiHost(t testing.TB, dsn string) *DB {
	t.Helper()
	db := NewOn(t, &Server{Dialect: dbqueue.Postgres, DSN: dsn, t: t})
	if u, err := url.Parse(db.DSN); err != nil || u.Query().Get("target_session_attrs") != "read-write" {
		t.Fatalf("DSN %q lost target_session_attrs (%v)", db.DSN, err)
	}
	return db
}

// delayProxy forwards the replica's connections to the primary, holding
// what the primary sends for delay; cut drops it all and refuses new
// connections.
type delayProxy struct {
	port  int
	ln    net.Listener
	delay time.Duration

	mu    sync.Mutex
	cutAt bool
	conns []net.Conn
}

func startDelayProxy(t testing.TB, target int, delay time.Duration) *delayProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &delayProxy{port: ln.Addr().(*net.TCPAddr).Port, ln: ln, delay: delay}
	t.Cleanup(p.cut)
	go func() {
		for {
			down, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", target))
			if err != nil || !p.track(down, up) {
				down.Close()
				if up != nil {
					up.Close()
				}
				continue
			}
			go func() { _, _ = io.Copy(up, down); up.Close() }()
			go p.delayed(down, up)
		}
	}()
	return p
}

// track records a connection pair unless the proxy was cut.
func (p *delayProxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cutAt {
		return false
	}
	p.conns = append(p.conns, conns...)
	return true
}

type chunk struct {
	b  []byte
	at time.Time
}

// delayed copies from up to down, each chunk delay after it was read.
func (p *delayProxy) delayed(down, up net.Conn) {
	defer down.Close()
	held := make(chan chunk, 1<<14)
	defer func() {
		go func() {
			for range held {
			}
		}()
	}() // let the reader end
	go func() {
		defer close(held)
		for {
			b := make([]byte, 32<<10)
			n, err := up.Read(b)
			if n > 0 {
				held <- chunk{b[:n], time.Now()}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range held {
		time.Sleep(time.Until(c.at.Add(p.delay)))
		p.mu.Lock()
		cut := p.cutAt
		p.mu.Unlock()
		if cut {
			return
		}
		if _, err := down.Write(c.b); err != nil {
			return
		}
	}
}

func (p *delayProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cutAt {
		return
	}
	p.cutAt = true
	p.ln.Close()
	for _, c := range p.conns {
		c.Close()
	}
}
