package dbqueue_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/failed"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/worker"
)

// A batch of three: job A fails, an operator retries it from failed_jobs,
// and it fails again while B and C have not run yet. The batch must not
// look done, and finally must not fire, until B and C have run; then it
// fires once. A failure counts once per job, however often it is retried.
func TestBatchRetriedJobFailsAgain(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		b, err := q.Batch(ctx, dbqueue.BatchOptions{Name: "retried", AllowFailures: true},
			dbqueue.NewJob{Name: "boom", Queue: "a", MaxTries: 1},
			dbqueue.NewJob{Name: "ok", Queue: "b"},
			dbqueue.NewJob{Name: "ok", Queue: "c"},
		)
		if err != nil {
			t.Fatal(err)
		}
		var finally, catch atomic.Int64
		work := func(queue string) {
			t.Helper()
			w, err := worker.New(q, worker.Options{Queues: []string{queue}})
			if err != nil {
				t.Fatal(err)
			}
			w.Handle("boom", func(context.Context, *dbqueue.Job) error { return errors.New("boom") })
			w.Handle("ok", func(context.Context, *dbqueue.Job) error { return nil })
			w.OnBatch("retried", worker.BatchCallbacks{
				Catch:   func(context.Context, *dbqueue.Batch, *dbqueue.Job, error) { catch.Add(1) },
				Finally: func(context.Context, *dbqueue.Batch) { finally.Add(1) },
			})
			if _, err := w.RunOnce(ctx); err != nil {
				t.Fatal(err)
			}
		}
		check := func(when string, pending, failedJobs int, done bool, fired int64) {
			t.Helper()
			got, err := q.FindBatch(ctx, b.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.PendingJobs != pending || got.FailedJobs != failedJobs || got.Done() != done || finally.Load() != fired || catch.Load() != 1 {
				t.Fatalf("%s: pending %d, failed %d, done %v, finally fired %d, catch fired %d; want pending %d, failed %d, done %v, finally %d, catch 1",
					when, got.PendingJobs, got.FailedJobs, got.Done(), finally.Load(), catch.Load(), pending, failedJobs, done, fired)
			}
		}

		work("a")
		check("A failed", 3, 1, false, 0)
		got, _ := q.FindBatch(ctx, b.ID)
		store, err := failed.New(q)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := store.Retry(ctx, got.FailedJobIDs...); err != nil || n != 1 {
			t.Fatalf("retry A: %d, %v", n, err)
		}
		work("a")
		check("A retried and failed again, B and C not run", 3, 1, false, 0)
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE queue IN ('b', 'c')"); n != 2 {
			t.Fatalf("%d of B and C still queued, want 2", n)
		}
		work("b")
		check("B succeeded, C not run", 2, 1, false, 0)
		work("c")
		check("C succeeded", 1, 1, true, 1)
	})
}
