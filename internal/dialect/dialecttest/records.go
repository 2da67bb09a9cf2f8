package dialecttest

import (
	"slices"
	"strconv"
	"testing"

	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

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

// A signal holds the value set; a bump changes it to one it never had,
// each time; a deleted signal is not set.
func signals(t *testing.T, s *suite) {
	name := s.queue(t)
	five := int64(5)
	read := func() (int64, bool) {
		t.Helper()
		got := must[map[string]int64](t, "signals")(s.Dialect.Signals(s.ctx, s.DB, []string{name, name + "-unset"}))
		v, ok := got[name]
		if _, other := got[name+"-unset"]; other || len(got) > 1 {
			t.Fatalf("signals read %v, want only %s", got, name)
		}
		return v, ok
	}
	if err := s.Dialect.SetSignal(s.ctx, s.DB, name, &five); err != nil {
		t.Fatal(err)
	}
	if v, ok := read(); !ok || v != 5 {
		t.Fatalf("signal reads %d %v, want 5", v, ok)
	}
	seen := map[int64]bool{5: true}
	for range 3 {
		if err := s.Dialect.SetSignal(s.ctx, s.DB, name, nil); err != nil {
			t.Fatal(err)
		}
		v, ok := read()
		if !ok || seen[v] {
			t.Fatalf("a bump left the signal at %d (seen %v)", v, seen)
		}
		seen[v] = true
	}
	if err := s.Dialect.DeleteSignal(s.ctx, s.DB, name); err != nil {
		t.Fatal(err)
	}
	if v, ok := read(); ok {
		t.Fatalf("a deleted signal reads %d", v)
	}
}

// Lookup reads each row's state from the database's clock, cancels only
// rows nobody holds, and makes a delayed row due.
func lookup(t *testing.T, s *suite) {
	l := s.Dialect
	q := s.queue(t)
	ids := s.insert(t, []dialect.PushRow{
		{Queue: q, Payload: payload(q, 0)},
		{Queue: q, Payload: payload(q, 1), At: 3600},
		{Queue: q, Payload: payload(q, 2)},
	})
	reserved := s.claimOne(t, q)
	if reserved.ID != ids[0] {
		t.Fatalf("claimed %d, want %d", reserved.ID, ids[0])
	}
	for i, want := range []string{dialect.StateReserved, dialect.StateDelayed, dialect.StatePending} {
		row, found, err := l.FindJob(s.ctx, s.DB, ids[i])
		if err != nil || !found || row.State != want || string(row.Payload) != string(payload(q, i)) || row.Queue != q {
			t.Fatalf("find %d: %+v %v %v, want state %s", ids[i], row, found, err, want)
		}
	}
	if _, found, err := l.FindJob(s.ctx, s.DB, ids[2]+1000); err != nil || found {
		t.Fatalf("find of a missing row: found %v, %v", found, err)
	}
	delayed := must[[]dialect.StatedRow](t, "list")(l.ListJobs(s.ctx, s.DB, dialect.JobFilter{Queue: q, State: dialect.StateDelayed}))
	if len(delayed) != 1 || delayed[0].ID != ids[1] {
		t.Fatalf("delayed rows of %s: %v, want %d", q, delayed, ids[1])
	}
	cancel := func(id int64) (state string) {
		t.Helper()
		err := sqldb.InTx(s.ctx, s.DB, sqldb.TxOptions{}, func(tx sqldb.Tx) (err error) {
			state, _, err = l.CancelJob(s.ctx, tx, id)
			return err
		})
		if err != nil {
			t.Fatalf("cancel %d: %v", id, err)
		}
		return state
	}
	if st := cancel(ids[0]); st != dialect.StateReserved {
		t.Fatalf("cancel of a reserved row says %q", st)
	}
	if st := cancel(ids[2]); st != dialect.StatePending {
		t.Fatalf("cancel of a pending row says %q", st)
	}
	if n := s.int(t, "SELECT COUNT(*) FROM "+s.jobs()+" WHERE queue = ?", q); n != 2 {
		t.Fatalf("%d rows left after cancelling a pending and a reserved row, want 2", n)
	}
	if st, queue, err := l.RunNow(s.ctx, s.DB, ids[1]); err != nil || st != dialect.StateDelayed || queue != q {
		t.Fatalf("run now of a delayed row: %q %q %v", st, queue, err)
	}
	if row, _, _ := l.FindJob(s.ctx, s.DB, ids[1]); row.State != dialect.StatePending {
		t.Fatalf("after run now the row is %s", row.State)
	}
	if st, _, err := l.RunNow(s.ctx, s.DB, ids[0]); err != nil || st != dialect.StateReserved {
		t.Fatalf("run now of a reserved row: %q %v", st, err)
	}
}

// A failed job lists with its failure time from the database's clock in
// UTC, and a retry moves it back into jobs, due now, in one transaction.
func retryFromFailed(t *testing.T, s *suite) {
	q := s.queue(t)
	s.push(t, q, 1)
	c := s.claimOne(t, q)
	f := dialect.Failure{UUID: q + "-failed", Connection: "database", Queue: q, Payload: c.Payload, Exception: "boom"}
	before := s.now(t)
	if ok := must[bool](t, "fail")(s.Dialect.FailMove(s.ctx, s.DB, held(c), f)); !ok {
		t.Fatal("fail of a held row reported it not held")
	}
	after := s.now(t)
	list := must[[]dialect.FailedRow](t, "list failed")(s.Dialect.ListFailed(s.ctx, s.DB, dialect.FailedFilter{Queue: q}))
	if len(list) != 1 || list[0].UUID != f.UUID || list[0].Exception != "boom" || string(list[0].Payload) != string(f.Payload) {
		t.Fatalf("failed rows of %s: %+v", q, list)
	}
	if at := list[0].FailedAt; at == nil || *at < before-1 || *at > after+1 {
		got := "NULL"
		if at != nil {
			got = strconv.FormatInt(*at, 10)
		}
		t.Fatalf("failed_at reads %s, want the database's now in UTC, in [%d, %d]", got, before, after)
	}
	if older := must[[]dialect.FailedRow](t, "list older")(s.Dialect.ListFailed(s.ctx, s.DB, dialect.FailedFilter{Queue: q, OlderThan: 3600})); len(older) != 0 {
		t.Fatalf("a failure of now lists as older than an hour: %+v", older)
	}
	err := sqldb.InTx(s.ctx, s.DB, s.Dialect.FailedTxOptions(), func(tx sqldb.Tx) error {
		rows, err := s.Dialect.LockFailed(s.ctx, tx, dialect.FailedFilter{UUIDs: []string{f.UUID}})
		if err != nil {
			return err
		}
		if len(rows) != 1 {
			t.Fatalf("locked %d failed rows, want 1", len(rows))
		}
		return s.Dialect.RetryFromFailed(s.ctx, tx, rows)
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := s.int(t, "SELECT COUNT(*) FROM "+s.Dialect.Tables().FailedTable()+" WHERE uuid = ?", f.UUID); n != 0 {
		t.Fatalf("a retried job is still in failed_jobs (%d rows)", n)
	}
	back := s.claimOne(t, q)
	if string(back.Payload) != string(f.Payload) || back.Attempts != 1 {
		t.Fatalf("the retried job came back as %+v, want its payload with a first attempt", back)
	}
}
