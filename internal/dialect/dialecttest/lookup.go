package dialecttest

import (
	"context"
	"slices"
	"testing"

	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// lookupTests are Lookup's.
var lookupTests = []test{
	{method: "FindJob", fn: lookup},
	{method: "ListJobs", fn: listJobs},
	{method: "CancelJob", fn: cancelJob},
	{method: "RunNow", fn: runNow},
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

// ListJobs pages through rows in id order after AfterID, by queue and
// state, Limit at a time.
func listJobs(t *testing.T, s *suite) {
	l := s.Dialect
	q, other := s.queue(t), s.queue(t)
	ids := s.insert(t, []dialect.PushRow{
		{Queue: q, Payload: payload(q, 0)},
		{Queue: q, Payload: payload(q, 1), At: 3600},
		{Queue: other, Payload: payload(other, 0)},
		{Queue: q, Payload: payload(q, 2)},
		{Queue: q, Payload: payload(q, 3)},
	})
	if c := s.claimOne(t, q); c.ID != ids[0] {
		t.Fatalf("claimed %d, want %d", c.ID, ids[0])
	}
	list := func(f dialect.JobFilter) ([]int64, []dialect.StatedRow) {
		t.Helper()
		rows := must[[]dialect.StatedRow](t, "list")(l.ListJobs(s.ctx, s.DB, f))
		out := make([]int64, len(rows))
		for i, r := range rows {
			out[i] = r.ID
		}
		return out, rows
	}
	got, rows := list(dialect.JobFilter{Queue: q})
	if want := []int64{ids[0], ids[1], ids[3], ids[4]}; !slices.Equal(got, want) {
		t.Fatalf("rows of %s: %v, want %v in id order", q, got, want)
	}
	for i, want := range []string{dialect.StateReserved, dialect.StateDelayed, dialect.StatePending, dialect.StatePending} {
		if rows[i].State != want || rows[i].Queue != q {
			t.Fatalf("row %d reads state %q queue %q, want %q", rows[i].ID, rows[i].State, rows[i].Queue, want)
		}
	}
	if got, _ := list(dialect.JobFilter{Queue: q, State: dialect.StatePending}); !slices.Equal(got, []int64{ids[3], ids[4]}) {
		t.Fatalf("pending rows: %v", got)
	}
	if got, _ := list(dialect.JobFilter{Queue: q, State: dialect.StateReserved}); !slices.Equal(got, []int64{ids[0]}) {
		t.Fatalf("reserved rows: %v", got)
	}
	page1, _ := list(dialect.JobFilter{Queue: q, Limit: 2})
	page2, _ := list(dialect.JobFilter{Queue: q, Limit: 2, AfterID: page1[len(page1)-1]})
	if !slices.Equal(page1, []int64{ids[0], ids[1]}) || !slices.Equal(page2, []int64{ids[3], ids[4]}) {
		t.Fatalf("pages of 2: %v then %v", page1, page2)
	}
	if _, err := l.ListJobs(s.ctx, s.DB, dialect.JobFilter{State: "bogus"}); err == nil {
		t.Fatal("a list by an unknown state did not fail")
	}
}

// CancelJob deletes a row nobody holds and returns its payload, leaves a
// reserved row, and says gone for a missing one; a rollback keeps the row.
func cancelJob(t *testing.T, s *suite) {
	l := s.Dialect
	q := s.queue(t)
	ids := s.insert(t, []dialect.PushRow{{Queue: q, Payload: payload(q, 0), At: 3600}, {Queue: q, Payload: payload(q, 1)}})
	cancel := func(id int64, commit bool) (string, []byte) {
		t.Helper()
		tx, err := s.DB.Begin(s.ctx, sqldb.TxOptions{})
		if err != nil {
			t.Fatal(err)
		}
		state, p, err := l.CancelJob(s.ctx, tx, id)
		if err != nil {
			tx.Rollback(context.Background())
			t.Fatalf("cancel %d: %v", id, err)
		}
		if commit {
			err = tx.Commit(s.ctx)
		} else {
			err = tx.Rollback(s.ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		return state, p
	}
	if st, p := cancel(ids[0], false); st != dialect.StatePending || string(p) != string(payload(q, 0)) {
		t.Fatalf("cancel of a delayed row: %q %s, want pending (not held) and its payload", st, p)
	}
	if _, found, _ := l.FindJob(s.ctx, s.DB, ids[0]); !found {
		t.Fatal("a cancel rolled back deleted the row")
	}
	if st, _ := cancel(ids[0], true); st != dialect.StatePending {
		t.Fatalf("cancel of a delayed row says %q", st)
	}
	if _, found, _ := l.FindJob(s.ctx, s.DB, ids[0]); found {
		t.Fatal("a committed cancel left the row")
	}
	if st, p := cancel(ids[0], true); st != dialect.StateGone || p != nil {
		t.Fatalf("cancel of a missing row: %q %s, want gone", st, p)
	}
	s.claimOne(t, q)
	if st, p := cancel(ids[1], true); st != dialect.StateReserved || p != nil {
		t.Fatalf("cancel of a reserved row: %q %s", st, p)
	}
	if _, found, _ := l.FindJob(s.ctx, s.DB, ids[1]); !found {
		t.Fatal("a cancel deleted a reserved row")
	}
}

// RunNow makes a delayed row due and names its queue; a pending, reserved
// or missing row is left as it is and its state said.
func runNow(t *testing.T, s *suite) {
	l := s.Dialect
	q := s.queue(t)
	ids := s.insert(t, []dialect.PushRow{{Queue: q, Payload: payload(q, 0), At: 3600}, {Queue: q, Payload: payload(q, 1)}})
	if st, queue, err := l.RunNow(s.ctx, s.DB, ids[1]); err != nil || st != dialect.StatePending || queue != q {
		t.Fatalf("run now of a pending row: %q %q %v", st, queue, err)
	}
	if st, queue, err := l.RunNow(s.ctx, s.DB, ids[0]); err != nil || st != dialect.StateDelayed || queue != q {
		t.Fatalf("run now of a delayed row: %q %q %v", st, queue, err)
	}
	if got := s.claim(t, q, 3600, 5); len(got) != 2 {
		t.Fatalf("after run now the claim took %d rows, want both of %v", len(got), ids)
	}
	if st, _, err := l.RunNow(s.ctx, s.DB, ids[0]+1_000_000); err != nil || st != dialect.StateGone {
		t.Fatalf("run now of a missing row: %q %v", st, err)
	}
}
