package worker_test

import (
	"context"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/worker"
)

// Handlers run on the worker's own goroutines. One that ends its goroutine
// (runtime.Goexit, as t.FailNow in a test's handler does) must neither
// pass for a success nor take a runner with it: its job fails with the
// reason, and the worker, with a single goroutine, still runs the rest.
func TestHandlerThatEndsItsGoroutine(t *testing.T) {
	db := dbtest.New(t, dbqueue.SQLite)
	q := db.Queue(t)
	w, _ := newWorker(t, q, worker.Options{Concurrency: 1, Prefetch: -1, StopWhenEmpty: true})
	var after atomic.Int64
	w.Handle("exits", func(context.Context, *dbqueue.Job) error {
		runtime.Goexit()
		return nil
	})
	w.Handle("after", func(context.Context, *dbqueue.Job) error { after.Add(1); return nil })
	pushN(t, q, 1, dbqueue.NewJob{Name: "exits"})
	pushN(t, q, 3, dbqueue.NewJob{Name: "after"})
	if err := runUntil(t, w, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if after.Load() != 3 {
		t.Fatalf("ran %d jobs after the handler that exited, want 3", after.Load())
	}
	if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 0 {
		t.Fatalf("%d jobs left", n)
	}
	if n := db.Count(t, "SELECT COUNT(*) FROM failed_jobs WHERE exception LIKE '%Goexit%'"); n != 1 {
		t.Fatalf("%d jobs failed naming Goexit, want 1", n)
	}

	// RunOnce reports it too, and returns.
	pushN(t, q, 1, dbqueue.NewJob{Name: "exits"})
	pushN(t, q, 1, dbqueue.NewJob{Name: "after"})
	results, err := w.RunOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 2 {
		t.Fatalf("RunOnce: %d results, want 2", len(results))
	}
	for _, res := range results {
		switch {
		case res.Job.Name() == "exits" && (res.Outcome != worker.OutcomeFailed || res.Err == nil || !strings.Contains(res.Err.Error(), "Goexit")):
			t.Fatalf("RunOnce: the job that exited: %s, %v; want failed, naming Goexit", res.Outcome, res.Err)
		case res.Job.Name() == "after" && res.Outcome != worker.OutcomeDone:
			t.Fatalf("RunOnce: after: %s, %v", res.Outcome, res.Err)
		}
	}
}

// A handler's context ends when its job is finished: goroutines it left
// behind on that context stop, as they did when it was a context.WithTimeout
// cancelled on return.
func TestHandlerContextEndsWithTheJob(t *testing.T) {
	q := dbtest.New(t, dbqueue.SQLite).Queue(t)
	w, _ := newWorker(t, q, worker.Options{StopWhenEmpty: true})
	left := make(chan context.Context, 1)
	w.Handle("leaves", func(ctx context.Context, _ *dbqueue.Job) error {
		left <- ctx
		return nil
	})
	pushN(t, q, 1, dbqueue.NewJob{Name: "leaves"})
	if err := runUntil(t, w, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	ctx := <-left
	select {
	case <-ctx.Done():
	default:
		t.Fatal("the context of a finished job is still open")
	}
	if ctx.Err() != context.Canceled {
		t.Fatalf("Err = %v, want Canceled", ctx.Err())
	}
}

// A hook that ends its goroutine too, right after a handler did, still
// leaves RunOnce able to return.
func TestGoexitInHandlerAndHook(t *testing.T) {
	q := dbtest.New(t, dbqueue.SQLite).Queue(t)
	w, _ := newWorker(t, q, worker.Options{Concurrency: 1, Timeout: 5 * time.Second,
		Events: worker.Events{JobExceptionOccurred: func(context.Context, *dbqueue.Job, error) { runtime.Goexit() }}})
	w.Handle("x", func(context.Context, *dbqueue.Job) error { runtime.Goexit(); return nil })
	pushN(t, q, 2, dbqueue.NewJob{Name: "x"})
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := w.RunOnce(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("RunOnce never returned")
	}
}

// Under RunOnce with a context that ends before the job's timeout, the
// handler's deadline is that context's, and it ends with its error.
func TestRunOnceDeadlineReachesHandlers(t *testing.T) {
	q := dbtest.New(t, dbqueue.SQLite).Queue(t)
	w, _ := newWorker(t, q, worker.Options{Timeout: 30 * time.Second})
	var (
		deadline time.Time
		ended    error
	)
	w.Handle("j", func(ctx context.Context, _ *dbqueue.Job) error {
		deadline, _ = ctx.Deadline()
		<-ctx.Done()
		ended = ctx.Err()
		return ctx.Err()
	})
	pushN(t, q, 1, dbqueue.NewJob{Name: "j"})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	want, _ := ctx.Deadline()
	res, err := w.RunOnce(ctx)
	if err != nil || len(res) != 1 {
		t.Fatalf("RunOnce: %v, %v", res, err)
	}
	if !deadline.Equal(want) || ended != context.DeadlineExceeded {
		t.Fatalf("handler saw deadline %v (RunOnce's is %v) and ended with %v; want RunOnce's deadline and DeadlineExceeded", deadline, want, ended)
	}
}

// A context derived from a handler's ends the moment the handler's does:
// a handler that waits on its context and then reads a child's error
// must not find the child still open.
func TestDerivedContextsEndWithTheHandlers(t *testing.T) {
	q := dbtest.New(t, dbqueue.SQLite).Queue(t, dbqueue.WithRetryAfter(10*time.Second))
	w, _ := newWorker(t, q, worker.Options{Timeout: 200 * time.Millisecond, Concurrency: 4, StopWhenEmpty: true})
	var stillOpen, total atomic.Int64
	w.Handle("j", func(ctx context.Context, _ *dbqueue.Job) error {
		child, cancel := context.WithCancel(ctx)
		defer cancel()
		<-ctx.Done()
		total.Add(1)
		if child.Err() == nil {
			stillOpen.Add(1)
		}
		return worker.Discard()
	})
	pushN(t, q, 8, dbqueue.NewJob{Name: "j"})
	if err := runUntil(t, w, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if stillOpen.Load() != 0 || total.Load() != 8 {
		t.Fatalf("%d of %d derived contexts still open right after the handler's ended", stillOpen.Load(), total.Load())
	}
}
