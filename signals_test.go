package dbqueue_test

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
	"github.com/dbqueue/dbqueue/failed"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/worker"
)

// The longest queue name Push accepts (255 bytes, the queue column's
// width) can be paused and resumed, apart from another as long that
// differs only at its end; a longer name is refused by Push and by Pause,
// with an error that gives the limit.
func TestLongestQueueNamePausesAndResumes(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		longest := strings.Repeat("q", 254) + "a"
		sibling := strings.Repeat("q", 254) + "b"
		push(t, q, dbqueue.NewJob{Name: "n", Queue: longest})
		paused := func(name string) bool {
			t.Helper()
			p, err := q.Paused(ctx, name)
			if err != nil {
				t.Fatalf("Paused(%d bytes): %v", len(name), err)
			}
			return p
		}
		if err := q.Pause(ctx, longest); err != nil {
			t.Fatalf("pause a %d-byte queue name Push accepted: %v", len(longest), err)
		}
		if !paused(longest) {
			t.Fatal("the longest queue name is not paused after Pause")
		}
		if paused(sibling) {
			t.Fatal("pausing one long queue paused another that differs at its end")
		}
		if err := q.Resume(ctx, longest); err != nil {
			t.Fatalf("resume the longest queue name: %v", err)
		}
		if paused(longest) {
			t.Fatal("the longest queue name is still paused after Resume")
		}

		tooLong := strings.Repeat("q", 256)
		if _, err := q.Push(ctx, dbqueue.NewJob{Name: "n", Queue: tooLong}); err == nil || !strings.Contains(err.Error(), "255") {
			t.Fatalf("push to a 256-byte queue name: %v; want an error that gives the 255-byte limit", err)
		}
		if err := q.Pause(ctx, tooLong); err == nil || !strings.Contains(err.Error(), "255") {
			t.Fatalf("pause a 256-byte queue name: %v; want an error that gives the 255-byte limit", err)
		}
	})
}

// A second Restart within the same second as the first still stops a
// worker that started between the two: each Restart is news.
func TestSecondRestartInOneSecondStopsAWorkerStartedBetween(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		clock := func() int64 {
			t.Helper()
			var s int64
			if err := db.SQL.QueryRow("SELECT " + db.Now()).Scan(&s); err != nil {
				t.Fatal(err)
			}
			return s
		}
		// Both restarts must land in one second of the database's clock;
		// an attempt that straddles a second is tried again.
		for attempt := 1; ; attempt++ {
			before := clock()
			if err := q.Restart(ctx); err != nil {
				t.Fatal(err)
			}
			var (
				reason  atomic.Value
				once    sync.Once
				started = make(chan struct{})
			)
			w, err := worker.New(q, worker.Options{
				Sleep: 50 * time.Millisecond, SignalInterval: 20 * time.Millisecond,
				Logger: slog.New(slog.DiscardHandler),
				Events: worker.Events{
					Looping:        func(context.Context) { once.Do(func() { close(started) }) },
					WorkerStopping: func(r worker.StopReason, err error) { reason.Store(r) },
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			w.Handle("n", func(context.Context, *dbqueue.Job) error { return nil })
			runCtx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- w.Run(runCtx) }()
			select {
			case <-started:
			case err := <-done:
				cancel()
				t.Fatalf("the worker stopped before it looked for jobs: %v (%v)", err, reason.Load())
			case <-time.After(10 * time.Second):
				cancel()
				t.Fatal("the worker did not start within 10s")
			}
			if err := q.Restart(ctx); err != nil {
				cancel()
				t.Fatal(err)
			}
			if clock() != before {
				cancel()
				<-done
				if attempt == 20 {
					t.Fatal("could not restart twice within one second of the database's clock in 20 attempts")
				}
				continue
			}
			select {
			case err := <-done:
				cancel()
				if err != nil && !errors.Is(err, context.Canceled) {
					t.Fatalf("Run: %v", err)
				}
				if r := reason.Load(); r != worker.StopRestart {
					t.Fatalf("the worker stopped for %v, want %q", r, worker.StopRestart)
				}
			case <-time.After(5 * time.Second):
				cancel()
				<-done
				t.Fatal("a worker started between two restarts in one second did not stop at the second")
			}
			return
		}
	})
}

// Queue names are compared byte for byte on every database: names that
// differ only in case or in trailing spaces are different queues for
// push and reserve, pause and resume, sizes, the list of queues, and the
// retry of a queue's failed jobs.
func TestQueueNamesAreByteExact(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		push(t, q, dbqueue.NewJob{Name: "n", Queue: "MAIL "})
		push(t, q, dbqueue.NewJob{Name: "n", Queue: "Reports"})
		for _, name := range []string{"mail", "MAIL", "mail ", "Mail "} {
			if got := reserve(t, q, 10, name); len(got) != 0 {
				t.Fatalf("a reserve from %q took the job pushed to %q", name, "MAIL ")
			}
			if s, err := q.Size(ctx, name); err != nil || s.Total() != 0 {
				t.Fatalf("Size(%q) = %+v, %v; want nothing (the job is on %q)", name, s, err, "MAIL ")
			}
		}
		if s, err := q.Size(ctx, "MAIL "); err != nil || s.Pending != 1 {
			t.Fatalf("Size(%q) = %+v, %v; want 1 pending", "MAIL ", s, err)
		}
		if names, err := q.Queues(ctx); err != nil || len(names) != 2 {
			t.Fatalf("Queues() = %q, %v; want MAIL  and Reports", names, err)
		}

		if err := q.Pause(ctx, "Reports"); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"reports", "Reports ", "REPORTS"} {
			if p, err := q.Paused(ctx, name); err != nil || p {
				t.Fatalf("Paused(%q) = %v, %v after Pause(\"Reports\")", name, p, err)
			}
		}
		if err := q.Pause(ctx, "reports"); err != nil {
			t.Fatal(err)
		}
		if err := q.Resume(ctx, "reports"); err != nil {
			t.Fatal(err)
		}
		if p, err := q.Paused(ctx, "Reports"); err != nil || !p {
			t.Fatalf("Resume(\"reports\") resumed \"Reports\": paused %v, %v", p, err)
		}

		// A failed job of "MAIL " is retried by its own queue's name only.
		got := reserve(t, q, 1, "MAIL ")
		if len(got) != 1 {
			t.Fatalf("reserved %d jobs from %q, want 1", len(got), "MAIL ")
		}
		if err := q.Fail(ctx, got[0], errors.New("boom")); err != nil {
			t.Fatal(err)
		}
		store, err := failed.New(q)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := store.RetryQueue(ctx, "mail"); err != nil || n != 0 {
			t.Fatalf("RetryQueue(\"mail\") retried %d, %v; want none of %q's", n, err, "MAIL ")
		}
		if n, err := store.RetryQueue(ctx, "MAIL"); err != nil || n != 0 {
			t.Fatalf("RetryQueue(\"MAIL\") retried %d, %v; want none of %q's", n, err, "MAIL ")
		}
		if list, err := store.List(ctx, failed.Filter{Queue: "mail "}); err != nil || len(list) != 0 {
			t.Fatalf("List(queue \"mail \") = %d jobs, %v; want none", len(list), err)
		}
		if n, err := store.RetryQueue(ctx, "MAIL "); err != nil || n != 1 {
			t.Fatalf("RetryQueue(%q) retried %d, %v; want 1", "MAIL ", n, err)
		}
	})
}

// Pauses of two connections of one database stay apart even when a colon
// in a connection's name makes "connection:queue" read the same: pausing
// queue "c" of connection "a:b" leaves queue "b:c" of connection "a"
// running.
func TestPauseKeepsConnectionsWithColonsApart(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		colon := db.Queue(t, dbqueue.WithConnectionName("a:b"))
		plain := db.Queue(t, dbqueue.WithConnectionName("a"))
		if err := colon.Pause(ctx, "c"); err != nil {
			t.Fatal(err)
		}
		if p, err := colon.Paused(ctx, "c"); err != nil || !p {
			t.Fatalf("queue c of connection a:b: paused %v, %v after Pause", p, err)
		}
		if p, err := plain.Paused(ctx, "b:c"); err != nil || p {
			t.Fatalf("pausing queue c of connection a:b paused queue b:c of connection a: %v, %v", p, err)
		}
	})
}
