package worker_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/worker"
)

// stopReason runs w and returns why it stopped.
func stopReason(t *testing.T, w *worker.Worker, reason *atomic.Value, timeout time.Duration) worker.StopReason {
	t.Helper()
	if err := runUntil(t, w, timeout); err != nil {
		t.Fatal(err)
	}
	r, _ := reason.Load().(worker.StopReason)
	return r
}

func recordStop(reason *atomic.Value) worker.Events {
	return worker.Events{WorkerStopping: func(r worker.StopReason, err error) { reason.Store(r) }}
}

func TestStopConditions(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		noop := func(ctx context.Context, job *dbqueue.Job) error { return nil }

		var reason atomic.Value
		pushN(t, q, 20, dbqueue.NewJob{Name: "n"})
		w, _ := newWorker(t, q, worker.Options{MaxJobs: 5, Concurrency: 1, Prefetch: -1, Events: recordStop(&reason)})
		w.Handle("n", noop)
		if r := stopReason(t, w, &reason, 20*time.Second); r != worker.StopMaxJobs {
			t.Fatalf("stopped for %q, want max-jobs", r)
		}
		if s, _ := q.Size(bg, ""); s.Pending != 15 || s.Reserved != 0 {
			t.Fatalf("after max-jobs 5 of 20: %+v, want 15 pending, none reserved", s)
		}
		q.Clear(bg, "")

		w, _ = newWorker(t, q, worker.Options{MaxTime: 300 * time.Millisecond, Events: recordStop(&reason)})
		w.Handle("n", noop)
		if r := stopReason(t, w, &reason, 20*time.Second); r != worker.StopMaxTime {
			t.Fatalf("stopped for %q, want max-time", r)
		}

		w, _ = newWorker(t, q, worker.Options{MemoryLimitMB: 1, Events: recordStop(&reason)})
		w.Handle("n", noop)
		if r := stopReason(t, w, &reason, 20*time.Second); r != worker.StopMemory {
			t.Fatalf("stopped for %q, want memory", r)
		}

		w, _ = newWorker(t, q, worker.Options{StopWhenEmpty: true, Events: recordStop(&reason)})
		w.Handle("n", noop)
		if r := stopReason(t, w, &reason, 20*time.Second); r != worker.StopEmpty {
			t.Fatalf("stopped for %q, want empty", r)
		}
	})
}

func TestRestartSignal(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		var reason atomic.Value
		var ran atomic.Int64
		w, _ := newWorker(t, q, worker.Options{Events: recordStop(&reason)})
		w.Handle("n", func(ctx context.Context, job *dbqueue.Job) error { ran.Add(1); return nil })
		pushN(t, q, 3, dbqueue.NewJob{Name: "n"})
		go func() {
			if !dbtest.Until(20*time.Second, func() bool { return ran.Load() >= 3 }) {
				t.Error("the three jobs did not run")
			}
			if err := q.Restart(bg); err != nil {
				t.Error(err)
			}
		}()
		if r := stopReason(t, w, &reason, 20*time.Second); r != worker.StopRestart {
			t.Fatalf("stopped for %q, want restart", r)
		}
		// A worker started after the restart signal runs normally.
		w, _ = newWorker(t, q, worker.Options{StopWhenEmpty: true, Events: recordStop(&reason)})
		w.Handle("n", func(ctx context.Context, job *dbqueue.Job) error { return nil })
		if r := stopReason(t, w, &reason, 20*time.Second); r != worker.StopEmpty {
			t.Fatalf("a new worker stopped for %q after an old restart", r)
		}
	})
}

func TestPauseAndResume(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		if err := q.Pause(bg, "default"); err != nil {
			t.Fatal(err)
		}
		if p, err := q.Paused(bg, "default"); err != nil || !p {
			t.Fatalf("Paused: %v %v", p, err)
		}
		pushN(t, q, 2, dbqueue.NewJob{Name: "n"})
		pushN(t, q, 1, dbqueue.NewJob{Name: "n", Queue: "other"})
		var ran atomic.Int64
		handle := func(ctx context.Context, job *dbqueue.Job) error { ran.Add(1); return nil }
		w, _ := newWorker(t, q, worker.Options{MaxTime: 400 * time.Millisecond, Queues: []string{"default", "other"}})
		w.Handle("n", handle)
		runUntil(t, w, 20*time.Second)
		if ran.Load() != 1 {
			t.Fatalf("ran %d jobs while default was paused; want only the other queue's 1", ran.Load())
		}
		if err := q.Resume(bg, "default"); err != nil {
			t.Fatal(err)
		}
		w, _ = newWorker(t, q, worker.Options{StopWhenEmpty: true})
		w.Handle("n", handle)
		runUntil(t, w, 20*time.Second)
		if ran.Load() != 3 {
			t.Fatalf("ran %d jobs after resume, want 3", ran.Load())
		}
	})
}

// TestGracefulStopReleasesAtOnce: cancelling Run under load gives back
// every unfinished job at once, attempts not counted, so nothing waits for
// retry_after.
func TestGracefulStopReleasesAtOnce(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		pushN(t, q, 200, dbqueue.NewJob{Name: "slow"})
		var started, cancelledCount atomic.Int64
		w, _ := newWorker(t, q, worker.Options{Concurrency: 8, GracePeriod: 100 * time.Millisecond})
		w.Handle("slow", func(ctx context.Context, job *dbqueue.Job) error {
			started.Add(1)
			select {
			case <-ctx.Done():
				cancelledCount.Add(1)
				return ctx.Err()
			case <-time.After(30 * time.Millisecond):
				return nil
			}
		})
		ctx, cancel := context.WithCancel(bg)
		go func() {
			if !dbtest.Until(20*time.Second, func() bool { return started.Load() >= 40 }) {
				t.Error("forty jobs did not start")
			}
			cancel()
		}()
		begin := time.Now()
		if err := w.Run(ctx); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(begin); took > 15*time.Second {
			t.Fatalf("Run took %v to stop", took)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE reserved_at IS NOT NULL"); n != 0 {
			t.Fatalf("%d jobs still reserved after a graceful stop", n)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE attempts <> 0"); n != 0 {
			t.Fatalf("%d given-back jobs had their attempt counted", n)
		}
		left := db.Count(t, "SELECT COUNT(*) FROM jobs")
		if left == 0 || left == 200 || db.Count(t, "SELECT COUNT(*) FROM failed_jobs") != 0 {
			t.Fatalf("%d jobs left of 200; want some done, some given back, none failed", left)
		}
	})
}

func TestTimeouts(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t, dbqueue.WithRetryAfter(10*time.Second))
		var timedOut atomic.Int64
		w, logs := newWorker(t, q, worker.Options{
			Timeout: time.Second, Tries: 2, StopWhenEmpty: true, Concurrency: 4,
			Events: worker.Events{JobTimedOut: func(context.Context, *dbqueue.Job) { timedOut.Add(1) }},
		})
		w.Handle("polite", func(ctx context.Context, job *dbqueue.Job) error {
			<-ctx.Done()
			return ctx.Err()
		})
		var rudeDone atomic.Int64
		w.Handle("rude", func(ctx context.Context, job *dbqueue.Job) error {
			time.Sleep(4 * time.Second) // ignores ctx
			rudeDone.Add(1)
			return nil
		})
		var quick atomic.Int64
		w.Handle("quick", func(ctx context.Context, job *dbqueue.Job) error { quick.Add(1); return nil })
		pushN(t, q, 1, dbqueue.NewJob{Name: "polite"})                      // times out twice, then fails
		pushN(t, q, 1, dbqueue.NewJob{Name: "polite", FailOnTimeout: true}) // fails at the first timeout
		pushN(t, q, 1, dbqueue.NewJob{Name: "rude"})
		time.AfterFunc(1500*time.Millisecond, func() { pushN(t, q, 5, dbqueue.NewJob{Name: "quick"}) })
		if err := runUntil(t, w, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		if quick.Load() != 5 {
			t.Fatalf("ran %d quick jobs while a handler was stuck; want 5", quick.Load())
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM failed_jobs WHERE exception LIKE '%has timed out%'"); n != 2 {
			t.Fatalf("%d jobs failed by timeout, want 2", n)
		}
		if timedOut.Load() != 4 {
			t.Fatalf("%d timeout events, want 4 (polite twice, fail-on-timeout once, rude once)", timedOut.Load())
		}
		// The rude handler finished late while still holding its job: the
		// work is done, so it was deleted rather than run again.
		if rudeDone.Load() != 1 || db.Count(t, "SELECT COUNT(*) FROM jobs") != 0 {
			t.Fatalf("rude handler done %d times, %d jobs left", rudeDone.Load(), db.Count(t, "SELECT COUNT(*) FROM jobs"))
		}
		if !strings.Contains(logs.String(), "ignores its context") {
			t.Fatalf("the stuck handler was not logged:\n%s", logs)
		}
	})
}

func TestWedgedWorkerReturns(t *testing.T) {
	t.Parallel()
	q := dbtest.New(t, dbqueue.SQLite).Queue(t, dbqueue.WithRetryAfter(10*time.Second))
	w, _ := newWorker(t, q, worker.Options{Timeout: 500 * time.Millisecond, Concurrency: 1, Prefetch: -1, GracePeriod: 50 * time.Millisecond})
	release := make(chan struct{})
	defer close(release)
	w.Handle("stuck", func(ctx context.Context, job *dbqueue.Job) error { <-release; return nil })
	pushN(t, q, 1, dbqueue.NewJob{Name: "stuck"})
	if err := runUntil(t, w, 20*time.Second); !errors.Is(err, worker.ErrWedged) {
		t.Fatalf("Run with every goroutine stuck: %v, want ErrWedged", err)
	}
}

// A job given back by a stop is reported to JobGivenBack, and not to
// JobReleased, when that hook is set; without it, JobReleased hears it
// with a zero delay, as before the hook existed.
func TestJobGivenBackHook(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		for _, withHook := range []bool{true, false} {
			q := db.Queue(t)
			var givenBack, released atomic.Int64
			var delay atomic.Int64
			ev := worker.Events{JobReleased: func(_ context.Context, _ *dbqueue.Job, d time.Duration) {
				released.Add(1)
				delay.Store(int64(d))
			}}
			if withHook {
				ev.JobGivenBack = func(context.Context, *dbqueue.Job) { givenBack.Add(1) }
			}
			w, _ := newWorker(t, q, worker.Options{Concurrency: 1, GracePeriod: 50 * time.Millisecond, Events: ev})
			started := make(chan struct{})
			w.Handle("wait", func(ctx context.Context, job *dbqueue.Job) error {
				close(started)
				<-ctx.Done()
				return ctx.Err()
			})
			pushN(t, q, 1, dbqueue.NewJob{Name: "wait"})
			ctx, cancel := context.WithCancel(bg)
			go func() { <-started; cancel() }()
			if err := runReturns(t, ctx, w, 15*time.Second); err != nil {
				t.Fatal(err)
			}
			if s, _ := q.Size(bg, ""); s.Pending != 1 {
				t.Fatalf("hook set %v: sizes %+v, want the job pending again", withHook, s)
			}
			switch {
			case withHook && (givenBack.Load() != 1 || released.Load() != 0):
				t.Errorf("with JobGivenBack: given back %d, released %d; want 1 and 0", givenBack.Load(), released.Load())
			case !withHook && (released.Load() != 1 || delay.Load() != 0):
				t.Errorf("without JobGivenBack: released %d with delay %v; want once with 0", released.Load(), time.Duration(delay.Load()))
			}
			q.Clear(bg, "")
		}
	})
}
