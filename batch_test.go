package dbqueue_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// explodeOn makes every INSERT of a job on queue "explode" fail inside
// the database (a trigger), and returns the undo.
func explodeOn(t *testing.T, db *dbtest.DB) (undo func()) {
	t.Helper()
	switch db.Dialect {
	case dbqueue.Postgres:
		db.Exec(t, `CREATE FUNCTION explode_insert() RETURNS trigger AS $$
BEGIN IF NEW.queue = 'explode' THEN RAISE EXCEPTION 'explode'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql`)
		db.Exec(t, "CREATE TRIGGER explode BEFORE INSERT ON jobs FOR EACH ROW EXECUTE FUNCTION explode_insert()")
		return func() { db.Exec(t, "DROP TRIGGER explode ON jobs") }
	case dbqueue.MySQL:
		db.Exec(t, `CREATE TRIGGER explode BEFORE INSERT ON jobs FOR EACH ROW
BEGIN IF NEW.queue = 'explode' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'explode'; END IF; END`)
	default:
		db.Exec(t, "CREATE TRIGGER explode BEFORE INSERT ON jobs WHEN NEW.queue = 'explode' BEGIN SELECT RAISE(ABORT, 'explode'); END")
	}
	return func() { db.Exec(t, "DROP TRIGGER explode") }
}

func TestBatchRowIsLaravels(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		b, err := q.Batch(ctx, dbqueue.BatchOptions{Name: "import", AllowFailures: true},
			dbqueue.NewJob{Name: "row", Data: 1}, dbqueue.NewJob{Name: "row", Data: 2, Queue: "slow"}, dbqueue.NewJob{Name: "row", Data: 3, Delay: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if len(b.ID) != 36 || b.Name != "import" || b.TotalJobs != 3 || b.PendingJobs != 3 || b.FailedJobs != 0 ||
			!b.AllowFailures || b.Finished() || b.Cancelled() || b.Progress() != 0 || b.CreatedAt.IsZero() {
			t.Fatalf("new batch %+v", b)
		}
		var (
			name, ids, options     string
			total, pending, failed int
			created                int64
			cancelled, finished    *int64
		)
		err = db.SQL.QueryRow(db.Dialect.Rebind(`SELECT name, total_jobs, pending_jobs, failed_jobs, failed_job_ids, options, cancelled_at, created_at, finished_at
FROM job_batches WHERE id = ?`), b.ID).Scan(&name, &total, &pending, &failed, &ids, &options, &cancelled, &created, &finished)
		if err != nil {
			t.Fatal(err)
		}
		// What Laravel 8's DatabaseBatchRepository::store writes.
		if name != "import" || total != 3 || pending != 3 || failed != 0 || ids != "[]" ||
			options != `a:1:{s:13:"allowFailures";b:1;}` || cancelled != nil || finished != nil || created != b.CreatedAt.Unix() {
			t.Fatalf("job_batches row: %q %d %d %d %q %q %v %d %v", name, total, pending, failed, ids, options, cancelled, created, finished)
		}
		jobs, err := q.Jobs(ctx, dbqueue.JobFilter{})
		if err != nil || len(jobs) != 3 {
			t.Fatalf("batch jobs: %d, %v", len(jobs), err)
		}
		for _, j := range jobs {
			var raw map[string]json.RawMessage
			_ = json.Unmarshal(j.RawPayload, &raw)
			if j.Payload.BatchID != b.ID || string(raw["batchId"]) != `"`+b.ID+`"` {
				t.Errorf("job %d payload %s: want batchId %s", j.ID, j.RawPayload, b.ID)
			}
		}
		if jobs[1].Queue != "slow" || jobs[2].State != dbqueue.JobDelayed {
			t.Errorf("the jobs' own queue and delay were not kept: %s, %s", jobs[1].Queue, jobs[2].State)
		}
		found, err := q.FindBatch(ctx, b.ID)
		if err != nil || fmt.Sprint(found) != fmt.Sprint(b) {
			t.Fatalf("FindBatch: %+v, %v; want %+v", found, err, b)
		}
		if _, err := q.FindBatch(ctx, "nope"); !errors.Is(err, dbqueue.ErrBatchNotFound) {
			t.Fatalf("FindBatch of an unknown id: %v", err)
		}
		plain, _ := q.Batch(ctx, dbqueue.BatchOptions{}, dbqueue.NewJob{Name: "x"})
		_ = db.SQL.QueryRow(db.Dialect.Rebind("SELECT options FROM job_batches WHERE id = ?"), plain.ID).Scan(&options)
		if options != "a:0:{}" || plain.AllowFailures {
			t.Fatalf("options of a batch that allows no failures: %q", options)
		}
		if _, err := q.Batch(ctx, dbqueue.BatchOptions{Name: "empty"}); err == nil {
			t.Fatal("a batch of no jobs was accepted")
		}
	})
}

// The batch row and its jobs are written in one transaction: a job the
// database refuses leaves neither the row nor the other jobs.
func TestBatchIsOneTransaction(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		defer explodeOn(t, db)()
		_, err := q.Batch(ctx, dbqueue.BatchOptions{Name: "doomed"}, dbqueue.NewJob{Name: "ok"}, dbqueue.NewJob{Name: "bad", Queue: "explode"})
		if err == nil {
			t.Fatal("a batch with a refused job was pushed")
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM job_batches"); n != 0 {
			t.Fatalf("%d batch rows left by a failed push", n)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 0 {
			t.Fatalf("%d jobs left by a failed batch push", n)
		}
	})
}

func TestCancelAndPruneBatches(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		cancelled, _ := q.Batch(ctx, dbqueue.BatchOptions{Name: "c"}, dbqueue.NewJob{Name: "x"})
		running, _ := q.Batch(ctx, dbqueue.BatchOptions{Name: "r"}, dbqueue.NewJob{Name: "x"})
		if err := q.CancelBatch(ctx, cancelled.ID); err != nil {
			t.Fatal(err)
		}
		b, _ := q.FindBatch(ctx, cancelled.ID)
		if !b.Cancelled() || !b.Finished() || b.PendingJobs != 1 {
			t.Fatalf("cancelled batch reads %+v: want cancelled and finished (Laravel's cancel), its job still pending", b)
		}
		if err := q.CancelBatch(ctx, cancelled.ID); err != nil {
			t.Fatalf("second cancel: %v", err)
		}
		if again, _ := q.FindBatch(ctx, cancelled.ID); !again.CancelledAt.Equal(b.CancelledAt) {
			t.Fatalf("a second cancel moved cancelled_at")
		}
		if err := q.CancelBatch(ctx, "nope"); !errors.Is(err, dbqueue.ErrBatchNotFound) {
			t.Fatalf("cancel of an unknown batch: %v", err)
		}

		if n, err := q.PruneBatches(ctx, time.Hour); err != nil || n != 0 {
			t.Fatalf("prune of a batch finished just now: %d, %v", n, err)
		}
		// Two hours pass for both batches.
		db.Exec(t, "UPDATE job_batches SET created_at = created_at - 7200, finished_at = finished_at - 7200")
		if n, err := q.PruneBatches(ctx, time.Hour); err != nil || n != 1 {
			t.Fatalf("prune: %d, %v; want the finished batch alone", n, err)
		}
		if _, err := q.FindBatch(ctx, cancelled.ID); !errors.Is(err, dbqueue.ErrBatchNotFound) {
			t.Fatalf("pruned batch: %v", err)
		}
		if _, err := q.FindBatch(ctx, running.ID); err != nil {
			t.Fatalf("an unfinished batch was pruned: %v", err)
		}
		if _, err := q.PruneBatches(ctx, -time.Second); err == nil {
			t.Fatal("a negative age was accepted")
		}
	})
}

// Cancelling a waiting batch job counts it as processed in its batch, as
// a job a cancelled batch discards is counted, so the batch can finish.
func TestCancelCountsBatchJob(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		b, _ := q.Batch(ctx, dbqueue.BatchOptions{Name: "n"}, dbqueue.NewJob{Name: "x"}, dbqueue.NewJob{Name: "x"})
		jobs, _ := q.Jobs(ctx, dbqueue.JobFilter{})
		for i, j := range jobs {
			if err := q.Cancel(ctx, j.ID); err != nil {
				t.Fatal(err)
			}
			got, _ := q.FindBatch(ctx, b.ID)
			if got.PendingJobs != 1-i || got.Finished() != (i == 1) {
				t.Fatalf("after %d cancels the batch reads %+v", i+1, got)
			}
		}
	})
}

// A chain's next job is pushed in the transaction that deletes the job
// before it: when the database refuses the push, the delete is rolled
// back too, and the job stays held by its worker, to be finished again.
func TestChainNextPushIsInTheDeleteTransaction(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		first, err := q.PushChain(ctx,
			dbqueue.NewJob{Name: "one"},
			dbqueue.NewJob{Name: "two", Queue: "explode", Data: 2},
			dbqueue.NewJob{Name: "three", Queue: "last", Data: 3, MaxTries: 5},
		)
		if err != nil {
			t.Fatal(err)
		}
		jobs := reserve(t, q, 10)
		if len(jobs) != 1 || jobs[0].ID != first {
			t.Fatalf("reserved %v, want the chain's first job alone", jobs)
		}
		var links []dbqueue.ChainLink
		if err := json.Unmarshal(jobs[0].Payload.Chained, &links); err != nil || len(links) != 2 || links[0].Queue != "explode" || links[1].Queue != "last" {
			t.Fatalf("chained %s: %v", jobs[0].Payload.Chained, err)
		}

		undo := explodeOn(t, db)
		if _, _, err := dbqueue.FinishLinked(ctx, q, jobs[0], nil); err == nil {
			t.Fatal("finishing a link whose next push fails succeeded")
		}
		if info, err := q.Job(ctx, first); err != nil || info.State != dbqueue.JobReserved {
			t.Fatalf("the link after a failed finish: %+v, %v; want it still reserved", info, err)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 1 {
			t.Fatalf("%d rows after a rolled-back finish, want the link alone", n)
		}
		undo()

		if _, _, err := dbqueue.FinishLinked(ctx, q, jobs[0], nil); err != nil {
			t.Fatalf("the holder's finish after the failure: %v", err)
		}
		if _, err := q.Job(ctx, first); !errors.Is(err, dbqueue.ErrJobNotFound) {
			t.Fatalf("finished link: %v", err)
		}
		two := reserve(t, q, 10, "explode")
		if len(two) != 1 || two[0].Name() != "two" || string(two[0].Payload.Data) != "2" {
			t.Fatalf("next link: %v", two)
		}
		if err := json.Unmarshal(two[0].Payload.Chained, &links); err != nil || len(links) != 1 || links[0].Queue != "last" {
			t.Fatalf("the second link carries %s, want the third alone", two[0].Payload.Chained)
		}
		if _, _, err := dbqueue.FinishLinked(ctx, q, two[0], nil); err != nil {
			t.Fatal(err)
		}
		three := reserve(t, q, 10, "last")
		if len(three) != 1 || three[0].Name() != "three" || *three[0].Payload.MaxTries != 5 || three[0].Payload.Chained != nil {
			t.Fatalf("last link: %+v (chained %s)", three, three[0].Payload.Chained)
		}
		// A finish retried by a holder that lost its reservation does nothing.
		if _, _, err := dbqueue.FinishLinked(ctx, q, two[0], nil); !errors.Is(err, dbqueue.ErrNotHeld) {
			t.Fatalf("second finish: %v, want ErrNotHeld", err)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 1 {
			t.Fatalf("%d rows, want the last link alone", n)
		}
	})
}
