package dialecttest

import (
	"strconv"
	"testing"

	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// historyTests are ErrorHistory's.
var historyTests = []test{
	{method: "JobErrors", fn: jobErrors},
	{method: "FailedErrors", fn: failedErrors},
	{method: "DropErrors", fn: dropErrors},
	{method: "PruneErrors", fn: pruneErrors},
}

// JobErrors reads a row's errors oldest first, each with its attempt,
// worker and time; a row keeps the newest ErrorHistoryKeep.
func jobErrors(t *testing.T, s *suite) {
	h := s.history(t)
	q := s.queue(t)
	s.push(t, q, 1)
	c := s.claimOne(t, q)
	before := s.now(t)
	total := dialect.ErrorHistoryKeep + 2
	for i := range total {
		c = s.releaseWithError(t, c, "error "+strconv.Itoa(i))
	}
	errs := must[[]dialect.AttemptError](t, "job errors")(h.JobErrors(s.ctx, s.DB, c.ID))
	if len(errs) != dialect.ErrorHistoryKeep {
		t.Fatalf("after %d errors the row keeps %d, want the newest %d", total, len(errs), dialect.ErrorHistoryKeep)
	}
	for i, e := range errs {
		n := total - dialect.ErrorHistoryKeep + i
		if e.Error != "error "+strconv.Itoa(n) || e.Attempt != n+1 || e.Worker != "host:1" || e.At < before || e.At > s.now(t) {
			t.Fatalf("error %d of the history: %+v, want error %d of attempt %d, now", i, e, n, n+1)
		}
	}
	if errs := must[[]dialect.AttemptError](t, "no errors")(h.JobErrors(s.ctx, s.DB, c.ID+1_000_000)); len(errs) != 0 {
		t.Fatalf("errors of a missing row: %+v", errs)
	}
}

// FailedErrors reads the errors a failed job took with it to
// failed_jobs; the row in jobs has none left, and a retry brings them
// back to the new row.
func failedErrors(t *testing.T, s *suite) {
	h := s.history(t)
	q := s.queue(t)
	s.push(t, q, 1)
	c := s.releaseWithError(t, s.claimOne(t, q), "first")
	f := dialect.Failure{UUID: q + "-uuid", Connection: "database", Queue: q, Payload: dialect.MarkFailed(c.Payload, c.ID, c.Token, c.Attempts), Exception: "last"}
	if ok := must[bool](t, "fail")(s.Dialect.FailMove(s.ctx, s.DB, held(c), f)); !ok {
		t.Fatal("fail of a held row reported it not held")
	}
	errs := must[[]dialect.AttemptError](t, "failed errors")(h.FailedErrors(s.ctx, s.DB, f.UUID))
	if len(errs) != 1 || errs[0].Error != "first" || errs[0].Attempt != 1 {
		t.Fatalf("failed job's errors: %+v, want the first attempt's", errs)
	}
	if errs := must[[]dialect.AttemptError](t, "job errors")(h.JobErrors(s.ctx, s.DB, c.ID)); len(errs) != 0 {
		t.Fatalf("the failed row's id still has errors in jobs' history: %+v", errs)
	}
	if errs := must[[]dialect.AttemptError](t, "other uuid")(h.FailedErrors(s.ctx, s.DB, f.UUID+"-other")); len(errs) != 0 {
		t.Fatalf("errors of another uuid: %+v", errs)
	}
	s.inTx(t, s.Dialect.FailedTxOptions(), func(tx sqldb.Tx) error {
		rows, err := s.Dialect.LockFailed(s.ctx, tx, dialect.FailedFilter{UUIDs: []string{f.UUID}})
		if err != nil {
			return err
		}
		return s.Dialect.RetryFromFailed(s.ctx, tx, rows)
	})
	back := s.claimOne(t, q)
	// The retry keeps the attempt errors and adds the failure's own
	// exception as the attempt that failed.
	errs = must[[]dialect.AttemptError](t, "retried")(h.JobErrors(s.ctx, s.DB, back.ID))
	if len(errs) != 2 || errs[0].Error != "first" || errs[0].Attempt != 1 || errs[1].Error != "last" || errs[1].Attempt != c.Attempts || !dialect.Marked(back.Token) {
		t.Fatalf("a retried job's history: %+v (token %d), want the first attempt's error, then the failure's at attempt %d, and a marked token", errs, back.Token, c.Attempts)
	}
}

// DropErrors deletes the errors of the rows named, and only theirs.
func dropErrors(t *testing.T, s *suite) {
	h := s.history(t)
	q := s.queue(t)
	s.push(t, q, 2)
	rows := s.claim(t, q, 3600, 2)
	if len(rows) != 2 {
		t.Fatalf("claimed %d, want 2", len(rows))
	}
	s.releaseWithError(t, rows[0], "a")
	s.releaseWithError(t, rows[1], "b")
	if err := h.DropErrors(s.ctx, s.DB, []int64{rows[0].ID}); err != nil {
		t.Fatal(err)
	}
	if errs := must[[]dialect.AttemptError](t, "dropped")(h.JobErrors(s.ctx, s.DB, rows[0].ID)); len(errs) != 0 {
		t.Fatalf("dropped errors stayed: %+v", errs)
	}
	if errs := must[[]dialect.AttemptError](t, "kept")(h.JobErrors(s.ctx, s.DB, rows[1].ID)); len(errs) != 1 {
		t.Fatalf("another row's errors: %+v, want its 1", errs)
	}
	if err := h.DropErrors(s.ctx, s.DB, nil); err != nil {
		t.Fatalf("drop of no ids: %v", err)
	}
}

// PruneErrors deletes up to limit errors whose job left both jobs and
// failed_jobs, and keeps those of live and failed jobs (own tables: it
// prunes the whole table).
func pruneErrors(t *testing.T, s *suite) {
	o := s.own(t)
	h := o.history(t)
	q := o.queue(t)
	o.push(t, q, 4)
	rows := o.claim(t, q, 3600, 4)
	if len(rows) != 4 {
		t.Fatalf("claimed %d, want 4", len(rows))
	}
	for i := range rows {
		rows[i] = o.releaseWithError(t, rows[i], "e"+strconv.Itoa(i))
	}
	// rows[0] and rows[1] go as Laravel's worker deletes them: without
	// their history.
	o.exec(t, "DELETE FROM "+o.jobs()+" WHERE id IN (?, ?)", rows[0].ID, rows[1].ID)
	f := dialect.Failure{UUID: q + "-failed", Connection: "database", Queue: q, Payload: rows[2].Payload, Exception: "x"}
	if ok := must[bool](t, "fail")(o.Dialect.FailMove(o.ctx, o.DB, held(rows[2]), f)); !ok {
		t.Fatal("fail reported the row not held")
	}
	errorsTable := o.Dialect.Tables().ErrorsTable()
	if n := must[int64](t, "prune")(h.PruneErrors(o.ctx, o.DB, 1)); n != 1 {
		t.Fatalf("prune with limit 1 deleted %d", n)
	}
	if n := must[int64](t, "prune")(h.PruneErrors(o.ctx, o.DB, 100)); n != 1 {
		t.Fatalf("the second prune deleted %d, want the other orphan", n)
	}
	if n := o.int(t, "SELECT COUNT(*) FROM "+errorsTable); n != 2 {
		t.Fatalf("%d errors left, want the failed job's and the live row's", n)
	}
	if errs := must[[]dialect.AttemptError](t, "failed")(h.FailedErrors(o.ctx, o.DB, f.UUID)); len(errs) != 1 {
		t.Fatalf("the failed job's errors after a prune: %+v", errs)
	}
	if errs := must[[]dialect.AttemptError](t, "live")(h.JobErrors(o.ctx, o.DB, rows[3].ID)); len(errs) != 1 {
		t.Fatalf("the live row's errors after a prune: %+v", errs)
	}
}
