package worker_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/failed"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/worker"
)

// recorder collects what handlers and batch callbacks saw.
type recorder struct {
	mu                   sync.Mutex
	ran                  []int
	then, catch, finally atomic.Int64
	last                 *dbqueue.Batch
	caught               *dbqueue.Job
	cause                error
}

func (r *recorder) record(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ran = append(r.ran, n)
}

func (r *recorder) runs() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ran)
}

func (r *recorder) callbacks() worker.BatchCallbacks {
	keep := func(b *dbqueue.Batch) {
		r.mu.Lock()
		r.last = b
		r.mu.Unlock()
	}
	return worker.BatchCallbacks{
		Then: func(_ context.Context, b *dbqueue.Batch) { r.then.Add(1); keep(b) },
		Catch: func(_ context.Context, b *dbqueue.Batch, job *dbqueue.Job, cause error) {
			r.catch.Add(1)
			r.mu.Lock()
			r.caught, r.cause = job, cause
			r.mu.Unlock()
			keep(b)
		},
		Finally: func(_ context.Context, b *dbqueue.Batch) { r.finally.Add(1); keep(b) },
	}
}

func (r *recorder) counts() string {
	return fmt.Sprintf("then %d, catch %d, finally %d", r.then.Load(), r.catch.Load(), r.finally.Load())
}

// sequential is a worker that runs one job at a time, in claim order.
var sequential = worker.Options{Concurrency: 1, Prefetch: -1, Claims: 1, StopWhenEmpty: true}

func numbered(name string, n int, o dbqueue.NewJob) []dbqueue.NewJob {
	jobs := make([]dbqueue.NewJob, n)
	for i := range jobs {
		j := o
		j.Name, j.Data = name, i
		jobs[i] = j
	}
	return jobs
}

func TestChainRunsInOrder(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		jobs := numbered("link", 6, dbqueue.NewJob{})
		for i := range jobs {
			jobs[i].Queue = []string{"a", "b"}[i%2] // links may change queues
		}
		if _, err := q.PushChain(bg, jobs...); err != nil {
			t.Fatal(err)
		}
		// Jobs that are not in the chain, pushed after it, run beside it
		// on a worker with room for many at once: the chain still runs in
		// order, one link at a time.
		pushN(t, q, 20, dbqueue.NewJob{Name: "other", Queue: "a"})
		rec := &recorder{}
		var running, overlap atomic.Int64
		o := worker.Options{Queues: []string{"a", "b"}, Concurrency: 8, StopWhenEmpty: true}
		w, _ := newWorker(t, q, o)
		worker.HandleJSON(w, "link", func(_ context.Context, _ *dbqueue.Job, n int) error {
			if running.Add(1) > 1 {
				overlap.Add(1)
			}
			defer running.Add(-1)
			rec.record(n)
			return nil
		})
		w.Handle("other", func(context.Context, *dbqueue.Job) error { return nil })
		if err := runUntil(t, w, 60*time.Second); err != nil {
			t.Fatal(err)
		}
		if got := rec.runs(); fmt.Sprint(got) != "[0 1 2 3 4 5]" || overlap.Load() != 0 {
			t.Fatalf("links ran %v (%d overlapping), want [0 1 2 3 4 5] one at a time", got, overlap.Load())
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 0 {
			t.Fatalf("%d jobs left", n)
		}
	})
}

// A failing link stops its chain; the rest ride with it into failed_jobs,
// and retrying it resumes the chain where it stopped.
func TestChainStopsAtAFailureAndResumesOnRetry(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		if _, err := q.PushChain(bg, numbered("link", 4, dbqueue.NewJob{})...); err != nil {
			t.Fatal(err)
		}
		rec := &recorder{}
		var broken atomic.Bool
		broken.Store(true)
		handle := func(w *worker.Worker) {
			worker.HandleJSON(w, "link", func(_ context.Context, _ *dbqueue.Job, n int) error {
				rec.record(n)
				if n == 1 && broken.Load() {
					return errors.New("link 1 broke")
				}
				return nil
			})
		}
		w, _ := newWorker(t, q, sequential)
		handle(w)
		if err := runUntil(t, w, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		if got := rec.runs(); fmt.Sprint(got) != "[0 1]" {
			t.Fatalf("ran %v, want the chain to stop at link 1", got)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 0 {
			t.Fatalf("%d jobs left after the chain stopped", n)
		}
		store, err := failed.New(q)
		if err != nil {
			t.Fatal(err)
		}
		list, err := store.List(bg, failed.Filter{})
		if err != nil || len(list) != 1 {
			t.Fatalf("failed jobs: %v, %v", list, err)
		}
		broken.Store(false)
		if _, err := store.RetryAll(bg); err != nil {
			t.Fatal(err)
		}
		w, _ = newWorker(t, q, sequential)
		handle(w)
		if err := runUntil(t, w, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		if got := rec.runs(); fmt.Sprint(got) != "[0 1 1 2 3]" {
			t.Fatalf("ran %v, want the retried link 1 and then the rest of its chain", got)
		}
	})
}

// Two workers share a batch: each job is counted once, and then and
// finally fire once between them.
func TestBatchCallbacksFireOnceAcrossWorkers(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		b, err := q.Batch(bg, dbqueue.BatchOptions{Name: "import"}, numbered("row", 60, dbqueue.NewJob{})...)
		if err != nil {
			t.Fatal(err)
		}
		rec := &recorder{}
		var ranBy [2]atomic.Int64
		var workers sync.WaitGroup
		errs := make(chan error, 2)
		var logs [2]*syncBuffer
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("worker 1:\n%s\nworker 2:\n%s", logs[0], logs[1])
			}
		})
		for i := range 2 {
			w, l := newWorker(t, q, worker.Options{Concurrency: 4, Prefetch: 2, StopWhenEmpty: true})
			logs[i] = l
			worker.HandleJSON(w, "row", func(_ context.Context, job *dbqueue.Job, n int) error {
				ranBy[i].Add(1)
				rec.record(n)
				return nil
			})
			w.OnBatch("import", rec.callbacks())
			workers.Add(1)
			go func() {
				defer workers.Done()
				ctx, cancel := context.WithTimeout(bg, 60*time.Second)
				defer cancel()
				errs <- w.Run(ctx)
			}()
		}
		workers.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if got := rec.runs(); len(got) != 60 {
			t.Fatalf("%d runs, want 60", len(got))
		}
		if rec.then.Load() != 1 || rec.finally.Load() != 1 || rec.catch.Load() != 0 {
			t.Fatalf("callbacks: %s; want then and finally once", rec.counts())
		}
		got, err := q.FindBatch(bg, b.ID)
		if err != nil || got.PendingJobs != 0 || got.FailedJobs != 0 || !got.Finished() || got.Cancelled() || got.Progress() != 100 {
			t.Fatalf("batch after its jobs: %+v, %v", got, err)
		}
		if rec.last.PendingJobs != 0 || rec.last.ID != b.ID || !rec.last.Finished() {
			t.Fatalf("callbacks saw %+v", rec.last)
		}
		t.Logf("worker 1 ran %d, worker 2 ran %d", ranBy[0].Load(), ranBy[1].Load())
	})
}

// Without AllowFailures the first failure cancels the batch and fires
// catch; the jobs still waiting are discarded without running, and
// finally fires when the last is discarded. Then never fires.
func TestBatchFirstFailureCancels(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		b, err := q.Batch(bg, dbqueue.BatchOptions{Name: "strict"}, numbered("row", 8, dbqueue.NewJob{})...)
		if err != nil {
			t.Fatal(err)
		}
		rec := &recorder{}
		w, _ := newWorker(t, q, sequential)
		worker.HandleJSON(w, "row", func(_ context.Context, _ *dbqueue.Job, n int) error {
			rec.record(n)
			if n == 2 {
				return errors.New("row 2 is bad")
			}
			return nil
		})
		w.OnBatch("strict", rec.callbacks())
		if err := runUntil(t, w, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		if got := rec.runs(); fmt.Sprint(got) != "[0 1 2]" {
			t.Fatalf("ran %v: the jobs after the failure must be discarded", got)
		}
		if rec.catch.Load() != 1 || rec.then.Load() != 0 || rec.finally.Load() != 1 {
			t.Fatalf("callbacks: %s; want catch and finally once, no then", rec.counts())
		}
		if rec.caught == nil || string(rec.caught.Payload.Data) != "2" || rec.cause == nil || rec.cause.Error() != "row 2 is bad" {
			t.Fatalf("catch saw job %v, cause %v", rec.caught, rec.cause)
		}
		got, _ := q.FindBatch(bg, b.ID)
		if !got.Cancelled() || got.PendingJobs != 1 || got.FailedJobs != 1 || !got.Done() ||
			fmt.Sprint(got.FailedJobIDs) != fmt.Sprint([]string{rec.caught.Payload.UUID}) {
			t.Fatalf("batch after the failure: %+v", got)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 0 {
			t.Fatalf("%d jobs left", n)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM failed_jobs"); n != 1 {
			t.Fatalf("%d failed jobs, want the one that failed (discarded jobs are not failures)", n)
		}
	})
}

// With AllowFailures every job runs, catch fires at the first failure
// only, and finally once all have run; the batch is not finished while
// failed jobs stay pending, and it finishes (then) when they are retried
// with success, as in Laravel.
func TestBatchAllowFailures(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		b, err := q.Batch(bg, dbqueue.BatchOptions{Name: "lenient", AllowFailures: true}, numbered("row", 6, dbqueue.NewJob{})...)
		if err != nil {
			t.Fatal(err)
		}
		rec := &recorder{}
		var broken atomic.Bool
		broken.Store(true)
		run := func() {
			t.Helper()
			w, _ := newWorker(t, q, sequential)
			worker.HandleJSON(w, "row", func(_ context.Context, _ *dbqueue.Job, n int) error {
				rec.record(n)
				if (n == 1 || n == 4) && broken.Load() {
					return fmt.Errorf("row %d is bad", n)
				}
				return nil
			})
			w.OnBatch("lenient", rec.callbacks())
			if err := runUntil(t, w, 30*time.Second); err != nil {
				t.Fatal(err)
			}
		}
		run()
		if got := rec.runs(); len(got) != 6 {
			t.Fatalf("ran %v, want all 6", got)
		}
		if rec.catch.Load() != 1 || rec.then.Load() != 0 || rec.finally.Load() != 1 {
			t.Fatalf("callbacks: %s; want catch once (first failure), finally once, no then", rec.counts())
		}
		got, _ := q.FindBatch(bg, b.ID)
		if got.Cancelled() || got.Finished() || got.PendingJobs != 2 || got.FailedJobs != 2 || len(got.FailedJobIDs) != 2 || got.Progress() != 67 {
			t.Fatalf("batch with two failures allowed: %+v", got)
		}

		store, _ := failed.New(q)
		broken.Store(false)
		if n, err := store.RetryAll(bg); err != nil || n != 2 {
			t.Fatalf("retry: %d, %v", n, err)
		}
		run()
		if rec.then.Load() != 1 || rec.catch.Load() != 1 || rec.finally.Load() != 1 {
			t.Fatalf("after the retries succeeded: %s; want then once more, nothing else", rec.counts())
		}
		got, _ = q.FindBatch(bg, b.ID)
		if !got.Finished() || got.PendingJobs != 0 || got.FailedJobs != 2 || len(got.FailedJobIDs) != 0 {
			t.Fatalf("batch after its retries: %+v", got)
		}
	})
}

// Jobs of a batch cancelled before they start are discarded without
// running, counted as processed; finally fires, then does not.
func TestCancelledBatchJobsAreDiscarded(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		b, _ := q.Batch(bg, dbqueue.BatchOptions{Name: "c"}, numbered("row", 5, dbqueue.NewJob{})...)
		other := pushN(t, q, 1, dbqueue.NewJob{Name: "row", Data: 99})
		if err := q.CancelBatch(bg, b.ID); err != nil {
			t.Fatal(err)
		}
		rec := &recorder{}
		var processed atomic.Int64
		o := sequential
		o.Events.JobProcessed = func(context.Context, *dbqueue.Job, time.Duration) { processed.Add(1) }
		w, _ := newWorker(t, q, o)
		worker.HandleJSON(w, "row", func(_ context.Context, _ *dbqueue.Job, n int) error { rec.record(n); return nil })
		w.OnBatch("c", rec.callbacks())
		if err := runUntil(t, w, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		if got := rec.runs(); fmt.Sprint(got) != "[99]" || processed.Load() != 6 {
			t.Fatalf("ran %v (%d processed events); want only job %d, outside the batch", got, processed.Load(), other[0])
		}
		if rec.then.Load() != 0 || rec.catch.Load() != 0 || rec.finally.Load() != 1 {
			t.Fatalf("callbacks: %s; want finally alone", rec.counts())
		}
		got, _ := q.FindBatch(bg, b.ID)
		if got.PendingJobs != 0 || got.FailedJobs != 0 || got.ProcessedJobs() != 5 {
			t.Fatalf("cancelled batch after its jobs were discarded: %+v", got)
		}
	})
}
