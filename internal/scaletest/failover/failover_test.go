//go:build linux

// Package failover_test runs pushers and workers against a replicated
// PostgreSQL, crashes the primary mid-run, lets a replica take over, and
// checks what became of every acknowledged push. The clients name every
// host with target_session_attrs=read-write; no client is restarted or
// reconfigured.
//
// TestPatroniFailover has Patroni and etcd elect the new primary, in
// Patroni's synchronous mode: no acknowledged push may be lost, and a job
// may run twice only when the failover hit it while it was reserved.
// TestFailover promotes an asynchronous replica by hand and measures how
// many acknowledged pushes the promotion lost, without failing on it.
package failover_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/driver/dbqpgx"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/internal/sqldb"
	"github.com/dbqueue/dbqueue/worker"
)

// envFaults is the switch the worker package's fault tests use too: these
// tests start their own servers and crash them, so they run under CI or
// when asked.
const envFaults = "DBQUEUE_TEST_FAULTS"

const jobName = "failover"

// The shape of a run. retry_after bounds how long a job whose finish was
// lost in the failover waits before it runs again, and so the drain.
const (
	pushers    = 2
	workers    = 2
	concurrent = 8
	retryAfter = 7 * time.Second
	work       = 5 * time.Millisecond
	// asyncDelay is how far behind the asynchronous replica is held (see
	// dbtest.ReplicaOptions.Delay): on loopback it would otherwise trail by
	// microseconds and the loss measured would say nothing about a replica
	// in another zone.
	asyncDelay = 20 * time.Millisecond
)

// payload carries the test's own key for a push: job ids come from a
// sequence, and an asynchronous failover may hand out an id again.
type payload struct {
	K int64 `json:"k"`
}

// requireFaults skips a test that starts and crashes servers of its own
// unless CI runs it or envFaults asks for it.
func requireFaults(t *testing.T, what string) {
	if os.Getenv(envFaults) != "1" && os.Getenv("CI") == "" {
		t.Skipf("%s: set %s=1 to run it", what, envFaults)
	}
}

// TestFailover crashes the primary of an asynchronous pair, its replica
// held asyncDelay behind, and promotes the replica by hand (pg_promote)
// 300ms later: it measures what asynchronous replication loses, which
// TestPatroniFailover's synchronous mode rules out. It passes whatever the
// loss, and fails on anything else the ledger finds wrong.
func TestFailover(t *testing.T) {
	requireFaults(t, "starts a PostgreSQL primary and replica of its own and crashes the primary")
	began := time.Now()
	r := dbtest.StartReplicated(t, dbtest.ReplicaOptions{Delay: asyncDelay})
	f := &failover{t: t, mode: "async, promoted by hand", pushErrs: map[string]int{}}
	f.db = dbtest.NewOnReplicated(t, r)
	t.Logf("primary and asynchronous replica started and migrated in %v", time.Since(began).Round(time.Millisecond))
	f.crash = func() {
		f.logLag(r.Primary.DSN)
		f.stopAt = time.Now()
		r.StopPrimary()
		f.downAt = f.stopAt
		stopped := time.Now()
		// The outage lasts as long as noticing it takes a failover manager:
		// the outage itself is what this test puts the queue through, not a
		// wait for anything.
		time.Sleep(300 * time.Millisecond)
		r.Promote()
		f.promotedAt = time.Now()
		t.Logf("primary stopped (stop took %v); replica promoted %v after the stop",
			stopped.Sub(f.stopAt).Round(time.Millisecond), f.promotedAt.Sub(f.stopAt).Round(time.Millisecond))
	}
	f.run()
}

// ack is an acknowledged push: Push returned its id without error.
type ack struct {
	key, id int64
	at      time.Time
}

// ledgerRun is one run of a job, as its handler recorded it in the
// replicated database before returning.
type ledgerRun struct {
	key, job   int64
	attempt    int
	worker     int
	reservedAt int64 // Unix seconds, the database's clock at the claim
	started    int64 // Unix nanoseconds
}

type failover struct {
	t *testing.T
	// mode names the run in its summary.
	mode string
	// sync: replication is synchronous, so an acknowledged push lost or
	// a job run twice outside the failover fails the test.
	sync bool
	db   *dbtest.DB
	// crash fails the primary over while pushes and jobs run: it sets
	// stopAt, downAt and promotedAt, and returns once a new primary
	// accepts writes.
	crash func()

	keys atomic.Int64

	mu       sync.Mutex
	acks     []ack
	pushErrs map[string]int // errors that reached a pusher, by message
	failed   []int64        // keys whose push returned an error: maybe stored, maybe not

	// stopAt is when the fault was injected, downAt when the primary
	// stopped serving (later than stopAt when only its failover manager
	// was killed), promotedAt when the new primary accepted writes.
	stopAt, downAt, promotedAt time.Time
	// firstRun is when the first job run that started after downAt
	// started (set by check).
	firstRun time.Time
}

func (f *failover) run() {
	t := f.t
	f.db.Exec(t, "CREATE TABLE failover_ledger (k BIGINT NOT NULL, job_id BIGINT NOT NULL, attempt INTEGER NOT NULL, worker INTEGER NOT NULL, reserved_at BIGINT NOT NULL, started_ns BIGINT NOT NULL)")

	// Workers: one on a pgx pool (dbqpgx.New), one on database/sql over
	// pgx's stdlib (dbqpgx.NewSQL). Each records its runs through a pool
	// of its own on the same multi-host DSN.
	workCtx, stopWork := context.WithCancel(context.Background())
	defer stopWork()
	var workersDone sync.WaitGroup
	workerErrs := make([]error, workers)
	logs := make([]string, workers)
	for i := range workers {
		q := f.queue(i%2 == 0)
		ledger := f.pool()
		insert := "INSERT INTO failover_ledger (k, job_id, attempt, worker, reserved_at, started_ns) VALUES ($1, $2, $3, $4, $5, $6)"
		logs[i] = filepath.Join(t.TempDir(), fmt.Sprintf("worker-%d.log", i))
		logFile, err := os.Create(logs[i])
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { logFile.Close() })
		w, err := worker.New(q, worker.Options{
			Concurrency: concurrent,
			Timeout:     retryAfter - worker.TimeoutMargin,
			// A handler whose ledger write failed in the failover returns
			// an error: that must never fail the job.
			Tries:  worker.Unlimited,
			Sleep:  100 * time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelWarn})),
		})
		if err != nil {
			t.Fatal(err)
		}
		worker.HandleJSON(w, jobName, func(ctx context.Context, job *dbqueue.Job, p payload) error {
			started := time.Now().UnixNano()
			if _, err := ledger.Exec(ctx, insert, p.K, job.ID, job.Attempts, i, job.ReservedAt.Unix(), started); err != nil {
				return fmt.Errorf("ledger insert: %w", err)
			}
			time.Sleep(work)
			return nil
		})
		workersDone.Add(1)
		go func() {
			defer workersDone.Done()
			workerErrs[i] = w.Run(workCtx)
		}()
	}

	// Pushers: the same split of drivers.
	pushCtx, stopPush := context.WithCancel(context.Background())
	defer stopPush()
	var pushersDone sync.WaitGroup
	for i := range pushers {
		q := f.queue(i%2 == 0)
		pushersDone.Add(1)
		go func() {
			defer pushersDone.Done()
			f.push(pushCtx, q)
		}()
	}

	// Let the queue run, then fail over while pushes, claims, runs and
	// finishes are all in flight.
	f.await("1000 acknowledged pushes and 500 runs before the failover", 30*time.Second, func() bool {
		return f.acked(time.Time{}) >= 1000 && f.count("SELECT COUNT(*) FROM failover_ledger") >= 500
	})
	t.Logf("%d jobs reserved as the fault is injected", f.count("SELECT COUNT(*) FROM jobs WHERE reserved_at IS NOT NULL"))
	f.crash()

	f.await("1000 acknowledged pushes after the promotion", 30*time.Second, func() bool {
		return f.acked(f.promotedAt) >= 1000
	})
	// The pgx-pool worker listens for pushes again, on the new primary.
	f.await("a LISTEN session on the new primary", 15*time.Second, func() bool {
		return f.count("SELECT COUNT(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN %'") > 0
	})
	stopPush()
	pushersDone.Wait()

	// Drain: jobs whose finish the failover cut wait out retry_after.
	f.await("the queue to drain", retryAfter+40*time.Second, func() bool {
		return f.count("SELECT COUNT(*) FROM jobs") == 0
	})
	stopWork()
	workersDone.Wait()
	for i, err := range workerErrs {
		if err != nil {
			t.Errorf("worker %d: Run: %v", i, err)
		}
	}
	retried := 0
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		retried += strings.Count(string(b), "retrying")
	}
	t.Logf("workers logged %d retries of database trouble", retried)
	f.check()
}

// logLag logs how far the replica trailed the primary (reached through
// dsn) just before the stop, in bytes of WAL.
func (f *failover) logLag(dsn string) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		f.t.Fatal(err)
	}
	defer db.Close()
	var unsent, unflushed int64
	err = db.QueryRow("SELECT pg_current_wal_lsn() - sent_lsn, pg_current_wal_lsn() - flush_lsn FROM pg_stat_replication").Scan(&unsent, &unflushed)
	f.t.Logf("just before the stop the replica trailed by %d bytes of WAL sent to it and %d not yet flushed there (err %v)", unsent, unflushed, err)
}

// queue opens a queue on the multi-host DSN through a pgx pool (dbqpgx.New)
// or database/sql over pgx's stdlib (dbqpgx.NewSQL).
func (f *failover) queue(pgxPool bool) *dbqueue.Queue {
	t := f.t
	ctx := context.Background()
	var drv dbqueue.Driver
	if pgxPool {
		drv = dbqpgx.New(f.pool())
	} else {
		db, err := sql.Open("pgx", f.db.DSN)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		drv = dbqpgx.NewSQL(db)
	}
	q, err := dbqueue.New(ctx, drv, dbqueue.WithRetryAfter(retryAfter))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

func (f *failover) pool() *pgxpool.Pool {
	pool, err := pgxpool.New(context.Background(), f.db.DSN)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(pool.Close)
	return pool
}

// push pushes one job at a time until ctx ends, recording each
// acknowledgement, and each error with its key: a push whose connection
// died after it was sent may have been stored all the same.
func (f *failover) push(ctx context.Context, q *dbqueue.Queue) {
	for ctx.Err() == nil {
		key := f.keys.Add(1)
		// Not ctx: a push in flight when the pushers stop runs to its end.
		pctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		id, err := q.Push(pctx, dbqueue.NewJob{Name: jobName, Data: payload{K: key}})
		cancel()
		f.mu.Lock()
		if err != nil {
			f.pushErrs[err.Error()]++
			f.failed = append(f.failed, key)
			if sqldb.IsRetryable(err) {
				f.t.Errorf("a push returned an error it should have retried: %v", err)
			}
		} else {
			f.acks = append(f.acks, ack{key: key, id: id, at: time.Now()})
		}
		f.mu.Unlock()
		time.Sleep(2 * time.Millisecond) // the pace of an application's pushes, not a wait
	}
}

// acked counts acknowledgements after since.
func (f *failover) acked(since time.Time) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.acks) - sort.Search(len(f.acks), func(i int) bool { return f.acks[i].at.After(since) })
}

// count runs a COUNT on the test database through its own multi-host
// handle; during the outage it fails, which counts as -1.
func (f *failover) count(query string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var n int
	if err := f.db.SQL.QueryRowContext(ctx, query).Scan(&n); err != nil {
		return -1
	}
	return n
}

func (f *failover) await(what string, limit time.Duration, done func() bool) {
	f.t.Helper()
	dbtest.WaitFor(f.t, limit, "waiting for "+what, done)
}

// check accounts for every acknowledged push: run (in the ledger) or still
// in the jobs table. A key run more than once must have been reserved
// across the failover: the fault cut its finish, so it ran again after
// retry_after.
func (f *failover) check() {
	t := f.t
	rows, err := f.db.SQL.Query("SELECT k, job_id, attempt, worker, reserved_at, started_ns FROM failover_ledger ORDER BY k, started_ns")
	if err != nil {
		t.Fatal(err)
	}
	runs := map[int64][]ledgerRun{}
	total := 0
	for rows.Next() {
		var r ledgerRun
		if err := rows.Scan(&r.key, &r.job, &r.attempt, &r.worker, &r.reservedAt, &r.started); err != nil {
			t.Fatal(err)
		}
		runs[r.key] = append(runs[r.key], r)
		total++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	waiting := map[int64]bool{}
	left, err := f.db.SQL.Query("SELECT (payload::json->'data'->>'k')::bigint FROM jobs")
	if err != nil {
		t.Fatal(err)
	}
	for left.Next() {
		var k int64
		if err := left.Scan(&k); err != nil {
			t.Fatal(err)
		}
		waiting[k] = true
	}
	left.Close()
	failedJobs := f.count("SELECT COUNT(*) FROM failed_jobs")
	if failedJobs != 0 {
		t.Errorf("%d jobs in failed_jobs, want 0 (unlimited tries)", failedJobs)
	}

	f.mu.Lock()
	acks, failed := slices.Clone(f.acks), slices.Clone(f.failed)
	pushErrs := f.pushErrs
	f.mu.Unlock()

	// Lost: acknowledged, never run, not waiting.
	var lost []ack
	for _, a := range acks {
		if len(runs[a.key]) == 0 && !waiting[a.key] {
			lost = append(lost, a)
		}
	}
	ackedBefore := sort.Search(len(acks), func(i int) bool { return !acks[i].at.Before(f.downAt) })
	recent := ackedBefore - sort.Search(len(acks), func(i int) bool { return !acks[i].at.Before(f.downAt.Add(-time.Second)) })

	// Run twice: explained when the earlier run's reservation stood when
	// the primary stopped serving (from its claim until retry_after), so
	// the failover may have cut its finish.
	stop, promoted := f.downAt.Unix(), f.promotedAt.Unix()
	twice, extra, explained := 0, 0, 0
	var unexplained []string
	for k, rs := range runs {
		for _, r := range rs {
			if at := time.Unix(0, r.started); at.After(f.downAt) && (f.firstRun.IsZero() || at.Before(f.firstRun)) {
				f.firstRun = at
			}
		}
		if len(rs) < 2 {
			continue
		}
		twice++
		extra += len(rs) - 1
		ok := true
		for i := 1; i < len(rs); i++ {
			prev := rs[i-1]
			if !(prev.reservedAt <= promoted && prev.reservedAt+int64(retryAfter/time.Second)+1 >= stop) {
				ok = false
			}
		}
		if ok {
			explained++
			continue
		}
		unexplained = append(unexplained, fmt.Sprintf("key %d: %+v", k, rs))
	}
	// Pushes that returned an error but were stored: they ran all the same.
	storedAnyway := 0
	for _, k := range failed {
		if len(runs[k]) > 0 || waiting[k] {
			storedAnyway++
		}
	}

	var errs []string
	for msg, n := range pushErrs {
		errs = append(errs, fmt.Sprintf("%d× %s", n, msg))
	}
	sort.Strings(errs)
	mode := f.mode
	t.Logf("%s: acknowledged pushes %d (%d before the stop, %d of them in its last second); runs %d; lost %d; still waiting %d; jobs run twice %d (%d extra runs), %d reserved across the failover; unexplained %d; pushes that returned an error %d, stored anyway %d",
		mode, len(acks), ackedBefore, recent, total, len(lost), len(waiting), twice, extra, explained, len(unexplained), len(failed), storedAnyway)
	if len(errs) > 0 {
		t.Logf("errors the pushers saw:\n\t%s", strings.Join(errs, "\n\t"))
	}

	// The run must have measured something: pushes acknowledged right up
	// to the stop, and after the promotion.
	if recent == 0 || f.acked(f.promotedAt) == 0 {
		t.Errorf("no acknowledged pushes in the second before the stop (%d) or after the promotion (%d): the failover measured nothing", recent, f.acked(f.promotedAt))
	}
	for i, a := range lost {
		if i == 10 {
			break
		}
		t.Logf("lost: key %d id %d acknowledged %v before the primary went down", a.key, a.id, f.downAt.Sub(a.at).Round(time.Microsecond))
	}
	if !f.sync {
		return
	}
	if len(lost) > 0 {
		t.Errorf("synchronous replication lost %d acknowledged pushes", len(lost))
	}
	for i, u := range unexplained {
		if i == 10 {
			break
		}
		t.Errorf("run twice with no failover in its reservation: %s", u)
	}
}
