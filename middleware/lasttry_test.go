package middleware_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/middleware"
	"github.com/dbqueue/dbqueue/worker"
)

// A job that RateLimited, WithoutOverlapping or ThrottlesExceptions
// releases on its last try is not run again: at its next claim it fails as
// attempted too many times (worker.ErrMaxAttempts, as Laravel's
// MaxAttemptsExceededException), not as abandoned, and its handler never
// runs.
func TestMiddlewareReleaseOnLastTryFailsAtTheNextClaim(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		for _, c := range []struct {
			name string
			mw   func(q *dbqueue.Queue) worker.Middleware
			// hold makes the middleware hold back the next job of "api".
			hold string
		}{
			{"RateLimited", func(q *dbqueue.Queue) worker.Middleware { return middleware.RateLimited(q, nil, 1, time.Hour) },
				"INSERT INTO jobs_limits (name, window_start, hits) VALUES ('rate:api', " + db.Now() + ", 1)"},
			{"WithoutOverlapping", func(q *dbqueue.Queue) worker.Middleware {
				return middleware.WithoutOverlapping(q, nil, time.Hour)
			}, "INSERT INTO jobs_locks (name, owner, expires_at) VALUES ('api', 'another run', " + db.Now() + " + 3600)"},
			{"ThrottlesExceptions", func(q *dbqueue.Queue) worker.Middleware {
				return middleware.ThrottlesExceptions(q, nil, 1, time.Hour)
			}, "INSERT INTO jobs_limits (name, window_start, hits) VALUES ('throttle:api', " + db.Now() + ", 1)"},
		} {
			t.Run(c.name, func(t *testing.T) {
				db.Exec(t, "DELETE FROM jobs_limits")
				db.Exec(t, "DELETE FROM jobs_locks")
				db.Exec(t, "DELETE FROM failed_jobs")
				q := db.Queue(t)
				var runs atomic.Int64
				w := newWorker(t, q, worker.Options{Tries: 1})
				w.Handle("api", func(context.Context, *dbqueue.Job) error { runs.Add(1); return nil },
					worker.WithMiddleware(c.mw(q)))
				db.Exec(t, c.hold)
				push(t, q, dbqueue.NewJob{Name: "api"})
				res, err := w.RunOnce(bg)
				if err != nil || len(res) != 1 || res[0].Outcome != worker.OutcomeReleased {
					t.Fatalf("first claim: %+v, %v; want the job released by the middleware", res, err)
				}
				db.Exec(t, "UPDATE jobs SET available_at = 0")
				res, err = w.RunOnce(bg)
				if err != nil || len(res) != 1 {
					t.Fatalf("second claim: %+v, %v; want one job", res, err)
				}
				if r := res[0]; r.Outcome != worker.OutcomeFailed || !errors.Is(r.Err, worker.ErrMaxAttempts) || errors.Is(r.Err, worker.ErrAbandoned) {
					t.Fatalf("second claim: outcome %v, error %v; want failed with ErrMaxAttempts, not ErrAbandoned", r.Outcome, r.Err)
				}
				if n := db.Count(t, "SELECT COUNT(*) FROM failed_jobs"); n != 1 {
					t.Fatalf("%d rows in failed_jobs, want 1", n)
				}
				if runs.Load() != 0 {
					t.Fatalf("the handler ran %d times, want 0", runs.Load())
				}
			})
		}
	})
}
