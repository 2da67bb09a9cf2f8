package worker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/failed"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/worker"
)

// A worker keeps the error of each failed attempt beside the job: the
// third attempt of a job that failed twice sees both errors, in order;
// its success deletes them; a job that runs out of tries takes its
// earlier errors to failed_jobs.
func TestWorkerKeepsErrorHistory(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		if _, err := q.Push(bg, dbqueue.NewJob{Name: "flaky"}); err != nil {
			t.Fatal(err)
		}
		doomed, err := q.Push(bg, dbqueue.NewJob{Name: "doomed", Queue: "doomed"})
		if err != nil {
			t.Fatal(err)
		}
		var seen []dbqueue.AttemptError
		w, _ := newWorker(t, q, worker.Options{Tries: 3, Backoff: []time.Duration{0}, StopWhenEmpty: true, Queues: []string{"default", "doomed"}})
		w.Handle("flaky", func(ctx context.Context, job *dbqueue.Job) error {
			if job.Attempts < 3 {
				return fmt.Errorf("attempt %d failed", job.Attempts)
			}
			info, err := q.Job(ctx, job.ID)
			if err != nil {
				return err
			}
			seen = info.Errors
			return nil
		})
		w.Handle("doomed", func(ctx context.Context, job *dbqueue.Job) error {
			return fmt.Errorf("doomed attempt %d", job.Attempts)
		})
		if err := runUntil(t, w, time.Minute); err != nil {
			t.Fatal(err)
		}
		if len(seen) != 2 || seen[0].Error != "attempt 1 failed" || seen[1].Error != "attempt 2 failed" || seen[1].Attempt != 2 {
			t.Fatalf("the third attempt saw history %+v, want attempts 1 and 2 in order", seen)
		}
		store, err := failed.New(q)
		if err != nil {
			t.Fatal(err)
		}
		list, err := store.List(bg, failed.Filter{Queue: "doomed"})
		if err != nil || len(list) != 1 {
			t.Fatalf("failed jobs of doomed: %v, %v", list, err)
		}
		fj, err := store.Find(bg, list[0].UUID)
		if err != nil {
			t.Fatal(err)
		}
		if len(fj.Errors) != 2 || fj.Errors[0].Error != "doomed attempt 1" || fj.Exception != "doomed attempt 3" {
			t.Fatalf("failed job %d: errors %+v, exception %q", doomed, fj.Errors, fj.Exception)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM dbqueue_job_errors WHERE job_id IS NOT NULL"); n != 0 {
			t.Fatalf("%d history rows left for jobs that are gone", n)
		}
	})
}
