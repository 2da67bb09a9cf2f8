package dbqueue_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// reserveOne reserves the one job a test expects to be ready.
func reserveOne(t *testing.T, q *dbqueue.Queue) *dbqueue.Job {
	t.Helper()
	got := reserve(t, q, 1)
	if len(got) != 1 {
		t.Fatalf("reserved %d jobs, want 1", len(got))
	}
	return got[0]
}

// A user who runs a chain by hand — Reserve, do the work, Delete — gets
// each next link of the chain as the one before it is deleted, as a
// worker would run them; a second Delete of the same job is refused and
// pushes nothing.
func TestDeleteByHandRunsTheRestOfTheChain(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		if _, err := q.PushChain(ctx, dbqueue.NewJob{Name: "first"}, dbqueue.NewJob{Name: "second"}, dbqueue.NewJob{Name: "third"}); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"first", "second", "third"} {
			job := reserveOne(t, q)
			if job.Payload.DisplayName != want {
				t.Fatalf("reserved %q, want %q", job.Payload.DisplayName, want)
			}
			if err := q.Delete(ctx, job); err != nil {
				t.Fatalf("delete %q: %v", want, err)
			}
			if err := q.Delete(ctx, job); !errors.Is(err, dbqueue.ErrNotHeld) {
				t.Fatalf("second delete of %q: %v, want ErrNotHeld", want, err)
			}
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 0 {
			t.Fatalf("%d jobs left after the whole chain ran, want 0", n)
		}
	})
}

// Failing a chain's job by hand stops the chain there, as a worker's
// failure does: nothing more runs, and the rest of the chain waits in
// failed_jobs, in the failed job's payload, to be retried.
func TestFailByHandStopsTheChainAndKeepsItsRest(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		if _, err := q.PushChain(ctx, dbqueue.NewJob{Name: "first"}, dbqueue.NewJob{Name: "second"}); err != nil {
			t.Fatal(err)
		}
		job := reserveOne(t, q)
		if err := q.Fail(ctx, job, errors.New("broken")); err != nil {
			t.Fatal(err)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 0 {
			t.Fatalf("%d jobs queued after the chain's first job failed, want 0", n)
		}
		var payload, exception string
		if err := db.SQL.QueryRow("SELECT payload, exception FROM failed_jobs").Scan(&payload, &exception); err != nil {
			t.Fatal(err)
		}
		if exception != "broken" || !strings.Contains(payload, `"chained"`) || !strings.Contains(payload, "second") {
			t.Fatalf("failed_jobs holds exception %q, payload %s: want the failure with the rest of the chain", exception, payload)
		}
	})
}

// A batch whose jobs a user ends by hand is counted as a worker counts
// it: a Delete is a success, a Fail a failure (cancelling the batch
// without AllowFailures), and the batch is done when every job has run.
func TestDeleteAndFailByHandCountInTheBatch(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		for _, allow := range []bool{true, false} {
			b, err := q.Batch(ctx, dbqueue.BatchOptions{Name: "import", AllowFailures: allow},
				dbqueue.NewJob{Name: "row"}, dbqueue.NewJob{Name: "row"}, dbqueue.NewJob{Name: "row"})
			if err != nil {
				t.Fatal(err)
			}
			jobs := reserve(t, q, 3)
			if len(jobs) != 3 {
				t.Fatalf("reserved %d jobs of the batch, want 3", len(jobs))
			}
			if err := q.Delete(ctx, jobs[0]); err != nil {
				t.Fatal(err)
			}
			if err := q.Fail(ctx, jobs[1], errors.New("bad row")); err != nil {
				t.Fatal(err)
			}
			if err := q.Fail(ctx, jobs[1], errors.New("bad row")); err != nil {
				t.Fatalf("Fail again, as a retry after a lost reply would: %v", err)
			}
			got, err := q.FindBatch(ctx, b.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.PendingJobs != 2 || got.FailedJobs != 1 || len(got.FailedJobIDs) != 1 || got.FailedJobIDs[0] != jobs[1].Payload.UUID ||
				got.Cancelled() == allow {
				t.Fatalf("AllowFailures %v: batch after one delete and one fail: pending %d, failed %d %v, cancelled %v; want 2, 1 [%s], %v",
					allow, got.PendingJobs, got.FailedJobs, got.FailedJobIDs, got.Cancelled(), jobs[1].Payload.UUID, !allow)
			}
			if err := q.Delete(ctx, jobs[2]); err != nil {
				t.Fatal(err)
			}
			if got, err = q.FindBatch(ctx, b.ID); err != nil {
				t.Fatal(err)
			}
			// Finished only by its cancel: as in Laravel, a failed job stays
			// pending (it may be retried), yet the batch is done.
			if got.PendingJobs != 1 || got.FailedJobs != 1 || !got.Done() || got.Finished() == allow {
				t.Fatalf("AllowFailures %v: batch with every job ended: pending %d, failed %d, done %v, finished %v; want 1, 1, true, %v",
					allow, got.PendingJobs, got.FailedJobs, got.Done(), got.Finished(), !allow)
			}
		}
	})
}

// A linked job released by hand with a new payload keeps its chain and
// its batch: a payload that would drop them is refused with the job left
// as it was, so its Delete still pushes the next link.
func TestReleaseWithPayloadKeepsTheChain(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		if _, err := q.PushChain(ctx, dbqueue.NewJob{Name: "first"}, dbqueue.NewJob{Name: "second"}); err != nil {
			t.Fatal(err)
		}
		job := reserveOne(t, q)
		err := q.ReleaseWithPayload(ctx, job, 0, []byte(`{"uuid":"`+job.Payload.UUID+`","displayName":"first","job":"first","data":null}`))
		if err == nil || !strings.Contains(err.Error(), "chained") {
			t.Fatalf("release with a payload that drops the chain: %v, want an error naming \"chained\"", err)
		}
		// The same payload with a new key and the chain kept is taken.
		raw := strings.Replace(string(job.RawPayload), `"displayName"`, `"attemptsSeen":1,"displayName"`, 1)
		if err := q.ReleaseWithPayload(ctx, job, 0, []byte(raw)); err != nil {
			t.Fatalf("release with the chain kept: %v", err)
		}
		job = reserveOne(t, q)
		if err := q.Delete(ctx, job); err != nil {
			t.Fatal(err)
		}
		if next := reserveOne(t, q); next.Payload.DisplayName != "second" {
			t.Fatalf("after the first link, %q ran, want \"second\"", next.Payload.DisplayName)
		}
	})
}
