package worker_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/worker"
)

// logWatch is a slog handler that closes seen the first time a record whose
// message contains msg is logged, so a test can wait for something the
// worker only logs.
type logWatch struct {
	slog.Handler
	msg  string
	once *sync.Once
	seen chan struct{}
}

func watchLog(msg string) (*slog.Logger, <-chan struct{}, *syncBuffer) {
	logs := &syncBuffer{}
	h := logWatch{Handler: slog.NewTextHandler(logs, nil), msg: msg, once: &sync.Once{}, seen: make(chan struct{})}
	return slog.New(h), h.seen, logs
}

func (h logWatch) Handle(ctx context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.msg) {
		h.once.Do(func() { close(h.seen) })
	}
	return h.Handler.Handle(ctx, r)
}

func (h logWatch) WithAttrs(attrs []slog.Attr) slog.Handler {
	h.Handler = h.Handler.WithAttrs(attrs)
	return h
}

func (h logWatch) WithGroup(name string) slog.Handler {
	h.Handler = h.Handler.WithGroup(name)
	return h
}

// runReturns runs w and fails the test unless Run returns within limit.
// (runUntil cannot tell: a Run that ignores its context never returns.)
func runReturns(t *testing.T, ctx context.Context, w *worker.Worker, limit time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		t.Fatalf("Run did not return within %v", limit)
		return nil
	}
}

// A prefetched job is started only when its reservation outlasts its own
// timeout (the payload's, not the worker's default) plus the abandon wait:
// with retry_after 7s, jobs of payload timeout 2s taking 1.9s each and one
// goroutine, the fourth would start 5.7s into its reservation, overrun it,
// be claimed again and run twice.
func TestPrefetchedJobNeedsItsOwnTimeoutLeft(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t, dbqueue.WithRetryAfter(7*time.Second))
		var mu sync.Mutex
		runs := map[int64]int{}
		w, logs := newWorker(t, q, worker.Options{
			Timeout: 100 * time.Millisecond, Concurrency: 1, Prefetch: 3, Tries: 3, StopWhenEmpty: true,
		})
		w.Handle("slow", func(ctx context.Context, job *dbqueue.Job) error {
			mu.Lock()
			runs[job.ID]++
			mu.Unlock()
			time.Sleep(1900 * time.Millisecond) // the work: ignores ctx, as long-running work may
			return nil
		})
		ids := pushN(t, q, 4, dbqueue.NewJob{Name: "slow", Timeout: 2 * time.Second})
		if err := runUntil(t, w, 40*time.Second); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		for _, id := range ids {
			if runs[id] != 1 {
				t.Errorf("job %d ran %d times, want once", id, runs[id])
			}
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs") + db.Count(t, "SELECT COUNT(*) FROM failed_jobs"); n != 0 {
			t.Errorf("%d rows left in jobs and failed_jobs, want all 4 done", n)
		}
		if t.Failed() {
			t.Log(logs)
		}
	})
}

// Every stop reason, not only a cancelled context, ends within the grace
// period and the abandon wait when a handler ignores its context; and
// cancelling the context during that wait ends it early.
func TestEveryStopEndsDespiteStuckHandler(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		release := make(chan struct{})
		defer close(release) // lets the stuck handlers' goroutines end
		stuck := func(started chan struct{}) worker.HandlerFunc {
			var once sync.Once
			return func(ctx context.Context, job *dbqueue.Job) error {
				once.Do(func() { close(started) })
				<-release // ignores ctx
				return nil
			}
		}
		quick := func(context.Context, *dbqueue.Job) error { return nil }
		start := func(o worker.Options, queue string, reason *atomic.Value) (*worker.Worker, chan struct{}) {
			o.Queues, o.Events = []string{queue}, recordStop(reason)
			w, _ := newWorker(t, q, o)
			started := make(chan struct{})
			w.Handle("stuck", stuck(started))
			w.Handle("quick", quick)
			return w, started
		}

		// MaxJobs: the stuck job counts once it is abandoned past its timeout.
		var reason atomic.Value
		w, _ := start(worker.Options{Concurrency: 2, Timeout: 500 * time.Millisecond, MaxJobs: 2, GracePeriod: 100 * time.Millisecond}, "maxjobs", &reason)
		pushN(t, q, 1, dbqueue.NewJob{Name: "stuck", Queue: "maxjobs"})
		pushN(t, q, 1, dbqueue.NewJob{Name: "quick", Queue: "maxjobs"})
		if err := runReturns(t, bg, w, 15*time.Second); err != nil {
			t.Fatal(err)
		}
		if r, _ := reason.Load().(worker.StopReason); r != worker.StopMaxJobs {
			t.Fatalf("stopped for %q, want max-jobs", r)
		}

		// StopWhenEmpty: nothing else is ready once the stuck job is abandoned.
		w, _ = start(worker.Options{Concurrency: 2, Timeout: 500 * time.Millisecond, StopWhenEmpty: true, GracePeriod: 100 * time.Millisecond}, "empty", &reason)
		pushN(t, q, 1, dbqueue.NewJob{Name: "stuck", Queue: "empty"})
		if err := runReturns(t, bg, w, 15*time.Second); err != nil {
			t.Fatal(err)
		}
		if r, _ := reason.Load().(worker.StopReason); r != worker.StopEmpty {
			t.Fatalf("stopped for %q, want empty", r)
		}

		// MaxTime with a grace period of an hour: cancelling Run's context
		// once the worker waits for the stuck handler ends the wait.
		logger, waiting, logs := watchLog("waiting for running jobs")
		w, started := start(worker.Options{Concurrency: 2, MaxTime: time.Second, GracePeriod: time.Hour, Logger: logger}, "maxtime", &reason)
		pushN(t, q, 1, dbqueue.NewJob{Name: "stuck", Queue: "maxtime"})
		ctx, cancel := context.WithCancel(bg)
		defer cancel()
		go func() {
			select {
			case <-waiting:
				cancel()
			case <-time.After(15 * time.Second):
			}
		}()
		if err := runReturns(t, ctx, w, 20*time.Second); err != nil {
			t.Fatal(err)
		}
		select {
		case <-waiting:
		default:
			t.Fatalf("Run returned without waiting for the running job:\n%s", logs)
		}
		select {
		case <-started:
		default:
			t.Fatal("the stuck handler never started: the test proves nothing")
		}
		if r, _ := reason.Load().(worker.StopReason); r != worker.StopMaxTime {
			t.Fatalf("stopped for %q, want max-time", r)
		}

		// Restart, last: the signal reaches every worker of the connection.
		w, started = start(worker.Options{Concurrency: 2, GracePeriod: 100 * time.Millisecond}, "restart", &reason)
		pushN(t, q, 1, dbqueue.NewJob{Name: "stuck", Queue: "restart"})
		go func() {
			<-started
			if err := q.Restart(bg); err != nil {
				t.Error(err)
			}
		}()
		if err := runReturns(t, bg, w, 15*time.Second); err != nil {
			t.Fatal(err)
		}
		if r, _ := reason.Load().(worker.StopReason); r != worker.StopRestart {
			t.Fatalf("stopped for %q, want restart", r)
		}
	})
}

// A job cancelled by a graceful stop is not the job's fault: even on its
// only try, and even when its handler takes longer than the abandon wait to
// return, it is never failed as timed out; and once Run has returned the
// worker writes nothing and calls no hook for it: the job stays reserved.
func TestStopNeverFailsCancelledJob(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		logger, lateLog, logs := watchLog("after Run returned")
		var returned atomic.Bool
		var late atomic.Int64 // hooks called after Run returned
		note := func() {
			if returned.Load() {
				late.Add(1)
			}
		}
		w, _ := newWorker(t, q, worker.Options{
			Tries: 1, Concurrency: 1, GracePeriod: 50 * time.Millisecond, Logger: logger,
			Events: worker.Events{
				JobProcessed:              func(context.Context, *dbqueue.Job, time.Duration) { note() },
				JobExceptionOccurred:      func(context.Context, *dbqueue.Job, error) { note() },
				JobReleasedAfterException: func(context.Context, *dbqueue.Job, time.Duration) { note() },
				JobReleased:               func(context.Context, *dbqueue.Job, time.Duration) { note() },
				JobFailed:                 func(context.Context, *dbqueue.Job, error) { note() },
				JobTimedOut:               func(context.Context, *dbqueue.Job) { note() },
				WorkerStopping:            func(worker.StopReason, error) { returned.Store(true) },
			},
		})
		started, release := make(chan struct{}), make(chan struct{})
		var failedCalls atomic.Int64
		w.Handle("stubborn", func(ctx context.Context, job *dbqueue.Job) error {
			close(started)
			<-ctx.Done()
			<-release // keeps going well past the abandon wait
			return ctx.Err()
		}, worker.OnFailure(func(context.Context, *dbqueue.Job, error) { failedCalls.Add(1) }))
		pushN(t, q, 1, dbqueue.NewJob{Name: "stubborn"})
		ctx, cancel := context.WithCancel(bg)
		go func() { <-started; cancel() }()
		if err := runReturns(t, ctx, w, 15*time.Second); err != nil {
			t.Fatal(err)
		}
		close(release)
		select {
		case <-lateLog:
		case <-time.After(10 * time.Second):
			t.Errorf("the handler's return after Run returned was not logged")
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM failed_jobs"); n != 0 {
			t.Fatalf("a job cancelled by a graceful stop was failed:\n%s", logs)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE reserved_at IS NOT NULL"); n != 1 {
			t.Fatalf("%d jobs reserved; want the stubborn one left reserved until retry_after", n)
		}
		if late.Load() != 0 || failedCalls.Load() != 0 {
			t.Fatalf("%d hooks and %d failure callbacks ran after Run returned", late.Load(), failedCalls.Load())
		}
	})
}
