package middleware_test

import (
	"context"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/middleware"
	"github.com/dbqueue/dbqueue/worker"
)

// Under ThrottlesExceptions(2), runs A and B of a key are under way; A
// succeeds while B still runs. The success forgets exceptions, not B's
// place: of two more runs, C and D, started then, one runs beside B and
// the other is released, so never more than 2 run at once. An exception
// of the run beside B then keeps its place, and a success of B's clears
// it but keeps that run's place.
func TestThrottlesExceptionsSuccessKeepsRunsUnderWay(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		const limit = 2
		q := db.Queue(t)
		jobs := reserveN(t, q, "call", 4)
		started := make(chan int, len(jobs))
		finish := make([]chan error, len(jobs))
		for i := range finish {
			finish[i] = make(chan error, 1)
		}
		t.Cleanup(func() { // a failed test leaves no handler waiting
			for _, f := range finish {
				select {
				case f <- nil:
				default:
				}
			}
		})
		service := func(_ context.Context, job *dbqueue.Job) error {
			var i int
			_ = job.Decode(&i)
			started <- i
			return <-finish[i]
		}
		h := middleware.ThrottlesExceptions(q, nil, limit, time.Hour)(service)
		results := make([]chan error, len(jobs))
		start := func(i int) {
			results[i] = make(chan error, 1)
			go func() { results[i] <- h(bg, jobs[i]) }()
		}
		waitStarted := func(want int) {
			t.Helper()
			select {
			case got := <-started:
				if got != want {
					t.Fatalf("run %d started, want run %d", got, want)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("run %d did not start", want)
			}
		}
		result := func(i int) error {
			t.Helper()
			select {
			case err := <-results[i]:
				return err
			case <-time.After(30 * time.Second):
				t.Fatalf("run %d did not return", i)
				return nil
			}
		}
		start(0)
		waitStarted(0)
		start(1)
		waitStarted(1)
		finish[0] <- nil // A succeeds; B runs on
		if err := result(0); err != nil {
			t.Fatalf("run 0: %v", err)
		}

		// C and D, one after the other: the first takes the place A gave
		// back, the second finds both places taken.
		start(2)
		waitStarted(2)
		start(3)
		select {
		case i := <-started:
			t.Fatalf("run %d started while runs 1 and 2 were under way: %d runs at once under a limit of %d", i, 3, limit)
		case err := <-results[3]:
			if !worker.IsOutcome(err) {
				t.Fatalf("run 3 returned %v, want a release", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("run 3 neither started nor returned")
		}

		// Run 2 fails: its exception keeps its place. Run 1 succeeds: the
		// exception is forgotten, and nothing is under way.
		finish[2] <- errDown
		if err := result(2); err != errDown {
			t.Fatalf("run 2 returned %v, want the service's error", err)
		}
		finish[1] <- nil
		if err := result(1); err != nil {
			t.Fatalf("run 1: %v", err)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs_limits"); n != 0 {
			t.Fatalf("%d throttle rows left once every run ended and the last succeeded, want 0", n)
		}
	})
}

var errDown = errorString("service unavailable")

type errorString string

func (e errorString) Error() string { return string(e) }
