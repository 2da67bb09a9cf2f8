package dialecttest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// skipDeleterTests are SkipDeleter's (optional: a dialect without it
// deletes waiting, with DeleteHeld).
var skipDeleterTests = []test{
	{method: "DeleteHeldSkipping", fn: deleteHeldSkipping},
}

// DeleteHeldSkipping deletes the held rows no other transaction has
// locked, with their error history, and returns their keys; a held row
// another transaction has locked is not waited for and comes back busy,
// neither deleted nor gone, and a later call deletes it once the lock is
// released; a reservation no longer held is in neither list.
func deleteHeldSkipping(t *testing.T, s *suite) {
	d := s.Dialect.(dialect.SkipDeleter)
	if deleted, busy, err := d.DeleteHeldSkipping(s.ctx, s.DB, nil); err != nil || len(deleted)+len(busy) != 0 {
		t.Fatalf("DeleteHeldSkipping of nothing: %v, %v, %v", deleted, busy, err)
	}
	q := s.queue(t)
	s.push(t, q, 3)
	rows := s.claim(t, q, 3600, 3)
	if len(rows) != 3 {
		t.Fatalf("claimed %d rows, want 3", len(rows))
	}
	rows[0] = s.releaseWithError(t, rows[0], "first attempt")
	free, locked := held(rows[0]), held(rows[1])
	stale := held(rows[2])
	stale.Token--

	tx, err := s.DB.Begin(s.ctx, sqldb.TxOptions{ReadCommitted: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	var id int64
	if err := tx.QueryRow(s.ctx, s.Dialect.Rebind("SELECT id FROM "+s.jobs()+" WHERE id = ? FOR UPDATE"), locked.ID).Scan(&id); err != nil {
		t.Fatalf("lock row %d: %v", locked.ID, err)
	}
	// A delete that waits on the lock runs into this deadline.
	short, cancel := context.WithTimeout(s.ctx, 5*time.Second)
	defer cancel()
	deleted, busy, err := d.DeleteHeldSkipping(short, s.DB, []dialect.Held{free, locked, stale})
	if err != nil {
		t.Fatalf("delete beside a locked row: %v (it must skip the locked row, not wait)", err)
	}
	if want := []dialect.Key{free.Key()}; !slices.Equal(deleted, want) {
		t.Fatalf("deleted %v, want only the unlocked held row %v", deleted, want)
	}
	if want := []dialect.Key{locked.Key()}; !slices.Equal(busy, want) {
		t.Fatalf("busy %v, want the locked held row %v (the stale reservation %v is neither)", busy, want, stale.Key())
	}
	if n := s.int(t, "SELECT COUNT(*) FROM "+s.jobs()+" WHERE queue = ?", q); n != 2 {
		t.Fatalf("%d rows left, want the locked one and the one held by another reservation", n)
	}
	if errs := must[[]dialect.AttemptError](t, "job errors")(s.history(t).JobErrors(s.ctx, s.DB, free.ID)); len(errs) != 0 {
		t.Fatalf("a deleted row's history stayed: %+v", errs)
	}
	if err := tx.Rollback(s.ctx); err != nil {
		t.Fatal(err)
	}
	deleted, busy, err = d.DeleteHeldSkipping(s.ctx, s.DB, []dialect.Held{locked, stale})
	if err != nil {
		t.Fatal(err)
	}
	if want := []dialect.Key{locked.Key()}; !slices.Equal(deleted, want) || len(busy) != 0 {
		t.Fatalf("once the lock went: deleted %v, busy %v; want %v deleted, none busy", deleted, busy, want)
	}
	if n := s.int(t, "SELECT COUNT(*) FROM "+s.jobs()+" WHERE queue = ?", q); n != 1 {
		t.Fatalf("%d rows left, want the one held by another reservation", n)
	}
}
