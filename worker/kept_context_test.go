package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/worker"
)

// A slot allocates its jobs' contexts in chunks and a claim its Jobs, but
// none is ever reused: a handler that keeps its context and its job past
// its return must find the context ended and the job its own, however
// many jobs ran on the same goroutine after it.
func TestKeptContextsAndJobsStayTheirs(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		const n = 100 // several chunks of each
		pushN(t, q, n, dbqueue.NewJob{Name: "keep"})
		type kept struct {
			ctx context.Context
			job *dbqueue.Job
			id  int64
		}
		var all []kept // Concurrency 1: one goroutine appends
		w, _ := newWorker(t, q, worker.Options{Concurrency: 1, Prefetch: n, StopWhenEmpty: true, Timeout: time.Minute})
		w.Handle("keep", func(ctx context.Context, job *dbqueue.Job) error {
			if err := ctx.Err(); err != nil {
				t.Errorf("job %d started with its context ended: %v", job.ID, err)
			}
			all = append(all, kept{ctx, job, job.ID})
			return nil
		})
		if err := runUntil(t, w, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		if len(all) != n {
			t.Fatalf("ran %d jobs, want %d", len(all), n)
		}
		seen := map[context.Context]bool{}
		for _, k := range all {
			if k.ctx.Err() == nil {
				t.Fatalf("job %d's context is live again after it returned", k.id)
			}
			if seen[k.ctx] {
				t.Fatalf("job %d got a context another job had", k.id)
			}
			seen[k.ctx] = true
			if k.job.ID != k.id {
				t.Fatalf("the Job kept for %d now says %d", k.id, k.job.ID)
			}
		}
	})
}
