package worker_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/worker"
)

// Worker middleware wrap handler middleware, each list first-outermost,
// on the way in and back out; what a middleware returns is acted on as a
// handler's would be, with or without calling next.
func TestMiddlewareOrderAndOutcomes(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		var mu sync.Mutex
		var trace []string
		note := func(s string) { mu.Lock(); trace = append(trace, s); mu.Unlock() }
		named := func(name string) worker.Middleware {
			return func(next worker.HandlerFunc) worker.HandlerFunc {
				return func(ctx context.Context, job *dbqueue.Job) error {
					note(name + ">")
					err := next(ctx, job)
					note("<" + name)
					return err
				}
			}
		}
		// decide returns what the job's data says without calling next.
		decide := func(next worker.HandlerFunc) worker.HandlerFunc {
			return func(ctx context.Context, job *dbqueue.Job) error {
				var d string
				_ = job.Decode(&d)
				switch d {
				case "release":
					return worker.ReleaseAfter(time.Hour)
				case "fail":
					return worker.FailNow(errors.New("refused by middleware"))
				case "discard":
					return worker.Discard()
				}
				return next(ctx, job)
			}
		}
		w, _ := newWorker(t, q, worker.Options{Concurrency: 1, StopWhenEmpty: true,
			Middleware: []worker.Middleware{named("w1"), named("w2")}})
		w.Handle("ordered", func(context.Context, *dbqueue.Job) error { note("handler"); return nil },
			worker.WithMiddleware(named("h1")), worker.WithMiddleware(named("h2")))
		var ran []string
		pushN(t, q, 1, dbqueue.NewJob{Name: "ordered"})
		if err := runUntil(t, w, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		want := []string{"w1>", "w2>", "h1>", "h2>", "handler", "<h2", "<h1", "<w2", "<w1"}
		if !slices.Equal(trace, want) {
			t.Fatalf("order %v, want %v", trace, want)
		}
		for _, d := range []string{"release", "fail", "discard", "run"} {
			pushN(t, q, 1, dbqueue.NewJob{Name: "decided", Data: d})
		}
		w2, _ := newWorker(t, q, worker.Options{Concurrency: 1, StopWhenEmpty: true})
		w2.Handle("decided", func(_ context.Context, job *dbqueue.Job) error {
			ran = append(ran, string(job.Payload.Data))
			return nil
		}, worker.WithMiddleware(decide))
		if err := runUntil(t, w2, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ran, []string{`"run"`}) {
			t.Fatalf("handler ran for %v, want only the job the middleware let through", ran)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE reserved_at IS NULL AND available_at > "+db.Now()+" + 3500"); n != 1 {
			t.Fatalf("%d jobs released by the middleware for an hour, want 1", n)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM failed_jobs WHERE exception LIKE '%refused by middleware%'"); n != 1 {
			t.Fatalf("%d jobs failed by the middleware, want 1", n)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 1 {
			t.Fatalf("%d jobs left, want 1 (the released one; discarded and run ones are deleted)", n)
		}
	})
}

// With no middleware the worker calls the handler itself: nothing wraps
// it, so an unused feature costs no call (and no database round trip).
func TestNoMiddlewareCallsHandlerDirectly(t *testing.T) {
	db := dbtest.New(t, dbqueue.SQLite)
	q := db.Queue(t)
	w, _ := newWorker(t, q, worker.Options{StopWhenEmpty: true})
	var caller string
	w.Handle("plain", func(context.Context, *dbqueue.Job) error {
		pc, _, _, _ := runtime.Caller(1)
		caller = runtime.FuncForPC(pc).Name()
		return nil
	})
	pushN(t, q, 1, dbqueue.NewJob{Name: "plain"})
	if err := runUntil(t, w, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(caller, "worker.(*run).call") {
		t.Fatalf("handler called from %q, want the worker's own call", caller)
	}
}

// New refuses a nil middleware; Handle panics on one.
func TestNilMiddleware(t *testing.T) {
	db := dbtest.New(t, dbqueue.SQLite)
	q := db.Queue(t)
	if _, err := worker.New(q, worker.Options{Middleware: []worker.Middleware{nil}}); err == nil || !strings.Contains(err.Error(), "nil middleware") {
		t.Fatalf("New with a nil middleware: %v, want an error", err)
	}
	w, _ := newWorker(t, q, worker.Options{})
	defer func() {
		if v := recover(); v == nil || !strings.Contains(v.(string), "nil middleware") {
			t.Fatalf("Handle with a nil middleware: recovered %v, want a panic naming it", v)
		}
	}()
	w.Handle("x", func(context.Context, *dbqueue.Job) error { return nil }, worker.WithMiddleware(nil))
}

// IsOutcome tells the worker's decisions from exceptions.
func TestIsOutcome(t *testing.T) {
	for _, err := range []error{worker.ReleaseAfter(time.Second), worker.FailNow(nil), worker.Discard(), errors.Join(errors.New("x"), worker.Discard())} {
		if !worker.IsOutcome(err) {
			t.Errorf("IsOutcome(%v) = false", err)
		}
	}
	if worker.IsOutcome(errors.New("boom")) || worker.IsOutcome(nil) {
		t.Error("IsOutcome of an exception or nil = true")
	}
}
