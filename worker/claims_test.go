package worker_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/worker"
)

// With Claims 2 a worker sends its next claim while the last is still out,
// so a database that is slow to answer one claim gets a second; with
// Claims 1 it never has more than one in flight. The claims are held up by
// a table lock and counted where PostgreSQL shows them waiting.
func TestClaimsInFlight(t *testing.T) {
	t.Parallel()
	for _, claims := range []int{1, 2} {
		t.Run(fmt.Sprint(claims), func(t *testing.T) {
			t.Parallel()
			db, q, app := namedQueue(t)
			pushN(t, q, 100, dbqueue.NewJob{Name: "job"})

			// Capacity 8: the first claim takes 8, four run and park at the
			// gate. Later claims go out as parked jobs are let through.
			var ran atomic.Int64
			gate := make(chan struct{}, 100)
			w, _ := newWorker(t, q, worker.Options{Concurrency: 4, Prefetch: 4, Claims: claims})
			w.Handle("job", func(ctx context.Context, job *dbqueue.Job) error {
				ran.Add(1)
				<-gate
				return nil
			})
			ctx, cancel := context.WithCancel(bg)
			done := make(chan error, 1)
			go func() { done <- w.Run(ctx) }()
			deadline := time.Now().Add(20 * time.Second)
			lock := lockWhenParked(t, db, &ran, deadline)
			most := 0
			// watch samples the waiting claims for d: a claim too many is an
			// event that must not happen, so only a window can show it.
			watch := func(d time.Duration) {
				for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
					most = max(most, waitingClaims(t, db.SQL, app))
				}
			}
			// One job done: a claim for its slot goes out and waits.
			gate <- struct{}{}
			watch(500 * time.Millisecond)
			// Two more done: room for a second batch while the first claim
			// is still out.
			gate <- struct{}{}
			gate <- struct{}{}
			watch(time.Second)
			if err := lock.Rollback(); err != nil {
				t.Fatal(err)
			}
			close(gate)
			dbtest.Until(time.Until(deadline), func() bool { return ran.Load() >= 100 }) // counted below
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if most != claims {
				t.Fatalf("Claims %d: at most %d claims waited at the lock at once, want %d", claims, most, claims)
			}
			if ran.Load() != 100 {
				t.Fatalf("ran %d of 100 jobs after the lock was lifted", ran.Load())
			}
		})
	}
}

// waitingClaims counts the worker's claim statements blocked on a lock:
// a claim from the head (WITH expired) or from the cursor (WITH ready).
func waitingClaims(t *testing.T, db *sql.DB, app string) int {
	t.Helper()
	var n int
	err := db.QueryRow(`SELECT count(*) FROM pg_stat_activity
		WHERE application_name = $1 AND wait_event_type = 'Lock' AND (query LIKE 'WITH expired%' OR query LIKE 'WITH ready%')`, app).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// namedQueue opens a queue on a fresh PostgreSQL database whose sessions
// carry an application name of their own, so pg_stat_activity can tell
// this test's statements from those of the tests running beside it.
func namedQueue(t *testing.T) (*dbtest.DB, *dbqueue.Queue, string) {
	t.Helper()
	db := dbtest.New(t, dbqueue.Postgres)
	app := fmt.Sprintf("dbqueue_test_%d", time.Now().UnixNano())
	sep := "?"
	if strings.Contains(db.DSN, "?") {
		sep = "&"
	}
	q, err := dbqueue.Open(bg, db.DSN+sep+"application_name="+app)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return db, q, app
}

// A claim still out when the worker stops is waited for, and its jobs are
// given back unstarted, attempts not counted: a stop takes no new work.
func TestStopGivesBackClaimInFlight(t *testing.T) {
	t.Parallel()
	db, q, app := namedQueue(t)
	pushN(t, q, 100, dbqueue.NewJob{Name: "job"})
	var ran, givenBack atomic.Int64
	gate := make(chan struct{}, 100)
	w, _ := newWorker(t, q, worker.Options{Concurrency: 4, Prefetch: 4, Claims: 2,
		Events: worker.Events{JobGivenBack: func(context.Context, *dbqueue.Job) { givenBack.Add(1) }}})
	// The first four park at the gate; the rest finish at once.
	w.Handle("job", func(ctx context.Context, job *dbqueue.Job) error {
		if ran.Add(1) <= 4 {
			<-gate
		}
		return nil
	})
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	deadline := time.Now().Add(20 * time.Second)
	lock := lockWhenParked(t, db, &ran, deadline)
	// One parked job done: its runner works off the four prefetched jobs
	// and then idles, while claims for the freed slots wait at the lock.
	gate <- struct{}{}
	dbtest.WaitFor(t, time.Until(deadline), "eight jobs run and a claim waiting at the lock", func() bool {
		return ran.Load() >= 8 && waitingClaims(t, db.SQL, app) > 0
	})
	cancel() // stop while that claim is out
	if err := lock.Rollback(); err != nil {
		t.Fatal(err)
	}
	// The claims return to a stopping worker, whose idle runner must not
	// start their jobs: wait until they are given back (or, wrongly, run).
	dbtest.WaitFor(t, 20*time.Second, "the claimed jobs given back", func() bool { return givenBack.Load() > 0 || ran.Load() > 8 })
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := ran.Load(); got != 8 {
		t.Fatalf("%d jobs started; want the 8 started before the stop", got)
	}
	if n := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE reserved_at IS NULL AND attempts = 0"); n != 92 {
		t.Fatalf("%d of 92 unfinished jobs are back unreserved with no attempt counted", n)
	}
}

// lockWhenParked waits until four handlers have started (and parked), then
// takes a table lock at which every later claim and delete waits, until
// the returned transaction ends (at the latest when the test does).
func lockWhenParked(t *testing.T, db *dbtest.DB, ran *atomic.Int64, deadline time.Time) *sql.Tx {
	t.Helper()
	dbtest.WaitFor(t, time.Until(deadline), "four handlers parked", func() bool { return ran.Load() >= 4 })
	lock, err := db.SQL.BeginTx(bg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lock.Rollback() })
	if _, err := lock.Exec("LOCK TABLE jobs IN EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	return lock
}

// Runners wake the claim loop only when there is room for a batch: the
// loop turns a few times per claim, not once per finished job (a
// goroutine switch per job, when it did).
func TestLoopWakesPerBatchNotPerJob(t *testing.T) {
	db := dbtest.New(t, dbqueue.SQLite)
	q := db.Queue(t)
	var turns, ran atomic.Int64
	w, _ := newWorker(t, q, worker.Options{
		Concurrency: 20, Prefetch: 480, StopWhenEmpty: true,
		Events: worker.Events{Looping: func(context.Context) { turns.Add(1) }},
	})
	w.Handle("job", func(context.Context, *dbqueue.Job) error { ran.Add(1); return nil })
	const n = 10_000
	pushN(t, q, n, dbqueue.NewJob{Name: "job"})
	if err := runUntil(t, w, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	if ran.Load() != n {
		t.Fatalf("ran %d of %d jobs", ran.Load(), n)
	}
	// 20 claims of 500 take ~140 turns; waking the loop for every finished
	// job took ~460 (the wake-ups that found it busy merge).
	if got := turns.Load(); got > n/40 {
		t.Fatalf("the loop turned %d times for %d jobs", got, n)
	}
	t.Logf("%d turns for %d jobs", turns.Load(), n)
}
