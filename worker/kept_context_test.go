package worker_test

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"
	"weak"

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

// A slot's timer is left armed from job to job and re-armed only when a
// job's deadline comes before it would fire. A job that runs past its
// timeout must still be cancelled at its own deadline, whether the quick
// jobs before it left the timer armed later (a longer timeout) or earlier
// (the same timeout, started before it) than that deadline.
func TestTimeoutAfterQuickJobsOnTheSameSlot(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t, dbqueue.SQLite)
	for _, quickTimeout := range []time.Duration{time.Minute, 2 * time.Second} {
		t.Run(quickTimeout.String(), func(t *testing.T) {
			q := db.Queue(t)
			pushN(t, q, 40, dbqueue.NewJob{Name: "quick"})
			pushN(t, q, 1, dbqueue.NewJob{Name: "slow"})
			w, _ := newWorker(t, q, worker.Options{Concurrency: 1, StopWhenEmpty: true, Timeout: time.Minute, Tries: 1})
			w.Handle("quick", func(context.Context, *dbqueue.Job) error { return nil }, worker.WithTimeout(quickTimeout))
			ended := make(chan error, 1)
			var took time.Duration
			w.Handle("slow", func(ctx context.Context, _ *dbqueue.Job) error {
				start := time.Now()
				<-ctx.Done()
				took = time.Since(start)
				ended <- ctx.Err()
				return ctx.Err()
			}, worker.WithTimeout(2*time.Second))
			if err := runUntil(t, w, 30*time.Second); err != nil {
				t.Fatal(err)
			}
			if err := <-ended; err != context.DeadlineExceeded {
				t.Fatalf("the slow job's context ended with %v, want DeadlineExceeded", err)
			}
			// Its deadline, not a later job's or an earlier one's: the
			// quick jobs ran in well under a second.
			if took < time.Second || took > 10*time.Second {
				t.Fatalf("the slow job was cancelled after %v, want about its 2s timeout", took)
			}
		})
	}
}

// The worker keeps no finished job reachable. Jobs are allocated a claim
// at a time and attempts in chunks, so one stray reference (an attempt
// that kept its job) keeps whole claims alive: over a 100-runner burn-down
// that was 44 MiB of heap instead of 7.
func TestWorkerLetsGoOfFinishedJobs(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		const n = 300
		pushN(t, q, n, dbqueue.NewJob{Name: "drop"})
		var (
			mu   sync.Mutex
			kept []weak.Pointer[dbqueue.Job]
		)
		ran := make(chan struct{}, n)
		w, _ := newWorker(t, q, worker.Options{Concurrency: 8, Prefetch: 100})
		w.Handle("drop", func(_ context.Context, job *dbqueue.Job) error {
			mu.Lock()
			kept = append(kept, weak.Make(job))
			mu.Unlock()
			ran <- struct{}{}
			return nil
		})
		ctx, cancel := context.WithCancel(bg)
		stopped := make(chan error, 1)
		go func() { stopped <- w.Run(ctx) }()
		defer func() {
			cancel()
			if err := <-stopped; err != nil {
				t.Error(err)
			}
		}()
		for range n {
			<-ran
		}
		// The deletes are batched: wait until the last one is written.
		dbtest.WaitFor(t, 20*time.Second, "the batched deletes written", func() bool { return db.Count(t, "SELECT COUNT(*) FROM jobs") == 0 })
		// The batcher lets go of a batch just after its statement returns,
		// so look again until nothing is reachable or a few seconds pass;
		// a stray reference holds its jobs for good.
		live := 0
		if !dbtest.Until(5*time.Second, func() bool {
			runtime.GC()
			mu.Lock()
			defer mu.Unlock()
			live = 0
			for _, p := range kept {
				if p.Value() != nil {
					live++
				}
			}
			return live == 0
		}) {
			t.Fatalf("%d of %d finished jobs are still reachable while the worker runs on", live, n)
		}
	})
}
