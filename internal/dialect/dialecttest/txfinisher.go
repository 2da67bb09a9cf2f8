package dialecttest

import (
	"context"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// txFinisherTests are TxFinisher's.
var txFinisherTests = []test{
	{method: "CompleteIn", fn: finishesInTheCallersTransaction},
	{method: "FinishIn", fn: finishIn},
	{method: "ReleaseIn", fn: releaseIn},
	{method: "LockReservation", fn: lockReservation},
}

// Finishes inside the caller's transaction act on the held reservation
// only, and only when that transaction commits; LockReservation reads
// who holds a row.
func finishesInTheCallersTransaction(t *testing.T, s *suite) {
	f := s.Dialect
	q := s.queue(t)
	s.push(t, q, 2)
	rows := s.claim(t, q, 3600, 2)
	if len(rows) != 2 {
		t.Fatalf("claimed %d, want 2", len(rows))
	}
	done, snoozed := held(rows[0]), held(rows[1])
	stale := done
	stale.Token--
	in := func(commit bool, fn func(tx sqldb.Tx) (bool, error)) bool {
		t.Helper()
		return s.endInTx(t, commit, fn)
	}
	complete := func(h dialect.Held) func(sqldb.Tx) (bool, error) {
		return func(tx sqldb.Tx) (bool, error) { return f.CompleteIn(s.ctx, tx, h) }
	}
	if in(true, complete(stale)) {
		t.Fatal("a stale reservation completed in a transaction")
	}
	if !in(false, complete(done)) {
		t.Fatal("the holder's completion reported the row not held")
	}
	r, found, err := f.LockReservation(s.ctx, s.DB, done.ID)
	if err != nil || !found || !r.HeldBy(done) {
		t.Fatalf("after a rolled-back completion the row reads %+v (found %v, %v), want held by %+v", r, found, err, done)
	}
	if !in(true, complete(done)) {
		t.Fatal("the holder's completion reported the row not held")
	}
	if _, found, err := f.LockReservation(s.ctx, s.DB, done.ID); err != nil || found {
		t.Fatalf("a committed completion left the row (found %v, %v)", found, err)
	}
	if !in(true, func(tx sqldb.Tx) (bool, error) { return f.ReleaseIn(s.ctx, tx, snoozed, 0, true) }) {
		t.Fatal("the holder's give-back reported the row not held")
	}
	back := s.claimOne(t, q)
	if back.ID != snoozed.ID || back.Attempts != snoozed.Attempts || back.Token == snoozed.Token {
		t.Fatalf("after a give-back in a transaction the claim took %+v; want row %d, attempt %d again, a new token", back, snoozed.ID, snoozed.Attempts)
	}
}

// FinishIn is FinishLinked in the caller's transaction: nothing for a
// stale reservation, and the delete, the next link and the batch's count
// commit or roll back with the caller's own writes.
func finishIn(t *testing.T, s *suite) {
	f := s.Dialect
	q := s.queue(t)
	id := s.newBatch(t, 2, true)
	s.push(t, q, 2)
	rows := s.claim(t, q, 3600, 2)
	if len(rows) != 2 {
		t.Fatalf("claimed %d, want 2", len(rows))
	}
	stale := held(rows[0])
	stale.Token--
	next := dialect.PushRow{Queue: q + "-next", Payload: []byte(`{"uuid":"next"}`)}
	fin := dialect.Finish{Next: []dialect.PushRow{next}, BatchID: id, JobUUID: "j0"}
	run := func(h dialect.Held, fin dialect.Finish, commit bool) dialect.FinishResult {
		t.Helper()
		tx, err := s.DB.Begin(s.ctx, s.Dialect.BatchTxOptions())
		if err != nil {
			t.Fatal(err)
		}
		res, err := f.FinishIn(s.ctx, tx, h, fin)
		if err != nil {
			tx.Rollback(context.Background())
			t.Fatalf("finish in a transaction: %v", err)
		}
		if commit {
			err = tx.Commit(s.ctx)
		} else {
			err = tx.Rollback(s.ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := run(stale, fin, true); res.Held || len(res.NextIDs) != 0 || res.Batch != nil {
		t.Fatalf("a stale finish in a transaction: %+v, want nothing done", res)
	}
	if res := run(held(rows[0]), fin, false); !res.Held || len(res.NextIDs) != 1 || res.Batch == nil || res.Batch.After.PendingJobs != 1 {
		t.Fatalf("a finish in a transaction: %+v", res)
	}
	if r, found, err := f.LockReservation(s.ctx, s.DB, rows[0].ID); err != nil || !found || !r.HeldBy(held(rows[0])) {
		t.Fatalf("after a rolled-back finish the row reads %+v (found %v, %v), want still held", r, found, err)
	}
	if n := s.int(t, "SELECT COUNT(*) FROM "+s.jobs()+" WHERE queue = ?", next.Queue); n != 0 {
		t.Fatal("a rolled-back finish left its next link")
	}
	if b := s.findBatch(t, id); b.PendingJobs != 2 {
		t.Fatalf("a rolled-back finish counted in the batch: %+v", b)
	}
	res := run(held(rows[0]), fin, true)
	if !res.Held || len(res.NextIDs) != 1 {
		t.Fatalf("a finish in a transaction: %+v", res)
	}
	if p := s.text(t, "SELECT payload FROM "+s.jobs()+" WHERE id = ?", res.NextIDs[0]); p != string(next.Payload) {
		t.Fatalf("the next link's id holds %s", p)
	}
	fail := dialect.Failure{UUID: q + "-j1", Connection: "database", Queue: q, Payload: rows[1].Payload, Exception: "boom"}
	if res := run(held(rows[1]), dialect.Finish{Fail: &fail, BatchID: id, JobUUID: "j1"}, true); !res.Held || res.Batch == nil || res.Batch.After.FailedJobs != 1 {
		t.Fatalf("a failing finish in a transaction: %+v", res)
	}
	if n := s.int(t, "SELECT COUNT(*) FROM "+s.Dialect.Tables().FailedTable()+" WHERE uuid = ?", fail.UUID); n != 1 {
		t.Fatalf("%d failed rows for %s, want 1", n, fail.UUID)
	}
	if b := s.findBatch(t, id); b.PendingJobs != 1 || b.FailedJobs != 1 {
		t.Fatalf("the batch after a success and a failure: %+v", b)
	}
}

// ReleaseIn puts a held row back after delay with a new token, its
// attempt taken back with giveBack only, when the caller commits.
func releaseIn(t *testing.T, s *suite) {
	f := s.Dialect
	q := s.queue(t)
	s.push(t, q, 2)
	rows := s.claim(t, q, 3600, 2)
	if len(rows) != 2 {
		t.Fatalf("claimed %d, want 2", len(rows))
	}
	release := func(h dialect.Held, delay int64, giveBack, commit bool) bool {
		t.Helper()
		return s.endInTx(t, commit, func(tx sqldb.Tx) (bool, error) { return f.ReleaseIn(s.ctx, tx, h, delay, giveBack) })
	}
	delayed, snoozed := held(rows[0]), held(rows[1])
	if !release(delayed, 3600, false, false) {
		t.Fatal("the holder's release reported the row not held")
	}
	if r, _, _ := f.LockReservation(s.ctx, s.DB, delayed.ID); !r.HeldBy(delayed) {
		t.Fatalf("a rolled-back release left the row %+v", r)
	}
	before := s.now(t)
	if !release(delayed, 3600, false, true) {
		t.Fatal("the holder's release reported the row not held")
	}
	r, _, _ := f.LockReservation(s.ctx, s.DB, delayed.ID)
	if r.Reserved || r.Token == delayed.Token || r.Attempts != delayed.Attempts {
		t.Fatalf("after a release the row reads %+v, want unreserved, a new token, attempts %d", r, delayed.Attempts)
	}
	if at := s.int(t, "SELECT available_at FROM "+s.jobs()+" WHERE id = ?", delayed.ID); at < before+3600 || at > s.now(t)+3600 {
		t.Fatalf("a release delayed 3600 s is available at %d, want %d", at, before+3600)
	}
	if release(delayed, 0, false, true) {
		t.Fatal("a second release of the same reservation reported it held")
	}
	if !release(snoozed, 0, true, true) {
		t.Fatal("the holder's give-back reported the row not held")
	}
	back := s.claimOne(t, q)
	if back.ID != snoozed.ID || back.Attempts != snoozed.Attempts {
		t.Fatalf("after a give-back the claim took %+v, want row %d at attempt %d again", back, snoozed.ID, snoozed.Attempts)
	}
}

// LockReservation reads who holds a row, waiting for a transaction that
// is writing it rather than reading around it; found is false when the
// row is gone.
func lockReservation(t *testing.T, s *suite) {
	f := s.Dialect
	q := s.queue(t)
	s.push(t, q, 1)
	c := s.claimOne(t, q)
	if r, found, err := f.LockReservation(s.ctx, s.DB, c.ID); err != nil || !found || !r.HeldBy(held(c)) || r.Token != c.Token || r.Attempts != c.Attempts {
		t.Fatalf("a held row reads %+v (found %v, %v), want held by %+v", r, found, err, held(c))
	}
	if _, found, err := f.LockReservation(s.ctx, s.DB, c.ID+1_000_000); err != nil || found {
		t.Fatalf("a missing row: found %v, %v", found, err)
	}
	if !s.RowLocks {
		return // SQLite: the read's transaction waits for the one writer
	}
	tx, err := s.DB.Begin(s.ctx, sqldb.TxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if ok, err := f.ReleaseIn(s.ctx, tx, held(c), 0, false); err != nil || !ok {
		t.Fatalf("release in a transaction: %v, %v", ok, err)
	}
	type read struct {
		r     dialect.Reservation
		found bool
		err   error
	}
	done := make(chan read, 1)
	go func() {
		var got read
		got.err = sqldb.Retry(s.ctx, func() (err error) {
			got.r, got.found, err = f.LockReservation(s.ctx, s.DB, c.ID)
			return err
		})
		done <- got
	}()
	// Wait until the read waits on the row's lock, or returns.
	waiting := "SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%reservation_token, attempts, reserved_at%'"
	if s.Dialect.Name() == "mysql" {
		waiting = "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = DATABASE() AND INFO LIKE '%reservation_token, attempts, reserved_at%'"
	}
	for {
		select {
		case got := <-done:
			t.Fatalf("LockReservation returned %+v while another transaction was writing the row: it must wait for it", got)
		default:
		}
		var n int64
		if err := s.DB.QueryRow(s.ctx, waiting).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		select {
		case <-s.ctx.Done():
			t.Fatal("LockReservation never waited on the row's lock")
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := tx.Commit(s.ctx); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if got.err != nil || !got.found || got.r.Reserved || got.r.Token == c.Token {
		t.Fatalf("after the release committed the row reads %+v (found %v, %v), want unreserved with a new token", got.r, got.found, got.err)
	}
}

// endInTx runs fn, which ends a held row inside tx, in a transaction of
// its own that it then commits or rolls back, and returns what fn said of
// the row.
func (s *suite) endInTx(t *testing.T, commit bool, fn func(tx sqldb.Tx) (bool, error)) bool {
	t.Helper()
	tx, err := s.DB.Begin(s.ctx, sqldb.TxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ok, err := fn(tx)
	if err != nil {
		tx.Rollback(context.Background())
		t.Fatal(err)
	}
	if commit {
		err = tx.Commit(s.ctx)
	} else {
		err = tx.Rollback(s.ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	return ok
}
