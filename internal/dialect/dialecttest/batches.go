package dialecttest

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// batchesTests are Batches'.
var batchesTests = []test{
	{method: "InsertBatch", fn: insertBatch},
	{method: "FindBatch", fn: findBatch},
	{method: "CancelBatch", fn: cancelBatch},
	{method: "PruneBatches", fn: pruneBatches},
	{method: "CountInBatch", fn: countInBatch},
	{method: "FinishLinked", fn: batches},
	{method: "BatchTxOptions", fn: batchTxOptions},
}

// A linked finish deletes (or fails) the held row, pushes the chain's
// next link and counts the outcome in the batch, all or nothing: a stale
// reservation changes nothing. A cancelled batch reads as cancelled.
func batches(t *testing.T, s *suite) {
	b := s.Dialect
	q := s.queue(t)
	id := q + "-batch"
	row := dialect.BatchRow{ID: id, Name: "conformance", TotalJobs: 2, PendingJobs: 2, Options: dialect.BatchOptions(false)}
	if err := b.InsertBatch(s.ctx, s.DB, row); err != nil {
		t.Fatal(err)
	}
	got, found, err := b.FindBatch(s.ctx, s.DB, id)
	if err != nil || !found || got.PendingJobs != 2 || got.TotalJobs != 2 || got.Options != row.Options || got.CreatedAt == 0 {
		t.Fatalf("find batch: %+v %v %v", got, found, err)
	}
	s.push(t, q, 2)
	jobs := s.claim(t, q, 3600, 2)
	if len(jobs) != 2 {
		t.Fatalf("claimed %d, want 2", len(jobs))
	}
	stale := held(jobs[0])
	stale.Token--
	res, err := b.FinishLinked(s.ctx, s.DB, stale, dialect.Finish{BatchID: id, JobUUID: "j0", Next: []dialect.PushRow{{Queue: q, Payload: payload(q, 9)}}})
	if err != nil || res.Held || len(res.NextIDs) != 0 {
		t.Fatalf("a stale linked finish: %+v, %v; want nothing done", res, err)
	}
	next := dialect.PushRow{Queue: q, Payload: []byte(`{"uuid":"next-link"}`)}
	res, err = b.FinishLinked(s.ctx, s.DB, held(jobs[0]), dialect.Finish{BatchID: id, JobUUID: "j0", Next: []dialect.PushRow{next}})
	if err != nil || !res.Held || len(res.NextIDs) != 1 || res.Batch == nil {
		t.Fatalf("linked finish: %+v, %v", res, err)
	}
	if res.Batch.Before.PendingJobs != 2 || res.Batch.After.PendingJobs != 1 {
		t.Fatalf("batch pending went %d → %d, want 2 → 1", res.Batch.Before.PendingJobs, res.Batch.After.PendingJobs)
	}
	if p := s.text(t, "SELECT payload FROM "+s.jobs()+" WHERE id = ?", res.NextIDs[0]); p != string(next.Payload) {
		t.Fatalf("the next link's id %d holds %s", res.NextIDs[0], p)
	}
	f := dialect.Failure{UUID: q + "-j1", Connection: "database", Queue: q, Payload: jobs[1].Payload, Exception: "boom"}
	res, err = b.FinishLinked(s.ctx, s.DB, held(jobs[1]), dialect.Finish{Fail: &f, BatchID: id, JobUUID: "j1"})
	if err != nil || !res.Held || res.Batch == nil {
		t.Fatalf("linked fail: %+v, %v", res, err)
	}
	if a := res.Batch.After; a.FailedJobs != 1 || a.PendingJobs != 1 || !slices.Contains(a.FailedJobIDs, "j1") {
		t.Fatalf("after a failure the batch reads %+v, want 1 failed (j1), 1 pending", a)
	}
	if n := s.int(t, "SELECT COUNT(*) FROM "+s.jobs()+" WHERE id IN (?, ?)", jobs[0].ID, jobs[1].ID); n != 0 {
		t.Fatalf("%d finished rows still in jobs", n)
	}
	if n := s.int(t, "SELECT COUNT(*) FROM "+s.Dialect.Tables().FailedTable()+" WHERE uuid = ?", f.UUID); n != 1 {
		t.Fatalf("%d failed rows for %s, want 1", n, f.UUID)
	}
	if found, err := b.CancelBatch(s.ctx, s.DB, id); err != nil || !found {
		t.Fatalf("cancel: %v %v", found, err)
	}
	if got, _, _ := b.FindBatch(s.ctx, s.DB, id); got.CancelledAt == nil || got.FinishedAt == nil {
		t.Fatalf("cancelled batch reads %+v", got)
	}
	if found, err := b.CancelBatch(s.ctx, s.DB, id+"-none"); err != nil || found {
		t.Fatalf("cancel of a missing batch: %v %v", found, err)
	}
}

// newBatch inserts a batch of total jobs, and returns its id.
func (s *suite) newBatch(t *testing.T, total int, allowFailures bool) string {
	t.Helper()
	id := s.queue(t) + "-batch"
	row := dialect.BatchRow{ID: id, Name: "conformance", TotalJobs: total, PendingJobs: total, Options: dialect.BatchOptions(allowFailures)}
	if err := s.Dialect.InsertBatch(s.ctx, s.DB, row); err != nil {
		t.Fatalf("insert batch: %v", err)
	}
	return id
}

func (s *suite) findBatch(t *testing.T, id string) dialect.BatchRow {
	t.Helper()
	b, found, err := s.Dialect.FindBatch(s.ctx, s.DB, id)
	if err != nil || !found {
		t.Fatalf("find batch %s: found %v, %v", id, found, err)
	}
	return b
}

// InsertBatch writes the row as given, created now, inside the caller's
// transaction: a rollback leaves none.
func insertBatch(t *testing.T, s *suite) {
	b := s.Dialect
	id := s.queue(t)
	row := dialect.BatchRow{ID: id, Name: "név ' \\", TotalJobs: 3, PendingJobs: 2, FailedJobs: 1, FailedJobIDs: []string{"u1"}, Options: dialect.BatchOptions(true)}
	tx, err := s.DB.Begin(s.ctx, sqldb.TxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.InsertBatch(s.ctx, tx, row); err != nil {
		tx.Rollback(context.Background())
		t.Fatal(err)
	}
	if err := tx.Rollback(s.ctx); err != nil {
		t.Fatal(err)
	}
	if _, found, err := b.FindBatch(s.ctx, s.DB, id); err != nil || found {
		t.Fatalf("a batch inserted in a rolled-back transaction: found %v, %v", found, err)
	}
	before := s.now(t)
	if err := b.InsertBatch(s.ctx, s.DB, row); err != nil {
		t.Fatal(err)
	}
	got := s.findBatch(t, id)
	if got.ID != id || got.Name != row.Name || got.TotalJobs != 3 || got.PendingJobs != 2 || got.FailedJobs != 1 ||
		!slices.Equal(got.FailedJobIDs, row.FailedJobIDs) || got.Options != row.Options || got.CancelledAt != nil || got.FinishedAt != nil ||
		got.CreatedAt < before || got.CreatedAt > s.now(t) || !dialect.AllowsFailures(got.Options) {
		t.Fatalf("inserted batch reads %+v, want %+v created now (%d)", got, row, before)
	}
}

// FindBatch reads a batch as stored; found is false when there is none.
func findBatch(t *testing.T, s *suite) {
	b := s.Dialect
	id := s.newBatch(t, 2, false)
	got := s.findBatch(t, id)
	if got.ID != id || got.TotalJobs != 2 || got.PendingJobs != 2 || got.FailedJobs != 0 || len(got.FailedJobIDs) != 0 || dialect.AllowsFailures(got.Options) {
		t.Fatalf("found batch %+v", got)
	}
	if _, found, err := b.FindBatch(s.ctx, s.DB, id+"-none"); err != nil || found {
		t.Fatalf("find of a missing batch: found %v, %v", found, err)
	}
}

// CancelBatch marks a batch cancelled and finished once (a second cancel
// keeps the first time) and says whether there was one.
func cancelBatch(t *testing.T, s *suite) {
	b := s.Dialect
	id := s.newBatch(t, 1, false)
	before := s.now(t)
	if found, err := b.CancelBatch(s.ctx, s.DB, id); err != nil || !found {
		t.Fatalf("cancel: found %v, %v", found, err)
	}
	got := s.findBatch(t, id)
	if got.CancelledAt == nil || got.FinishedAt == nil || *got.CancelledAt < before || *got.FinishedAt != *got.CancelledAt {
		t.Fatalf("cancelled batch reads %+v", got)
	}
	s.exec(t, "UPDATE "+s.Dialect.Tables().BatchesTable()+" SET cancelled_at = cancelled_at - 100, finished_at = finished_at - 100 WHERE id = ?", id)
	if found, err := b.CancelBatch(s.ctx, s.DB, id); err != nil || !found {
		t.Fatalf("second cancel: found %v, %v", found, err)
	}
	if again := s.findBatch(t, id); *again.CancelledAt != *got.CancelledAt-100 || *again.FinishedAt != *got.FinishedAt-100 {
		t.Fatalf("a second cancel moved the times: %+v, want cancelled at %d", again, *got.CancelledAt-100)
	}
	if found, err := b.CancelBatch(s.ctx, s.DB, id+"-none"); err != nil || found {
		t.Fatalf("cancel of a missing batch: found %v, %v", found, err)
	}
}

// PruneBatches deletes batches finished more than olderThan seconds ago,
// and no others (own tables: it prunes the whole table).
func pruneBatches(t *testing.T, s *suite) {
	o := s.own(t)
	b := o.Dialect
	old, recent, open := o.newBatch(t, 1, false), o.newBatch(t, 1, false), o.newBatch(t, 1, false)
	for _, id := range []string{old, recent} {
		if _, err := b.CancelBatch(o.ctx, o.DB, id); err != nil {
			t.Fatal(err)
		}
	}
	o.exec(t, "UPDATE "+o.Dialect.Tables().BatchesTable()+" SET finished_at = finished_at - 7200, created_at = created_at - 7200 WHERE id = ?", old)
	if n := must[int64](t, "prune")(b.PruneBatches(o.ctx, o.DB, 3600)); n != 1 {
		t.Fatalf("prune deleted %d batches, want the one finished two hours ago", n)
	}
	if _, found, _ := b.FindBatch(o.ctx, o.DB, old); found {
		t.Fatal("prune kept the old batch")
	}
	for _, id := range []string{recent, open} {
		o.findBatch(t, id)
	}
}

// CountInBatch counts a success (pending down, the uuid off the failed
// list, finished at 0 pending) or a failure (counted once per uuid; the
// first cancels a batch that allows none), and says nil for no batch.
func countInBatch(t *testing.T, s *suite) {
	b := s.Dialect
	count := func(id, uuid string, failed bool) *dialect.BatchChange {
		t.Helper()
		var ch *dialect.BatchChange
		s.inTx(t, b.BatchTxOptions(), func(tx sqldb.Tx) (err error) {
			ch, err = b.CountInBatch(s.ctx, tx, id, uuid, failed)
			return err
		})
		return ch
	}
	strict := s.newBatch(t, 2, false)
	ch := count(strict, "j1", true)
	if ch == nil || ch.Before.FailedJobs != 0 || ch.After.FailedJobs != 1 || !slices.Equal(ch.After.FailedJobIDs, []string{"j1"}) || ch.After.CancelledAt == nil || ch.After.FinishedAt == nil {
		t.Fatalf("first failure in a batch allowing none: %+v", ch)
	}
	if again := count(strict, "j1", true); again == nil || again.After.FailedJobs != 1 {
		t.Fatalf("a second failure of j1 counted again: %+v", again)
	}
	lenient := s.newBatch(t, 2, true)
	count(lenient, "j1", true)
	if got := s.findBatch(t, lenient); got.CancelledAt != nil || got.FailedJobs != 1 {
		t.Fatalf("a failure in a batch allowing failures: %+v", got)
	}
	ch = count(lenient, "j1", false) // retried and succeeded
	if ch.After.PendingJobs != 1 || len(ch.After.FailedJobIDs) != 0 || ch.After.FinishedAt != nil {
		t.Fatalf("a success of a failed job: %+v", ch.After)
	}
	ch = count(lenient, "j2", false)
	if ch.After.PendingJobs != 0 || ch.After.FinishedAt == nil {
		t.Fatalf("the last success does not finish the batch: %+v", ch.After)
	}
	if got := s.findBatch(t, lenient); got.PendingJobs != 0 || got.FinishedAt == nil {
		t.Fatalf("the batch as stored: %+v", got)
	}
	if ch := count(lenient+"-none", "j", false); ch != nil {
		t.Fatalf("a count in a missing batch: %+v", ch)
	}
}

// BatchTxOptions begin a transaction that locks a batch row (MySQL: READ
// COMMITTED); two counts of one batch in such transactions both count.
func batchTxOptions(t *testing.T, s *suite) {
	b := s.Dialect
	opts := b.BatchTxOptions()
	if s.Dialect.Name() == "mysql" && !opts.ReadCommitted {
		t.Fatal("MySQL's BatchTxOptions are not READ COMMITTED: a lock of a batch row takes gap locks")
	}
	id := s.newBatch(t, 8, true)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			err := sqldb.Retry(s.ctx, func() error {
				return sqldb.InTx(s.ctx, s.DB, opts, func(tx sqldb.Tx) error {
					_, err := b.CountInBatch(s.ctx, tx, id, "j"+strconv.Itoa(i), false)
					return err
				})
			})
			if err != nil {
				t.Errorf("count %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if got := s.findBatch(t, id); got.PendingJobs != 0 || got.FinishedAt == nil {
		t.Fatalf("after 8 racing successes of 8 the batch reads %+v, want 0 pending, finished", got)
	}
}
