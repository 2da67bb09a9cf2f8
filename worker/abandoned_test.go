package worker_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/worker"
)

// defaultsRetryAfter is a retry_after the default Timeout (60s) fits under.
const defaultsRetryAfter = 90

// killMidJob starts a worker process on the library's defaults, waits
// until it has started the job for the n-th time (the ledger has n runs),
// kills it with SIGKILL, and lets the job's reservation run out (moved
// back in time rather than waited for).
func killMidJob(t *testing.T, db *dbtest.DB, id int64, n int) {
	t.Helper()
	child := startChild(t, db, "defaults", defaultsRetryAfter, 2)
	dbtest.WaitFor(t, 60*time.Second, fmt.Sprintf("the worker process starts run %d of the job", n), func() bool {
		return db.Count(t, "SELECT COUNT(*) FROM ledger WHERE job_id = ?", id) >= n
	})
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	db.Exec(t, "UPDATE jobs SET reserved_at = reserved_at - 1000 WHERE id = ?", id)
}

// A deploy SIGKILLs a worker running on the defaults (one try, as Laravel)
// in the middle of a job. The job is not the worker's fault: when it is
// reclaimed, it runs again and succeeds, instead of going to failed_jobs
// as "attempted too many times" without running.
func TestJobOfAKilledWorkerRunsAgainOnTheDefaults(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		createLedger(t, db)
		q := db.Queue(t, dbqueue.WithRetryAfter(defaultsRetryAfter*time.Second))
		id := pushN(t, q, 1, dbqueue.NewJob{Name: "hang"})[0]
		killMidJob(t, db, id, 1)

		var attempt atomic.Int64
		w, _ := newWorker(t, q, worker.Options{StopWhenEmpty: true})
		w.Handle("hang", func(_ context.Context, job *dbqueue.Job) error {
			attempt.Store(int64(job.Attempts))
			return nil
		})
		if err := runUntil(t, w, 60*time.Second); err != nil {
			t.Fatal(err)
		}
		if attempt.Load() != 2 {
			t.Fatalf("the killed worker's job ran again on attempt %d, want 2", attempt.Load())
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs") + db.Count(t, "SELECT COUNT(*) FROM failed_jobs"); n != 0 {
			t.Fatalf("%d rows left in jobs and failed_jobs after the job succeeded", n)
		}
	})
}

// A job that kills its worker every time must still end: on the defaults
// it runs three times (its one try and two more after its worker died),
// then goes to failed_jobs saying what happened.
func TestJobThatKeepsKillingItsWorkerEnds(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		createLedger(t, db)
		q := db.Queue(t, dbqueue.WithRetryAfter(defaultsRetryAfter*time.Second))
		id := pushN(t, q, 1, dbqueue.NewJob{Name: "hang"})[0]
		for n := 1; n <= 3; n++ {
			killMidJob(t, db, id, n)
		}
		var failed atomic.Int64
		w, _ := newWorker(t, q, worker.Options{StopWhenEmpty: true, Events: worker.Events{
			JobFailed: func(context.Context, *dbqueue.Job, error) { failed.Add(1) }}})
		w.Handle("hang", func(context.Context, *dbqueue.Job) error {
			t.Error("a job that killed its worker three times ran a fourth time")
			return nil
		})
		if err := runUntil(t, w, 60*time.Second); err != nil {
			t.Fatal(err)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM ledger WHERE job_id = ?", id); n != 3 {
			t.Errorf("the job ran %d times, want 3", n)
		}
		var exception string
		if err := db.SQL.QueryRow("SELECT exception FROM failed_jobs").Scan(&exception); err != nil {
			t.Fatalf("the job is not in failed_jobs: %v", err)
		}
		for _, want := range []string{"abandoned 3 times by workers that stopped while running it", "may be what kills them"} {
			if !strings.Contains(exception, want) {
				t.Errorf("failed_jobs.exception %q does not say %q", exception, want)
			}
		}
		if failed.Load() != 1 {
			t.Errorf("JobFailed fired %d times, want 1", failed.Load())
		}
	})
}
