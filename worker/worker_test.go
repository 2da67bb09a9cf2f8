package worker_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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

var bg = context.Background()

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newWorker(t *testing.T, q *dbqueue.Queue, o worker.Options) (*worker.Worker, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	}
	if o.Sleep == 0 {
		o.Sleep = 50 * time.Millisecond
	}
	if o.SignalInterval == 0 {
		o.SignalInterval = 50 * time.Millisecond
	}
	w, err := worker.New(q, o)
	if err != nil {
		t.Fatal(err)
	}
	return w, logs
}

// runUntil runs w until it returns or the timeout passes (a failure).
func runUntil(t *testing.T, w *worker.Worker, timeout time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg, timeout)
	defer cancel()
	err := w.Run(ctx)
	if ctx.Err() != nil {
		t.Fatalf("worker did not stop within %v", timeout)
	}
	return err
}

func pushN(t *testing.T, q *dbqueue.Queue, n int, job dbqueue.NewJob) []int64 {
	t.Helper()
	jobs := make([]dbqueue.NewJob, n)
	for i := range jobs {
		jobs[i] = job
	}
	ids, err := q.PushMany(bg, jobs)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func TestWorkerRunsJobs(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		type mail struct{ To string }
		var got sync.Map
		var processed, processing atomic.Int64
		logs := &syncBuffer{}
		w, _ := newWorker(t, q, worker.Options{
			Concurrency: 4, StopWhenEmpty: true,
			Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
			Events: worker.Events{
				JobProcessing: func(context.Context, *dbqueue.Job) { processing.Add(1) },
				JobProcessed:  func(context.Context, *dbqueue.Job, time.Duration) { processed.Add(1) },
			},
		})
		worker.HandleJSON(w, "mail", func(ctx context.Context, job *dbqueue.Job, m mail) error {
			got.Store(m.To, job.ID)
			return nil
		})
		for i := 0; i < 50; i++ {
			if _, err := q.Push(bg, dbqueue.NewJob{Name: "mail", Data: mail{To: fmt.Sprint(i)}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := runUntil(t, w, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		n := 0
		got.Range(func(any, any) bool { n++; return true })
		if n != 50 || processed.Load() != 50 || processing.Load() != 50 {
			t.Fatalf("ran %d distinct jobs, %d processed events, %d processing; want 50", n, processed.Load(), processing.Load())
		}
		if left := db.Count(t, "SELECT COUNT(*) FROM jobs"); left != 0 {
			t.Fatalf("%d jobs left", left)
		}
		// Successes are logged at Debug (see TestDefaultLogIsQuietAboutSuccess).
		if !strings.Contains(logs.String(), "level=DEBUG msg=job") || !strings.Contains(logs.String(), "outcome=done") || !strings.Contains(logs.String(), "name=mail") {
			t.Fatalf("no per-job log line at Debug:\n%s", logs)
		}
	})
}

func TestRetriesThenFails(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		var attempts []int
		var mu sync.Mutex
		var failedCalls atomic.Int64
		var released atomic.Int64
		w, _ := newWorker(t, q, worker.Options{Tries: 3, StopWhenEmpty: true, Events: worker.Events{
			JobReleasedAfterException: func(context.Context, *dbqueue.Job, time.Duration) { released.Add(1) },
		}})
		w.Handle("flaky", func(ctx context.Context, job *dbqueue.Job) error {
			mu.Lock()
			attempts = append(attempts, job.Attempts)
			mu.Unlock()
			return errors.New("upstream 503")
		}, worker.OnFailure(func(ctx context.Context, job *dbqueue.Job, cause error) {
			failedCalls.Add(1)
		}))
		pushN(t, q, 1, dbqueue.NewJob{Name: "flaky"})
		if err := runUntil(t, w, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(attempts) != "[1 2 3]" || released.Load() != 2 || failedCalls.Load() != 1 {
			t.Fatalf("attempts %v, released %d, failure callback %d; want [1 2 3], 2, 1", attempts, released.Load(), failedCalls.Load())
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM failed_jobs WHERE exception LIKE '%upstream 503%'"); n != 1 {
			t.Fatalf("%d failed_jobs rows with the error", n)
		}
	})
}

func TestBackoffAndPayloadOverrides(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		w, _ := newWorker(t, q, worker.Options{Tries: 1, StopWhenEmpty: true})
		w.Handle("slow-retry", func(ctx context.Context, job *dbqueue.Job) error { return errors.New("no") })
		// The payload's maxTries (5) overrides the worker's Tries (1) and its
		// backoff applies: the job is released for an hour after attempt 1.
		pushN(t, q, 1, dbqueue.NewJob{Name: "slow-retry", MaxTries: 5, Backoff: []time.Duration{time.Hour, 2 * time.Hour}})
		if err := runUntil(t, w, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		s, _ := q.Size(bg, "")
		if s.Delayed != 1 {
			t.Fatalf("sizes %+v: want the job delayed by its backoff", s)
		}
		var wait int64
		if err := db.SQL.QueryRow("SELECT available_at - " + db.Now() + " FROM jobs").Scan(&wait); err != nil {
			t.Fatal(err)
		}
		if wait < 3500 || wait > 3600 {
			t.Fatalf("released for %ds, want the first backoff, 3600s", wait)
		}
	})
}

func TestHandlerOutcomes(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		w, _ := newWorker(t, q, worker.Options{Tries: 5, StopWhenEmpty: true})
		w.Handle("release", func(ctx context.Context, job *dbqueue.Job) error { return worker.ReleaseAfter(time.Hour) })
		w.Handle("fail", func(ctx context.Context, job *dbqueue.Job) error { return worker.FailNow(errors.New("card declined")) })
		w.Handle("discard", func(ctx context.Context, job *dbqueue.Job) error { return worker.Discard() })
		w.Handle("panic", func(ctx context.Context, job *dbqueue.Job) error { panic("nil map write") })
		for _, name := range []string{"release", "fail", "discard", "panic", "nobody-handles-this"} {
			pushN(t, q, 1, dbqueue.NewJob{Name: name, MaxTries: 1})
		}
		if err := runUntil(t, w, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE reserved_at IS NULL AND attempts = 1"); n != 1 {
			t.Fatalf("want the released job left in jobs, got %d", n)
		}
		// The job no handler here knows waits for a worker that has one,
		// its one try intact (UnknownKindWait).
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE reserved_at IS NULL AND attempts = 0 AND payload LIKE '%nobody-handles-this%'"); n != 1 {
			t.Fatalf("want the job of an unknown kind left in jobs with its attempt given back, got %d", n)
		}
		for _, want := range []string{"card declined", "panic: nil map write", "worker_test.go"} {
			if n := db.Count(t, "SELECT COUNT(*) FROM failed_jobs WHERE exception LIKE ?", "%"+want+"%"); n != 1 {
				t.Errorf("failed_jobs has %d rows mentioning %q, want 1", n, want)
			}
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM failed_jobs"); n != 2 {
			t.Errorf("%d failed jobs, want 2 (fail, panic)", n)
		}
	})
}

func TestMaxExceptions(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		var runs atomic.Int64
		w, _ := newWorker(t, q, worker.Options{StopWhenEmpty: true})
		w.Handle("limited", func(ctx context.Context, job *dbqueue.Job) error {
			// Odd attempts are rate-limited (released, not an exception);
			// even attempts fail.
			runs.Add(1)
			if job.Attempts%2 == 1 {
				return worker.ReleaseAfter(0)
			}
			return errors.New("boom")
		})
		pushN(t, q, 1, dbqueue.NewJob{Name: "limited", MaxTries: 100, MaxExceptions: 2})
		if err := runUntil(t, w, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		if runs.Load() != 4 || db.Count(t, "SELECT COUNT(*) FROM failed_jobs") != 1 {
			t.Fatalf("ran %d times; want 4 (two releases, two exceptions) and then failed", runs.Load())
		}
	})
}

func TestRetryUntilAndMaxAttemptsExceeded(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t, dbqueue.WithRetryAfter(30*time.Second))
		var ran atomic.Int64
		w, _ := newWorker(t, q, worker.Options{Tries: 1, Timeout: 10 * time.Second, StopWhenEmpty: true})
		w.Handle("j", func(ctx context.Context, job *dbqueue.Job) error { ran.Add(1); return nil })
		pushN(t, q, 1, dbqueue.NewJob{Name: "j", RetryUntil: time.Now().Add(-time.Minute)})
		// A job whose holder died on its only try: reserved once, expired.
		pushN(t, q, 1, dbqueue.NewJob{Name: "j", Queue: "dead"})
		if _, err := q.Reserve(bg, 1, "dead"); err != nil {
			t.Fatal(err)
		}
		db.Exec(t, "UPDATE jobs SET reserved_at = reserved_at - 60 WHERE queue = 'dead'")
		// Laravel's rule for a job abandoned past its tries: fail it unrun.
		w2, _ := newWorker(t, q, worker.Options{Tries: 1, Timeout: 10 * time.Second, StopWhenEmpty: true, Queues: []string{"default", "dead"},
			AbandonedRetries: worker.LaravelAbandoned})
		w2.Handle("j", func(ctx context.Context, job *dbqueue.Job) error { ran.Add(1); return nil })
		if err := runUntil(t, w2, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		if ran.Load() != 0 {
			t.Fatalf("handler ran %d times; both jobs must fail before running", ran.Load())
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM failed_jobs WHERE exception LIKE '%attempted too many times%'"); n != 2 {
			t.Fatalf("%d jobs failed as attempted too many times, want 2", n)
		}
	})
}

func TestRefusesTimeoutNearRetryAfter(t *testing.T) {
	q := dbtest.New(t, dbqueue.SQLite).Queue(t, dbqueue.WithRetryAfter(60*time.Second))
	_, err := worker.New(q, worker.Options{Timeout: 58 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "retry_after") || !strings.Contains(err.Error(), "shorter") {
		t.Fatalf("timeout 58s with retry_after 60s: %v", err)
	}
	if _, err := worker.New(q, worker.Options{Timeout: 55 * time.Second}); err != nil {
		t.Fatalf("timeout 55s with retry_after 60s: %v", err)
	}
	for _, o := range []worker.Options{{Concurrency: -1}, {Claims: -1}, {Tries: -5}, {Backoff: []time.Duration{-time.Second}}, {Queues: []string{""}}} {
		if _, err := worker.New(q, o); err == nil {
			t.Errorf("options %+v accepted", o)
		}
	}
	w, err := worker.New(q, worker.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Run(bg); err == nil || !strings.Contains(err.Error(), "no handlers") {
		t.Fatalf("Run without handlers: %v", err)
	}
}
