//go:build linux

// Package pgbouncer_test runs dbqueue through a private PgBouncer in
// transaction pooling mode: an exactly-once ledger across worker processes
// on every pgx query exec mode that suits a transaction pooler, and
// LISTEN on a direct connection while the pool goes through PgBouncer.
// It is a package of its own so that it runs beside the other packages.
package pgbouncer_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/driver/dbqpgx"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/worker"
)

// The worker processes of TestLedgerThroughPgBouncer are this test binary
// run again with ledgerChild set.
const (
	ledgerChild = "DBQUEUE_PGBOUNCER_CHILD"
	jobName     = "pgbouncer-ledger"
	// directApp is the application_name of every direct connection, so
	// that counting the server connections PgBouncer makes leaves them out.
	directApp = dbtest.DirectAppName
	listenApp = "dbqtest_listen"
)

func init() {
	if os.Getenv(ledgerChild) != "" {
		os.Exit(childMain())
	}
}

// childMain is one worker process: a queue whose pool (pgx, or database/sql
// with mode "stdlib") goes through PgBouncer with the query exec mode
// given, LISTENing on a direct connection when DBQUEUE_CHILD_LISTEN names
// one, and a handler that records each run in the ledger table through
// the same PgBouncer. It runs until SIGTERM.
func childMain() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "pgbouncer child:", err); return 2 }
	env := func(key string) int { n, _ := strconv.Atoi(os.Getenv(key)); return n }
	mode := os.Getenv(ledgerChild)
	dsn := os.Getenv("DBQUEUE_CHILD_DSN")
	logFile, err := os.Create(os.Getenv("DBQUEUE_CHILD_LOG"))
	if err != nil {
		return fail(err)
	}
	defer logFile.Close()
	logger := slog.New(slog.NewJSONHandler(logFile, &slog.HandlerOptions{Level: slog.LevelWarn}))

	opts := []dbqueue.Option{dbqueue.WithoutListen()}
	if l := os.Getenv("DBQUEUE_CHILD_LISTEN"); l != "" {
		opts = []dbqueue.Option{dbqueue.WithListenDSN(l)}
	}
	var (
		drv    dbqueue.Driver
		record func(ctx context.Context, id int64, attempt int) error
	)
	insert := "INSERT INTO ledger (job_id, attempt, pid) VALUES ($1, $2, $3)"
	if mode == "stdlib" {
		db, err := sql.Open("pgx", dbtest.PgBouncerQueueDSN(dsn, "exec"))
		if err != nil {
			return fail(err)
		}
		defer db.Close()
		db.SetMaxOpenConns(env("DBQUEUE_CHILD_CONNS"))
		drv = dbqpgx.NewSQL(db)
		record = func(ctx context.Context, id int64, attempt int) error {
			_, err := db.ExecContext(ctx, insert, id, attempt, os.Getpid())
			return err
		}
	} else {
		cfg, err := pgxpool.ParseConfig(dbtest.PgBouncerQueueDSN(dsn, mode))
		if err != nil {
			return fail(err)
		}
		cfg.MaxConns = int32(env("DBQUEUE_CHILD_CONNS"))
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return fail(err)
		}
		defer pool.Close()
		drv = dbqpgx.New(pool)
		record = func(ctx context.Context, id int64, attempt int) error {
			_, err := pool.Exec(ctx, insert, id, attempt, os.Getpid())
			return err
		}
	}
	q, err := dbqueue.New(ctx, drv, opts...)
	if err != nil {
		return fail(err)
	}
	defer q.Close()
	w, err := worker.New(q, worker.Options{
		Concurrency: env("DBQUEUE_CHILD_CONCURRENCY"),
		Sleep:       200 * time.Millisecond,
		Logger:      logger,
		// Metrics and heartbeats written often, through PgBouncer too.
		MetricsInterval: 100 * time.Millisecond,
	})
	if err != nil {
		return fail(err)
	}
	work := time.Duration(env("DBQUEUE_CHILD_WORK_MS")) * time.Millisecond
	w.Handle(jobName, func(ctx context.Context, job *dbqueue.Job) error {
		if err := record(ctx, job.ID, job.Attempts); err != nil {
			return fmt.Errorf("ledger insert: %w", err)
		}
		time.Sleep(work) // the job's own work, after its effect committed
		return nil
	})
	// Tell the test this process is up, so that every process gets work.
	if err := os.WriteFile(os.Getenv("DBQUEUE_CHILD_LOG")+".ready", nil, 0o644); err != nil {
		return fail(err)
	}
	if err := w.Run(ctx); err != nil {
		return fail(err)
	}
	return 0
}

// TestLedgerThroughPgBouncer pushes jobs through a PgBouncer in transaction
// pooling mode (single pushes, batches, and pushes inside pgx and
// database/sql transactions, a fifth of them rolled back) while worker
// processes — one per suitable pgx query exec mode, and one on database/sql
// — with hundreds of goroutines between them and several times as many
// client connections as PgBouncer has server connections, work them
// through the same PgBouncer. Every committed job must run exactly once,
// no rolled-back job may run, every job must be deleted, no statement may
// fail for want of a prepared statement, and PgBouncer must never have
// held more than its pool of server connections.
func TestLedgerThroughPgBouncer(t *testing.T) {
	t.Parallel()
	const (
		poolSize    = 20
		procs       = 4
		concurrency = 64
		clientConns = 24 // per process: 96 clients for 20 server connections
		pushers     = 4
		rounds      = 150 // per pusher, each 1 to 10 jobs
	)
	modes := []string{"exec", "cache_describe", "simple_protocol", "stdlib"}
	ctx := context.Background()
	db := dbtest.NewDatabase(t)
	direct := dbtest.WithAppName(dbqueue.Postgres, db.DSN, directApp)
	bouncer := dbtest.StartPgBouncer(t, db.DSN, poolSize)
	db.Exec(t, "CREATE TABLE ledger (job_id BIGINT NOT NULL, attempt INTEGER NOT NULL, pid INTEGER NOT NULL)")
	db.Exec(t, "CREATE TABLE orders (id BIGSERIAL PRIMARY KEY, job_id BIGINT)")

	// The watcher: a direct connection that samples how many server
	// connections PgBouncer holds, as PgBouncer and as PostgreSQL see it.
	watch, err := pgx.Connect(ctx, direct)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close(ctx)
	var dbName string
	if err := watch.QueryRow(ctx, "SELECT current_database()").Scan(&dbName); err != nil {
		t.Fatal(err)
	}
	var maxPools, maxBackends atomic.Int64
	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		tick := time.NewTicker(25 * time.Millisecond)
		defer tick.Stop()
		for {
			if n, err := bouncer.ServerConns(watchCtx); err == nil && int64(n) > maxPools.Load() {
				maxPools.Store(int64(n))
			}
			var n int64
			if err := watch.QueryRow(watchCtx, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = $1 AND backend_type = 'client backend' AND application_name NOT IN ($2, $3)`,
				dbName, directApp, listenApp).Scan(&n); err == nil && n > maxBackends.Load() {
				maxBackends.Store(n)
			}
			select {
			case <-watchCtx.Done():
				return
			case <-tick.C:
			}
		}
	}()

	// The workers.
	dir := t.TempDir()
	type child struct {
		cmd    *exec.Cmd
		mode   string
		log    string
		exited chan struct{}
	}
	var children []child
	for i := range procs {
		c := child{mode: modes[i%len(modes)], log: filepath.Join(dir, fmt.Sprintf("worker-%d.log", i)), exited: make(chan struct{})}
		c.cmd = exec.Command(os.Args[0], "-test.run=^$")
		c.cmd.Env = append(os.Environ(),
			ledgerChild+"="+c.mode,
			"DBQUEUE_CHILD_DSN="+bouncer.DSN,
			"DBQUEUE_CHILD_CONNS="+strconv.Itoa(clientConns),
			"DBQUEUE_CHILD_CONCURRENCY="+strconv.Itoa(concurrency),
			"DBQUEUE_CHILD_WORK_MS=2",
			"DBQUEUE_CHILD_LOG="+c.log)
		if i%2 == 1 { // half LISTEN directly (database/sql among them), half poll
			c.cmd.Env = append(c.cmd.Env, "DBQUEUE_CHILD_LISTEN="+dbtest.WithAppName(dbqueue.Postgres, db.DSN, listenApp))
		}
		c.cmd.Stderr = os.Stderr
		if err := c.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmd, exited := c.cmd, c.exited
		go func() { _ = cmd.Wait(); close(exited) }()
		t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
		children = append(children, c)
	}

	// Every worker process is up before the first push.
	for i, c := range children {
		for {
			if _, err := os.Stat(c.log + ".ready"); err == nil {
				break
			}
			select {
			case <-c.exited:
				t.Fatalf("worker process %d (%s) exited at start: %v", i, c.mode, c.cmd.ProcessState)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}

	// The pushers, through PgBouncer too.
	start := time.Now()
	q, pool := openQueue(ctx, t, dbtest.PgBouncerQueueDSN(bouncer.DSN, "exec"), 8)
	defer pool.Close()
	defer q.Close()
	sqlDB, err := sql.Open("pgx", dbtest.PgBouncerQueueDSN(bouncer.DSN, "exec"))
	if err != nil {
		t.Fatal(err)
	}
	defer sqlDB.Close()
	sqlDB.SetMaxOpenConns(4)

	var (
		mu                   sync.Mutex
		committed, discarded []int64
		kinds                = map[string]int{}
	)
	pushErr := make(chan error, pushers+1)
	var wg sync.WaitGroup
	for p := range pushers {
		wg.Go(func() {
			for r := range rounds {
				n := 1 + (p*rounds+r)%10
				jobs := make([]dbqueue.NewJob, n)
				for i := range jobs {
					jobs[i] = dbqueue.NewJob{Name: jobName}
				}
				var (
					ids      []int64
					kind     string
					rollback = r%5 == 4
					err      error
				)
				switch r % 4 {
				case 0:
					kind = "push"
					var id int64
					if id, err = q.Push(ctx, jobs[0]); err == nil {
						ids = []int64{id}
					}
					rollback = false
				case 1:
					kind = "push many"
					ids, err = q.PushMany(ctx, jobs)
					rollback = false
				case 2:
					kind = "pgx tx"
					err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
						if ids, err = dbqpgx.PushTx(ctx, q, tx, jobs...); err != nil {
							return err
						}
						if _, err := tx.Exec(ctx, "INSERT INTO orders (job_id) SELECT unnest($1::bigint[])", ids); err != nil {
							return err
						}
						if rollback {
							return errRollback
						}
						return nil
					})
				case 3:
					kind = "sql tx"
					var tx *sql.Tx
					if tx, err = sqlDB.BeginTx(ctx, nil); err != nil {
						break
					}
					if ids, err = q.PushTx(ctx, tx, jobs...); err != nil {
						_ = tx.Rollback()
						break
					}
					if rollback {
						err = tx.Rollback()
						if err == nil {
							err = errRollback
						}
					} else {
						err = tx.Commit()
					}
				}
				mu.Lock()
				switch {
				case err == nil:
					committed = append(committed, ids...)
					kinds[kind] += len(ids)
				case err == errRollback:
					discarded = append(discarded, ids...)
					kinds[kind+" rolled back"] += len(ids)
				}
				mu.Unlock()
				if err != nil && err != errRollback {
					pushErr <- fmt.Errorf("%s: %w", kind, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(pushErr)
	for err := range pushErr {
		t.Fatalf("push through PgBouncer: %v", err)
	}
	pushed := time.Since(start)

	// Wait for the ledger to hold every committed job and the queue to
	// empty.
	deadline := time.Now().Add(40 * time.Second)
	for {
		var runs, left int
		err := db.SQL.QueryRow("SELECT (SELECT count(*) FROM ledger), (SELECT count(*) FROM jobs) + (SELECT count(*) FROM failed_jobs)").Scan(&runs, &left)
		if err == nil && runs >= len(committed) && left == 0 {
			break
		}
		for i, c := range children {
			select {
			case <-c.exited:
				t.Fatalf("worker process %d (%s) exited early: %v", i, c.mode, c.cmd.ProcessState)
			default:
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 40s the ledger has %d runs of %d jobs, and %d rows are left in jobs and failed_jobs (err %v)", runs, len(committed), left, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	took := time.Since(start)
	stopWatch()
	<-watched
	for i, c := range children {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.exited:
			if !c.cmd.ProcessState.Success() {
				t.Errorf("worker process %d (%s): %v", i, c.mode, c.cmd.ProcessState)
			}
		case <-time.After(20 * time.Second):
			t.Errorf("worker process %d (%s) did not stop within 20s of SIGTERM", i, c.mode)
		}
	}

	// The ledger.
	runs := map[int64]int{}
	byPid := map[int]int{}
	rows, err := db.SQL.Query("SELECT job_id, pid FROM ledger")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		var pid int
		if err := rows.Scan(&id, &pid); err != nil {
			t.Fatal(err)
		}
		runs[id]++
		byPid[pid]++
	}
	rows.Close()
	var lost, twice, ghosts []int64
	for _, id := range committed {
		switch runs[id] {
		case 0:
			lost = append(lost, id)
		case 1:
		default:
			twice = append(twice, id)
		}
	}
	for _, id := range discarded {
		if runs[id] > 0 {
			ghosts = append(ghosts, id)
		}
	}
	var perMode []string
	for _, c := range children {
		perMode = append(perMode, fmt.Sprintf("%s %d", c.mode, byPid[c.cmd.Process.Pid]))
		if byPid[c.cmd.Process.Pid] == 0 {
			t.Errorf("the %s worker process ran no job", c.mode)
		}
	}
	stats, _ := bouncer.Admin(ctx, "SHOW STATS")
	var xacts, queries string
	for _, s := range stats {
		if s["database"] == "dbq" {
			xacts, queries = s["total_xact_count"], s["total_query_count"]
		}
	}
	t.Logf("%d processes × %d goroutines on %d client connections each, through %d PgBouncer server connections: %d jobs committed (%v), %d rolled back; pushed in %v, all run in %v (%.0f jobs/s); runs per process: %s; PgBouncer: %s transactions, %s queries; most server connections seen: %d by SHOW POOLS, %d by pg_stat_activity",
		procs, concurrency, clientConns, poolSize, len(committed), kinds, len(discarded), pushed.Round(time.Millisecond), took.Round(time.Millisecond),
		float64(len(committed))/took.Seconds(), strings.Join(perMode, ", "), xacts, queries, maxPools.Load(), maxBackends.Load())

	if len(lost) > 0 {
		t.Errorf("%d committed jobs never ran, e.g. %v", len(lost), lost[:min(10, len(lost))])
	}
	if len(twice) > 0 {
		t.Errorf("%d jobs ran more than once, e.g. %v", len(twice), twice[:min(10, len(twice))])
	}
	if len(ghosts) > 0 {
		t.Errorf("%d jobs of rolled-back transactions ran, e.g. %v", len(ghosts), ghosts[:min(10, len(ghosts))])
	}
	if len(discarded) == 0 {
		t.Error("no push was rolled back: the test proves nothing about rollbacks")
	}
	// The workers' metrics, written through PgBouncer in every exec mode
	// and once more as each stopped, count every job once; each removed
	// its heartbeat row as it stopped.
	if n := db.Count(t, "SELECT COALESCE(SUM(processed), 0) FROM jobs_metrics"); n != len(committed) {
		t.Errorf("the metrics count %d processed jobs, want %d", n, len(committed))
	}
	if n := db.Count(t, "SELECT COALESCE(SUM(processed), 0) FROM jobs_metrics_hourly"); n != len(committed) {
		t.Errorf("the hourly metrics count %d processed jobs, want %d (the minutes' transaction writes both)", n, len(committed))
	}
	if n := db.Count(t, "SELECT count(*) FROM jobs_workers"); n != 0 {
		t.Errorf("%d heartbeat rows left after every worker stopped", n)
	}
	if n := db.Count(t, "SELECT count(*) FROM jobs"); n != 0 {
		t.Errorf("%d rows left in jobs", n)
	}
	if n := db.Count(t, "SELECT count(*) FROM failed_jobs"); n != 0 {
		t.Errorf("%d jobs failed", n)
	}
	if n := db.Count(t, "SELECT count(*) FROM orders"); n != kinds["pgx tx"] {
		t.Errorf("orders has %d rows, want one per job pushed in a committed pgx transaction (%d)", n, kinds["pgx tx"])
	}
	if p, b := maxPools.Load(), maxBackends.Load(); p > poolSize || b > poolSize {
		t.Errorf("PgBouncer held up to %d server connections (SHOW POOLS) and PostgreSQL saw up to %d; its pool is %d", p, b, poolSize)
	} else if p < 2 || b < 2 {
		t.Errorf("at most %d (SHOW POOLS) / %d (pg_stat_activity) server connections seen: the watcher saw nothing", p, b)
	}
	for i, c := range children {
		if bad := grep(c.log, "prepared statement", `"level":"ERROR"`, "cannot write metrics"); len(bad) > 0 {
			t.Errorf("worker process %d (%s) logged %d errors, e.g. %s", i, c.mode, len(bad), bad[0])
		}
	}
	if t.Failed() {
		t.Logf("PgBouncer log (tail):\n%s", tail(bouncer.Logs(), 30))
	}
}

// errRollback rolls a pushing transaction back on purpose.
var errRollback = fmt.Errorf("rolled back on purpose")

// grep returns the lines of file that hold any of subs.
func grep(file string, subs ...string) []string {
	f, err := os.Open(file)
	if err != nil {
		return []string{err.Error()}
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if slices.ContainsFunc(subs, func(s string) bool { return strings.Contains(sc.Text(), s) }) {
			out = append(out, sc.Text())
		}
	}
	return out
}

func tail(s string, lines int) string {
	all := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}
