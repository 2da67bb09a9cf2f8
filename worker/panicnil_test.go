//go:debug panicnil=1

package worker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/worker"
)

// With GODEBUG=panicnil=1 (set for this test binary above), recover
// returns nil for panic(nil), as it does for runtime.Goexit: the worker
// must tell them apart (the handler's goroutine goes on) and fail the job,
// not finish it twice and hang.
func TestPanicNilUnderPanicnil(t *testing.T) {
	if recoversNil() {
		t.Fatal("GODEBUG=panicnil=1 is not in effect: this test would not test what it says")
	}
	q := dbtest.New(t, dbqueue.SQLite).Queue(t)
	w, _ := newWorker(t, q, worker.Options{Concurrency: 1, Timeout: 5 * time.Second})
	w.Handle("p", func(context.Context, *dbqueue.Job) error { panic(nil) })
	pushN(t, q, 2, dbqueue.NewJob{Name: "p"})
	done := make(chan []worker.Result)
	go func() {
		res, err := w.RunOnce(context.Background())
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	select {
	case res := <-done:
		for _, r := range res {
			if r.Outcome != worker.OutcomeFailed || r.Err == nil || !strings.Contains(r.Err.Error(), "panic") {
				t.Errorf("job after panic(nil): %s, %v; want failed naming the panic", r.Outcome, r.Err)
			}
		}
	case <-time.After(30 * time.Second):
		t.Fatal("RunOnce never returned")
	}
}

// recoversNil reports whether recover returns something for panic(nil):
// false under panicnil=1.
func recoversNil() (got bool) {
	defer func() { got = recover() != nil }()
	panic(nil)
}
