package worker_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/worker"
)

// RunOnce runs each ready job once, writes its outcome as Run does, and
// reports it; a job it releases with no delay is not run again by it.
func TestRunOnceOutcomes(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		w, _ := newWorker(t, q, worker.Options{Tries: 3, Concurrency: 2, Queues: []string{"default", "paused"}})
		var again atomic.Int64
		w.Handle("ok", func(ctx context.Context, job *dbqueue.Job) error { return nil })
		w.Handle("discard", func(ctx context.Context, job *dbqueue.Job) error { return worker.Discard() })
		w.Handle("again", func(ctx context.Context, job *dbqueue.Job) error {
			again.Add(1)
			return errors.New("flaky") // tries left, no backoff: ready again at once
		})
		w.Handle("later", func(ctx context.Context, job *dbqueue.Job) error { return worker.ReleaseAfter(time.Hour) })
		w.Handle("fail", func(ctx context.Context, job *dbqueue.Job) error { return worker.FailNow(errors.New("card declined")) })
		names := []string{"ok", "discard", "again", "later", "fail"}
		for _, name := range names {
			pushN(t, q, 1, dbqueue.NewJob{Name: name})
		}
		if _, err := q.Push(bg, dbqueue.NewJob{Name: "ok", Queue: "paused"}); err != nil {
			t.Fatal(err)
		}
		if err := q.Pause(bg, "paused"); err != nil {
			t.Fatal(err)
		}
		res := runOnce(t, w)
		want := []worker.Outcome{worker.OutcomeDone, worker.OutcomeDiscarded, worker.OutcomeReleased, worker.OutcomeReleased, worker.OutcomeFailed}
		if len(res) != len(want) {
			t.Fatalf("%d results, want %d (the paused queue's job not among them): %+v", len(res), len(want), res)
		}
		for i, r := range res {
			if r.Job.Name() != names[i] || r.Outcome != want[i] {
				t.Errorf("result %d: %s %s, want %s %s", i, r.Job.Name(), r.Outcome, names[i], want[i])
			}
		}
		if res[0].Err != nil || res[2].Err == nil || res[2].Err.Error() != "flaky" || res[3].Delay != time.Hour || res[4].Err.Error() != "card declined" {
			t.Errorf("errors and delays: %+v", res)
		}
		if again.Load() != 1 {
			t.Errorf("the job released with no delay ran %d times in one RunOnce, want 1", again.Load())
		}
		// Written as Run writes them: the two released jobs wait, the
		// paused one is untouched, one failed_jobs row.
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE attempts = 1 AND reserved_at IS NULL"); n != 2 {
			t.Errorf("%d released jobs in jobs, want 2", n)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE attempts = 0 AND queue = 'paused'"); n != 1 {
			t.Errorf("the paused queue's job was touched")
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM failed_jobs"); n != 1 {
			t.Errorf("%d failed jobs, want 1", n)
		}
		// The flaky job is ready again: the next RunOnce runs it.
		if res := runOnce(t, w); len(res) != 1 || res[0].Job.Attempts != 2 {
			t.Fatalf("second RunOnce: %+v, want the flaky job on attempt 2", res)
		}
	})
}

func TestRunOnceCancelledGivesBack(t *testing.T) {
	q := dbtest.New(t, dbqueue.SQLite).Queue(t)
	w, _ := newWorker(t, q, worker.Options{})
	ctx, cancel := context.WithCancel(bg)
	w.Handle("wait", func(hctx context.Context, job *dbqueue.Job) error {
		cancel()
		<-hctx.Done()
		return hctx.Err()
	})
	pushN(t, q, 1, dbqueue.NewJob{Name: "wait"})
	res, err := w.RunOnce(ctx)
	if err != nil || len(res) != 1 || res[0].Outcome != worker.OutcomeGivenBack {
		t.Fatalf("RunOnce cancelled mid-job: %+v, %v; want the job given back", res, err)
	}
	jobs, err := q.Reserve(bg, 1)
	if err != nil || len(jobs) != 1 || jobs[0].Attempts != 1 {
		t.Fatalf("given-back job: %v, %v; want it ready with its attempt uncounted", jobs, err)
	}
}
