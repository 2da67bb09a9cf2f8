package dialecttest

import (
	"context"
	"testing"

	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// A claim marks a reservation that follows an abandoned attempt
// (dialect.AbandonedMark): a claim that takes over an expired
// reservation, and a claim of a row given back or snoozed by such a
// reservation. A claim of a released row (released plainly, with an
// error, or in a transaction) or of a pushed one does not. Every claim
// returns the token it wrote, and no two reservations share one.
func claimMarksAbandoned(t *testing.T, s *suite) {
	f := s.Dialect
	q := s.queue(t)
	id := s.push(t, q, 1)[0]
	tokens := map[int64]string{}
	step := func(what string, retryAfter int64, marked bool, attempts int) dialect.JobRow {
		t.Helper()
		rows := s.claim(t, q, retryAfter, 1)
		if len(rows) != 1 || rows[0].ID != id {
			t.Fatalf("%s: the claim took %v, want row %d", what, ids(rows), id)
		}
		r := rows[0]
		if got := dialect.FollowsAbandoned(r.Token); got != marked {
			t.Fatalf("%s: the claim's token %#x follows an abandoned attempt: %v, want %v", what, r.Token, got, marked)
		}
		if r.Attempts != attempts {
			t.Fatalf("%s: attempts %d, want %d", what, r.Attempts, attempts)
		}
		if stored := s.int(t, "SELECT reservation_token FROM "+s.jobs()+" WHERE id = ?", id); stored != r.Token {
			t.Fatalf("%s: the claim returned token %#x, the row holds %#x", what, r.Token, stored)
		}
		if prev, ok := tokens[r.Token]; ok {
			t.Fatalf("%s: token %#x was drawn before, by %s", what, r.Token, prev)
		}
		tokens[r.Token] = what
		return r
	}
	expire := func() { s.exec(t, "UPDATE "+s.jobs()+" SET reserved_at = reserved_at - 120 WHERE id = ?", id) }
	release := func(r dialect.JobRow, e *dialect.ReleaseError) {
		t.Helper()
		got := must[map[dialect.Key]bool](t, "release")(s.Dialect.ReleaseHeld(s.ctx, s.DB, []dialect.Release{{Held: held(r), Error: e}}))
		if len(got) != 1 {
			t.Fatalf("the holder's release released %v", got)
		}
	}
	inTx := func(r dialect.JobRow, giveBack bool) {
		t.Helper()
		tx, err := s.DB.Begin(s.ctx, sqldb.TxOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ok, err := f.ReleaseIn(s.ctx, tx, held(r), 0, giveBack)
		if err != nil || !ok {
			tx.Rollback(context.Background())
			t.Fatalf("release in a transaction (give back %v): held %v, %v", giveBack, ok, err)
		}
		if err := tx.Commit(s.ctx); err != nil {
			t.Fatal(err)
		}
	}
	giveBack := func(r dialect.JobRow) {
		t.Helper()
		if !must[bool](t, "give back")(s.Dialect.GiveBack(s.ctx, s.DB, held(r))) {
			t.Fatal("the holder's give-back reported the row not held")
		}
	}

	r := step("the first claim", 60, false, 1)
	giveBack(r)
	r = step("a claim after a give-back of an unmarked reservation", 60, false, 1)
	expire()
	r = step("a claim of an expired reservation", 60, true, 2)
	giveBack(r)
	r = step("a claim after a give-back of a marked reservation", 60, true, 2)
	inTx(r, true)
	r = step("a claim after a snooze of a marked reservation", 60, true, 2)
	release(r, nil)
	r = step("a claim after a release of a marked reservation", 60, false, 3)
	expire()
	r = step("a second claim of an expired reservation", 60, true, 4)
	release(r, &dialect.ReleaseError{Error: "boom", Worker: "test"})
	r = step("a claim after a release with an error", 60, false, 5)
	if !dialect.Marked(r.Token) {
		t.Fatalf("token %#x lost the error history mark", r.Token)
	}
	expire()
	r = step("a third claim of an expired reservation", 60, true, 6)
	if !dialect.Marked(r.Token) {
		t.Fatalf("token %#x lost the error history mark", r.Token)
	}
	inTx(r, false)
	step("a claim after a release in a transaction", 60, false, 7)
}
