package middleware_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/middleware"
	"github.com/dbqueue/dbqueue/worker"
)

var bg = context.Background()

type keyed struct {
	Key string `json:"key"`
	N   int    `json:"n"`
}

func byKey(job *dbqueue.Job) string {
	var k keyed
	_ = job.Decode(&k)
	return k.Key
}

func newWorker(t *testing.T, q *dbqueue.Queue, o worker.Options) *worker.Worker {
	t.Helper()
	o.Logger = slog.New(slog.DiscardHandler)
	o.Sleep, o.SignalInterval = 20*time.Millisecond, 50*time.Millisecond
	if o.Tries == 0 {
		o.Tries = worker.Unlimited
	}
	w, err := worker.New(q, o)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// runAll runs workers until each returns (StopWhenEmpty), failing the
// test after 30s.
func runAll(t *testing.T, ws ...*worker.Worker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Go(func() {
			if err := w.Run(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatal("workers did not stop within 30s")
	}
}

func push(t *testing.T, q *dbqueue.Queue, jobs ...dbqueue.NewJob) []int64 {
	t.Helper()
	ids, err := q.PushMany(bg, jobs)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// Two workers on two Queue instances (two processes, as far as the
// database can tell) share one limit: of 10 jobs, 3 run in the window and
// the 7 others are released until it ends. Once the window has passed, 3
// more run.
func TestRateLimitedAcrossWorkers(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		var runs atomic.Int64
		var ws []*worker.Worker
		for range 2 {
			q := db.Queue(t)
			w := newWorker(t, q, worker.Options{Concurrency: 3, StopWhenEmpty: true})
			w.Handle("api", func(context.Context, *dbqueue.Job) error { runs.Add(1); return nil },
				worker.WithMiddleware(middleware.RateLimited(q, nil, 3, time.Hour)))
			ws = append(ws, w)
		}
		q := db.Queue(t)
		jobs := make([]dbqueue.NewJob, 10)
		for i := range jobs {
			jobs[i] = dbqueue.NewJob{Name: "api"}
		}
		push(t, q, jobs...)
		runAll(t, ws...)
		if n := runs.Load(); n != 3 {
			t.Fatalf("%d jobs ran in the window, want 3", n)
		}
		// Released until the window ends, an hour after it opened: not
		// failed, not deleted.
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE reserved_at IS NULL AND available_at >= "+db.Now()+" + 3590"); n != 7 {
			t.Fatalf("%d jobs released to the end of the window, want 7", n)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM failed_jobs"); n != 0 {
			t.Fatalf("%d failed jobs, want 0", n)
		}
		// The window passes (moved back by the test rather than waited
		// out); the jobs are due again.
		db.Exec(t, "UPDATE jobs_limits SET window_start = window_start - 3600")
		db.Exec(t, "UPDATE jobs SET available_at = 0")
		runAll(t, ws...)
		if n := runs.Load(); n != 6 {
			t.Fatalf("%d jobs ran after the second window, want 6", n)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 4 {
			t.Fatalf("%d jobs left, want 4", n)
		}
	})
}

// Jobs of one key never run at once, across two workers, while jobs of
// another key run beside them; the lock is gone once they are done.
func TestWithoutOverlapping(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		var (
			mu       sync.Mutex
			running  = map[string]int{}
			most     = map[string]int{}
			ran      = map[int]int{}
			started1 = make(chan struct{})
			hold1    = make(chan struct{})
			ranL     = make(chan int, 1) // K's jobs running when L ran
			released = make(chan int64, 100)
		)
		handler := func(ctx context.Context, job *dbqueue.Job) error {
			var k keyed
			if err := job.Decode(&k); err != nil {
				return err
			}
			mu.Lock()
			running[k.Key]++
			most[k.Key] = max(most[k.Key], running[k.Key])
			ran[k.N]++
			if k.Key == "L" {
				ranL <- running["K"]
			}
			mu.Unlock()
			if k.N == 1 {
				close(started1)
				select {
				case <-hold1:
				case <-ctx.Done():
				}
			}
			if k.Key == "S" {
				// The work under test, long enough for an overlap to show:
				// no other goroutine waits on this sleep.
				time.Sleep(5 * time.Millisecond)
			}
			mu.Lock()
			running[k.Key]--
			mu.Unlock()
			return nil
		}
		var wg sync.WaitGroup
		defer wg.Wait() // after cancel, below: defers run last first
		ctx, cancel := context.WithCancel(bg)
		defer cancel()
		for range 2 {
			q := db.Queue(t)
			// One job at a time and none waiting in memory: while one
			// worker holds job 1, the other must take the rest.
			w := newWorker(t, q, worker.Options{Concurrency: 1, Prefetch: -1, Claims: 1,
				Events: worker.Events{JobReleased: func(_ context.Context, job *dbqueue.Job, _ time.Duration) {
					select {
					case released <- job.ID:
					default: // job 2 may come back many times; the first is what counts
					}
				}}})
			// Released for a second when locked: released at once, job 2
			// would be claimed again before job 3 every time (lower id).
			w.Handle("k", handler, worker.WithMiddleware(middleware.WithoutOverlapping(q, byKey, time.Minute, middleware.LockedReleaseAfter(time.Second))))
			w.Handle("s", handler, worker.WithMiddleware(middleware.WithoutOverlapping(q, byKey, time.Minute)))
			wg.Go(func() {
				if err := w.Run(ctx); err != nil {
					t.Error(err)
				}
			})
		}
		q := db.Queue(t)
		push(t, q, dbqueue.NewJob{Name: "k", Data: keyed{"K", 1}})
		wait := func(ch <-chan struct{}, what string) {
			t.Helper()
			select {
			case <-ch:
			case <-time.After(20 * time.Second):
				t.Fatalf("timed out waiting for %s", what)
			}
		}
		wait(started1, "job 1 to start")
		ids := push(t, q, dbqueue.NewJob{Name: "k", Data: keyed{"K", 2}}, dbqueue.NewJob{Name: "k", Data: keyed{"L", 3}})
		select {
		case k := <-ranL:
			if k != 1 {
				t.Fatalf("when L ran, %d K jobs ran; want 1 (job 1, held)", k)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("a job of another key did not run while K was locked")
		}
		// Job 2 comes to a free worker, finds K locked and is released.
		for id := int64(0); id != ids[0]; {
			select {
			case id = <-released:
			case <-time.After(20 * time.Second):
				t.Fatal("job 2 was not released while job 1 held its key")
			}
		}
		mu.Lock()
		if ran[2] != 0 {
			t.Fatal("job 2 ran while job 1 held the lock")
		}
		mu.Unlock()
		close(hold1)
		// Now a burst of one key over both workers.
		var burst []dbqueue.NewJob
		for i := range 8 {
			burst = append(burst, dbqueue.NewJob{Name: "s", Data: keyed{"S", 10 + i}})
		}
		push(t, q, burst...)
		dbtest.WaitFor(t, 30*time.Second, "every job done", func() bool { return db.Count(t, "SELECT COUNT(*) FROM jobs") == 0 })
		cancel()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		if most["K"] != 1 || most["S"] != 1 {
			t.Fatalf("most jobs of one key at once: K %d, S %d; want 1", most["K"], most["S"])
		}
		for _, n := range []int{1, 2, 3, 10, 11, 12, 13, 14, 15, 16, 17} {
			if ran[n] != 1 {
				t.Errorf("job %d ran %d times, want 1", n, ran[n])
			}
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs_locks"); n != 0 {
			t.Fatalf("%d locks left after the jobs, want 0", n)
		}
	})
}

// A lock whose holder died (expired) is taken over; a live one holds the
// job back, released after the delay asked for or discarded.
func TestWithoutOverlappingExpiredAndHeld(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		db.Exec(t, "INSERT INTO jobs_locks (name, owner, expires_at) VALUES ('dead', 'x', "+db.Now()+" - 1)")
		db.Exec(t, "INSERT INTO jobs_locks (name, owner, expires_at) VALUES ('alive', 'y', "+db.Now()+" + 3600)")
		var ran sync.Map
		w := newWorker(t, q, worker.Options{Concurrency: 2, StopWhenEmpty: true})
		h := func(_ context.Context, job *dbqueue.Job) error { ran.Store(byKey(job), true); return nil }
		w.Handle("release", h, worker.WithMiddleware(middleware.WithoutOverlapping(q, byKey, time.Minute, middleware.LockedReleaseAfter(30*time.Second))))
		w.Handle("discard", h, worker.WithMiddleware(middleware.WithoutOverlapping(q, byKey, time.Minute, middleware.LockedDiscard())))
		push(t, q,
			dbqueue.NewJob{Name: "release", Data: keyed{Key: "dead"}},
			dbqueue.NewJob{Name: "release", Data: keyed{Key: "alive"}},
			dbqueue.NewJob{Name: "discard", Data: keyed{Key: "alive"}})
		runAll(t, w)
		if _, ok := ran.Load("dead"); !ok {
			t.Fatal("the job whose lock had expired did not run")
		}
		if _, ok := ran.Load("alive"); ok {
			t.Fatal("a job ran while its key was locked")
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE available_at >= "+db.Now()+" + 28"); n != 1 {
			t.Fatalf("%d jobs released for 30s, want 1 (the discarded one is gone)", n)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs") + db.Count(t, "SELECT COUNT(*) FROM failed_jobs"); n != 1 {
			t.Fatalf("%d jobs and failed jobs left, want 1", n)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs_locks WHERE name = 'alive' AND owner = 'y'"); n != 1 {
			t.Fatal("the live lock was taken or deleted")
		}
	})
}

// After 2 errors within the decay, the other jobs of the key are released
// to the end of the decay without running; a success clears the count;
// ReleaseAfter is no exception.
func TestThrottlesExceptions(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		var runs sync.Map
		count := func(key string) int {
			v, _ := runs.Load(key)
			n, _ := v.(int)
			return n
		}
		w := newWorker(t, q, worker.Options{Concurrency: 1, Prefetch: -1, Claims: 1, StopWhenEmpty: true,
			Backoff: []time.Duration{2 * time.Hour}})
		w.Handle("call", func(_ context.Context, job *dbqueue.Job) error {
			var k keyed
			_ = job.Decode(&k)
			runs.Store(k.Key, count(k.Key)+1)
			switch {
			case k.Key == "down", k.Key == "flaky" && k.N == 1:
				return errors.New("service unavailable")
			case k.Key == "later":
				return worker.ReleaseAfter(2 * time.Hour)
			}
			return nil
		}, worker.WithMiddleware(middleware.ThrottlesExceptions(q, byKey, 2, time.Hour)))
		var jobs []dbqueue.NewJob
		for i := range 5 {
			jobs = append(jobs, dbqueue.NewJob{Name: "call", Data: keyed{"down", i}})
		}
		jobs = append(jobs, dbqueue.NewJob{Name: "call", Data: keyed{"flaky", 1}}, dbqueue.NewJob{Name: "call", Data: keyed{"flaky", 2}})
		for i := range 3 {
			jobs = append(jobs, dbqueue.NewJob{Name: "call", Data: keyed{"later", i}})
		}
		push(t, q, jobs...)
		runAll(t, w)
		if n := count("down"); n != 2 {
			t.Fatalf("the failing key ran %d times, want 2 (then throttled)", n)
		}
		// 2 released after their errors (2h backoff), 3 released by the
		// throttle to the end of the hour.
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE available_at > "+db.Now()+" + 3500 AND available_at <= "+db.Now()+" + 3600"); n != 3 {
			t.Fatalf("%d jobs released to the end of the decay, want 3", n)
		}
		if n := count("flaky"); n != 2 {
			t.Fatalf("flaky ran %d times, want 2", n)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs_limits WHERE name = 'throttle:flaky'"); n != 0 {
			t.Fatal("a success did not clear the count")
		}
		if n := count("later"); n != 3 {
			t.Fatalf("a key whose jobs release themselves ran %d times, want 3 (not throttled)", n)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs_limits WHERE name = 'throttle:later'"); n != 0 {
			t.Fatal("ReleaseAfter was counted as an exception")
		}
	})
}

// SkipIf and SkipUnless delete the job without running it or failing it.
func TestSkip(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		var ran sync.Map
		w := newWorker(t, q, worker.Options{StopWhenEmpty: true})
		h := func(_ context.Context, job *dbqueue.Job) error { ran.Store(job.ID, true); return nil }
		skip := func(_ context.Context, job *dbqueue.Job) bool { return byKey(job) == "skip" }
		w.Handle("if", h, worker.WithMiddleware(middleware.SkipIf(skip)))
		w.Handle("unless", h, worker.WithMiddleware(middleware.SkipUnless(skip)))
		ids := push(t, q,
			dbqueue.NewJob{Name: "if", Data: keyed{Key: "skip"}},
			dbqueue.NewJob{Name: "if", Data: keyed{Key: "run"}},
			dbqueue.NewJob{Name: "unless", Data: keyed{Key: "skip"}},
			dbqueue.NewJob{Name: "unless", Data: keyed{Key: "run"}})
		runAll(t, w)
		for i, want := range []bool{false, true, true, false} {
			if _, got := ran.Load(ids[i]); got != want {
				t.Errorf("job %d ran: %v, want %v", i, got, want)
			}
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs") + db.Count(t, "SELECT COUNT(*) FROM failed_jobs"); n != 0 {
			t.Fatalf("%d jobs left or failed, want 0: skipped jobs are deleted", n)
		}
	})
}

// Before migration 00005 the middleware fail with the advice to migrate.
func TestMissingTables(t *testing.T) {
	db := dbtest.New(t, dbqueue.SQLite)
	db.Exec(t, "DROP TABLE jobs_limits")
	q := db.Queue(t)
	mw := middleware.RateLimited(q, nil, 1, time.Second)
	err := mw(func(context.Context, *dbqueue.Job) error { return nil })(bg, &dbqueue.Job{Payload: dbqueue.Payload{Job: "x"}})
	if err == nil || !strings.Contains(err.Error(), "migrate up") || !strings.Contains(err.Error(), "RateLimited") {
		t.Fatalf("error %v, want one naming RateLimited and saying to migrate up", err)
	}
}
