package dbqueue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/failed"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/worker"
)

// failAll runs every ready job once with a handler that fails, so jobs
// pushed with MaxTries 1 move to failed_jobs.
func failAll(t *testing.T, q *dbqueue.Queue) {
	t.Helper()
	w, err := worker.New(q, worker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w.Handle("sync", func(context.Context, *dbqueue.Job) error { return errors.New("upstream down") })
	if _, err := w.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
}

func retryFailed(t *testing.T, db *dbtest.DB, q *dbqueue.Queue) {
	t.Helper()
	var uuid string
	if err := db.SQL.QueryRow("SELECT uuid FROM failed_jobs").Scan(&uuid); err != nil {
		t.Fatalf("read the failed job: %v", err)
	}
	store, err := failed.New(q)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := store.Retry(ctx, uuid); err != nil || n != 1 {
		t.Fatalf("retry %s: %d, %v", uuid, n, err)
	}
}

func onlyJob(t *testing.T, db *dbtest.DB) int64 {
	t.Helper()
	if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 1 {
		t.Fatalf("%d jobs queued, want 1", n)
	}
	var id int64
	if err := db.SQL.QueryRow("SELECT id FROM jobs").Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// An UntilFinished unique job fails for good, sits in failed_jobs (where a
// PruneUnique clears its ended lock), and an operator retries it. The
// retried job holds the key again: the next push of the key is told it is
// a duplicate of the retried job, and no copy is queued. Once the retried
// job is gone, the key is free again.
func TestUniqueLockFollowsRetriedJob(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		job := dbqueue.NewJob{Name: "sync", Data: report{Account: 7}, MaxTries: 1}
		u := dbqueue.Unique{Key: "account-7", For: time.Hour}
		first, _ := pushUnique(t, q, job, u)
		failAll(t, q)
		if n := db.Count(t, "SELECT COUNT(*) FROM failed_jobs"); n != 1 {
			t.Fatalf("%d failed jobs, want the unique one", n)
		}
		if _, err := q.PruneUnique(ctx); err != nil {
			t.Fatal(err)
		}
		retryFailed(t, db, q)
		retried := onlyJob(t, db)
		if retried == first {
			t.Fatalf("retried job kept id %d", first)
		}
		id, dup := pushUnique(t, q, job, u)
		if !dup || id != retried {
			t.Fatalf("push after the retry: id %d, duplicate %v; want duplicate of the retried job %d", id, dup, retried)
		}
		onlyJob(t, db)

		jobs := reserve(t, q, 10)
		if len(jobs) != 1 || jobs[0].ID != retried {
			t.Fatalf("reserved %v, want the retried job %d", jobs, retried)
		}
		if err := q.Delete(ctx, jobs[0]); err != nil {
			t.Fatal(err)
		}
		if id, dup := pushUnique(t, q, job, u); dup {
			t.Fatalf("push after the retried job finished: duplicate of %d, want a new job", id)
		}
	})
}

// While the failed job sat in failed_jobs a new push of its key rightly
// queued a job and took the lock. Retrying the failed job then puts it
// back without the lock: the lock still names the newer job, pushes are
// told that one holds the key, and no two jobs hold it.
func TestRetryLeavesLockTakenMeanwhile(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		job := dbqueue.NewJob{Name: "sync", Data: report{Account: 8}, MaxTries: 1}
		u := dbqueue.Unique{Key: "account-8"}
		pushUnique(t, q, job, u)
		failAll(t, q)
		newer, dup := pushUnique(t, q, job, u)
		if dup {
			t.Fatalf("push while the first sits in failed_jobs: duplicate of %d, want a new job", newer)
		}
		retryFailed(t, db, q)
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 2 {
			t.Fatalf("%d jobs queued, want the newer one and the retried one", n)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM failed_jobs"); n != 0 {
			t.Fatalf("%d failed jobs left, want 0", n)
		}
		id, dup := pushUnique(t, q, job, u)
		if !dup || id != newer {
			t.Fatalf("push after the retry: id %d, duplicate %v; want duplicate of the newer job %d", id, dup, newer)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM dbqueue_unique"); n != 1 {
			t.Fatalf("%d lock rows, want 1", n)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM dbqueue_unique WHERE job_id = ?", newer); n != 1 {
			t.Fatalf("the lock no longer names the newer job %d", newer)
		}
	})
}

// A failed job whose payload another producer wrote with a "uniqueLock"
// dbqueue could not have written (not a lock key, a negative length) is
// still retried, as a plain job: no lock is taken for it.
func TestRetryIgnoresForeignUniqueLock(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		if _, err := q.Push(ctx, dbqueue.NewJob{Name: "sync", MaxTries: 1}); err != nil {
			t.Fatal(err)
		}
		failAll(t, q)
		db.Exec(t, `UPDATE failed_jobs SET payload = REPLACE(payload, '"data":', '"uniqueLock":{"key":"../x","for":-5},"data":')`)
		if n := db.Count(t, "SELECT COUNT(*) FROM failed_jobs WHERE payload LIKE '%uniqueLock%'"); n != 1 {
			t.Fatalf("%d failed payloads carry the foreign lock, want 1", n)
		}
		retryFailed(t, db, q)
		onlyJob(t, db)
		if n := db.Count(t, "SELECT COUNT(*) FROM dbqueue_unique"); n != 0 {
			t.Fatalf("%d lock rows after retrying a job with a foreign lock, want 0", n)
		}
	})
}
