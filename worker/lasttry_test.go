package worker_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/worker"
)

// onlyResult runs w once and returns its one result.
func onlyResult(t *testing.T, w *worker.Worker) worker.Result {
	t.Helper()
	res := runOnce(t, w)
	if len(res) != 1 {
		t.Fatalf("RunOnce worked %d jobs, want 1: %+v", len(res), res)
	}
	return res[0]
}

// wantMaxAttempts checks that r failed the job as Laravel fails a job
// reserved past its tries after a release: ErrMaxAttempts, not
// ErrAbandoned, and the job in failed_jobs.
func wantMaxAttempts(t *testing.T, db *dbtest.DB, r worker.Result) {
	t.Helper()
	if r.Outcome != worker.OutcomeFailed || !errors.Is(r.Err, worker.ErrMaxAttempts) || errors.Is(r.Err, worker.ErrAbandoned) {
		t.Fatalf("claim past the tries after a release: outcome %v, error %v; want failed with ErrMaxAttempts, not ErrAbandoned", r.Outcome, r.Err)
	}
	if n := db.Count(t, "SELECT COUNT(*) FROM failed_jobs"); n != 1 {
		t.Fatalf("%d rows in failed_jobs, want 1", n)
	}
	if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 0 {
		t.Fatalf("%d rows left in jobs, want 0", n)
	}
}

// A job its handler releases on its last try comes back with its attempts
// past its tries. That is no abandoned attempt: at its next claim it is
// failed as attempted too many times, without running again (Laravel's
// MaxAttemptsExceededException), on the default one try and on more.
func TestReleaseOnLastTryFailsAtTheNextClaim(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		for _, tries := range []int{0, 3} { // 0: the default, one try
			q := db.Queue(t)
			var runs atomic.Int64
			w, _ := newWorker(t, q, worker.Options{Tries: tries})
			w.Handle("again", func(context.Context, *dbqueue.Job) error {
				runs.Add(1)
				return worker.ReleaseAfter(0)
			})
			pushN(t, q, 1, dbqueue.NewJob{Name: "again"})
			want := int64(max(tries, 1))
			for i := range want {
				if r := onlyResult(t, w); r.Outcome != worker.OutcomeReleased || r.Job.Attempts != int(i+1) {
					t.Fatalf("tries %d, run %d: outcome %v at attempt %d, want released at attempt %d", tries, i+1, r.Outcome, r.Job.Attempts, i+1)
				}
			}
			wantMaxAttempts(t, db, onlyResult(t, w))
			if runs.Load() != want {
				t.Fatalf("tries %d: the handler ran %d times, want %d", tries, runs.Load(), want)
			}
			db.Exec(t, "DELETE FROM failed_jobs")
		}
	})
}

// The same for a transactional handler, whose release is written in its
// own transaction (ReleaseTx).
func TestTransactionalReleaseOnLastTryFailsAtTheNextClaim(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		var runs atomic.Int64
		w, _ := newWorker(t, q, worker.Options{})
		worker.HandleTx(w, "again", func(context.Context, *sql.Tx, *dbqueue.Job) error {
			runs.Add(1)
			return worker.ReleaseAfter(0)
		})
		pushN(t, q, 1, dbqueue.NewJob{Name: "again"})
		if r := onlyResult(t, w); r.Outcome != worker.OutcomeReleased {
			t.Fatalf("first run: outcome %v (%v), want released", r.Outcome, r.Err)
		}
		wantMaxAttempts(t, db, onlyResult(t, w))
		if runs.Load() != 1 {
			t.Fatalf("the handler ran %d times, want 1", runs.Load())
		}
	})
}

// abandon claims the queue's one job as a worker that then dies would,
// and lets its reservation run out (moved back in time).
func abandon(t *testing.T, db *dbtest.DB, q *dbqueue.Queue) *dbqueue.Job {
	t.Helper()
	jobs, err := q.Reserve(bg, 1)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("reserve: %d jobs, %v", len(jobs), err)
	}
	db.Exec(t, "UPDATE jobs SET reserved_at = reserved_at - 1000 WHERE id = ?", jobs[0].ID)
	return jobs[0]
}

// A job whose worker died on its last try still gets AbandonedRetries more
// runs, also after a worker gave the abandoned reservation back (it was
// stopping) or the handler snoozed it; but a release on such a run ends it
// at the next claim.
func TestAbandonedAttemptStillRunsAgain(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		var runs atomic.Int64
		release := atomic.Bool{}
		w, _ := newWorker(t, q, worker.Options{})
		w.Handle("job", func(context.Context, *dbqueue.Job) error {
			runs.Add(1)
			if release.Load() {
				return worker.ReleaseAfter(0)
			}
			return worker.Snooze(0)
		})
		pushN(t, q, 1, dbqueue.NewJob{Name: "job"})
		abandon(t, db, q)
		// Taken over past its one try, then given back by a stopping
		// worker: the attempt it gives back is the abandoned one's.
		back, err := q.Reserve(bg, 1)
		if err != nil || len(back) != 1 || back[0].Attempts != 2 {
			t.Fatalf("reclaim: %+v, %v; want the job at attempt 2", back, err)
		}
		if err := q.Snooze(bg, back[0], 0); err != nil {
			t.Fatal(err)
		}
		r := onlyResult(t, w)
		if r.Outcome != worker.OutcomeSnoozed || r.Job.Attempts != 2 || runs.Load() != 1 {
			t.Fatalf("after an abandoned attempt: outcome %v (%v) at attempt %d, %d runs; want it run (and snoozed) at attempt 2",
				r.Outcome, r.Err, r.Job.Attempts, runs.Load())
		}
		release.Store(true)
		if r := onlyResult(t, w); r.Outcome != worker.OutcomeReleased || r.Job.Attempts != 2 || runs.Load() != 2 {
			t.Fatalf("after a snooze of the abandoned attempt's run: outcome %v (%v) at attempt %d, %d runs; want it run (and released) at attempt 2",
				r.Outcome, r.Err, r.Job.Attempts, runs.Load())
		}
		wantMaxAttempts(t, db, onlyResult(t, w))
		if runs.Load() != 2 {
			t.Fatalf("the handler ran %d times, want 2", runs.Load())
		}
	})
}

// A Laravel worker shares the table: its release on a last try re-inserts
// the row with its attempts and no token, and a dbqueue worker fails it
// without running it, as the PHP worker would; a reservation a PHP worker
// abandoned counts as abandoned.
func TestLaravelRowsPastTheirTries(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		var ran atomic.Int64
		w, _ := newWorker(t, q, worker.Options{})
		w.Handle(`App\Jobs\Sync`, func(_ context.Context, job *dbqueue.Job) error {
			ran.Store(int64(job.Attempts))
			return nil
		})
		payload := `{"uuid":"7d3c2a1e-0000-4000-8000-00000000000%d","displayName":"App\\Jobs\\Sync","job":"App\\Jobs\\Sync","maxTries":1,"data":{}}`
		// Released by PHP on its one try: attempts 1, unreserved.
		db.Exec(t, "INSERT INTO jobs (queue, payload, attempts, reserved_at, available_at, created_at) VALUES ('default', ?, 1, NULL, "+
			db.Now()+", "+db.Now()+")", strings.Replace(payload, "%d", "1", 1))
		wantMaxAttempts(t, db, onlyResult(t, w))
		if ran.Load() != 0 {
			t.Fatalf("the released row ran at attempt %d", ran.Load())
		}
		// Reserved by a PHP worker that died: attempts 1, reserved long ago.
		db.Exec(t, "INSERT INTO jobs (queue, payload, attempts, reserved_at, available_at, created_at) VALUES ('default', ?, 1, "+
			db.Now()+" - 1000, "+db.Now()+" - 1000, "+db.Now()+" - 1000)", strings.Replace(payload, "%d", "2", 1))
		if r := onlyResult(t, w); r.Outcome != worker.OutcomeDone || ran.Load() != 2 {
			t.Fatalf("the abandoned row: outcome %v (%v), ran at attempt %d; want done at attempt 2", r.Outcome, r.Err, ran.Load())
		}
	})
}
