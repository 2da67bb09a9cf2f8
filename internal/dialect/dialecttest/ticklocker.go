package dialecttest

import (
	"slices"
	"testing"

	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// tickLockerTests are TickLocker's.
var tickLockerTests = []test{
	{method: "AcquireTickLock", fn: tickLocks},
	{method: "PruneTickLocks", fn: pruneTickLocks},
}

// A periodic tick's lock is taken once per tick: the same tick again is
// refused, the next one takes it over.
func tickLocks(t *testing.T, s *suite) {
	tl := s.Dialect
	key := s.queue(t)
	now := s.now(t)
	tick := func(at int64) bool {
		t.Helper()
		next, stale := at+60, at
		var ok bool
		err := sqldb.InTx(s.ctx, s.DB, sqldb.TxOptions{}, func(tx sqldb.Tx) (err error) {
			_, ok, err = tl.AcquireTickLock(s.ctx, tx, dialect.UniqueLock{Key: key, Mode: dialect.UntilTick, ExpiresAt: &next, StaleAt: &stale})
			return err
		})
		if err != nil {
			t.Fatalf("tick %d: %v", at, err)
		}
		return ok
	}
	if !tick(now) {
		t.Fatal("the first tick was refused")
	}
	if tick(now) {
		t.Fatal("the same tick was taken twice")
	}
	if tick(now - 60) {
		t.Fatal("an earlier tick took a later tick's lock")
	}
	if !tick(now + 60) {
		t.Fatal("the next tick was refused")
	}
}

// PruneTickLocks deletes up to limit tick locks more than grace behind
// the clock and expired UntilExpired locks, and keeps the rest (own
// tables: it prunes the whole table).
func pruneTickLocks(t *testing.T, s *suite) {
	o := s.own(t)
	tl := o.Dialect
	now := o.now(t)
	key := o.queue(t)
	lock := func(k string, mode int, expires int64) {
		t.Helper()
		stale := expires
		o.inTx(t, sqldb.TxOptions{}, func(tx sqldb.Tx) error {
			_, ok, err := tl.AcquireTickLock(o.ctx, tx, dialect.UniqueLock{Key: k, Mode: mode, ExpiresAt: &expires, StaleAt: &stale})
			if err == nil && !ok {
				t.Errorf("lock %s refused", k)
			}
			return err
		})
	}
	lock(key+"-old-tick", dialect.UntilTick, now-7200)
	lock(key+"-old-tick-2", dialect.UntilTick, now-7300)
	lock(key+"-recent-tick", dialect.UntilTick, now-60)
	lock(key+"-expired", dialect.UntilExpired, now-1)
	lock(key+"-live", dialect.UntilExpired, now+3600)
	if n := must[int64](t, "prune")(tl.PruneTickLocks(o.ctx, o.DB, 3600, 2)); n != 2 {
		t.Fatalf("prune with limit 2 deleted %d", n)
	}
	if n := must[int64](t, "prune")(tl.PruneTickLocks(o.ctx, o.DB, 3600, 100)); n != 1 {
		t.Fatalf("the second prune deleted %d, want the last of the 3", n)
	}
	var left []string
	for _, k := range []string{"-old-tick", "-old-tick-2", "-recent-tick", "-expired", "-live"} {
		if o.int(t, "SELECT COUNT(*) FROM "+o.Dialect.Tables().UniqueTable()+" WHERE lock_key = ?", key+k) == 1 {
			left = append(left, k)
		}
	}
	if want := []string{"-recent-tick", "-live"}; !slices.Equal(left, want) {
		t.Fatalf("locks left %q, want %q", left, want)
	}
}
