package dialecttest

import (
	"testing"

	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// acquire takes l in a transaction that pushes a job on queue when it
// gets the lock, as PushUnique does, and returns the job's id (0 when the
// lock was refused) and the holder a refusal named.
func (s *suite) acquire(t *testing.T, queue string, l dialect.UniqueLock) (id, holder int64) {
	t.Helper()
	u := s.Dialect
	err := sqldb.InTx(s.ctx, s.DB, sqldb.TxOptions{}, func(tx sqldb.Tx) error {
		h, ok, err := u.AcquireUnique(s.ctx, tx, l)
		if err != nil || !ok {
			holder = h
			return err
		}
		ids, err := s.Dialect.Insert(s.ctx, tx, []dialect.PushRow{{Queue: queue, Payload: payload(queue, 0)}}, false)
		if err != nil {
			return err
		}
		id = ids[0]
		return u.SetUniqueJob(s.ctx, tx, l.Key, id)
	})
	if err != nil {
		t.Fatalf("acquire %s: %v", l.Key, err)
	}
	return id, holder
}

// A unique lock refuses a second job while its job is in the state its
// mode guards, names the holder, and is free once the job leaves that
// state or the lock expires.
func unique(t *testing.T, s *suite) {
	q := s.queue(t)
	finished := dialect.UniqueLock{Key: q + "-finished", Mode: dialect.UntilFinished}
	id, _ := s.acquire(t, q, finished)
	if id == 0 {
		t.Fatal("a free key was refused")
	}
	if again, holder := s.acquire(t, q, finished); again != 0 || holder != id {
		t.Fatalf("second push under a held key: job %d, holder %d; want refused, held by %d", again, holder, id)
	}
	c := s.claimOne(t, q)
	if again, _ := s.acquire(t, q, finished); again != 0 {
		t.Fatal("an UntilFinished lock ended when its job was claimed")
	}
	must[[]dialect.Key](t, "delete")(s.Dialect.DeleteHeld(s.ctx, s.DB, []dialect.Held{held(c)}))
	next, _ := s.acquire(t, q, finished)
	if next == 0 {
		t.Fatal("an UntilFinished lock outlived its job")
	}

	started := dialect.UniqueLock{Key: q + "-started", Mode: dialect.UntilStarted}
	q2 := s.queue(t)
	if id, _ := s.acquire(t, q2, started); id == 0 {
		t.Fatal("a free key was refused")
	}
	if again, _ := s.acquire(t, q2, started); again != 0 {
		t.Fatal("an UntilStarted lock let a second job in before the first started")
	}
	s.claimOne(t, q2)
	if again, _ := s.acquire(t, q2, started); again == 0 {
		t.Fatal("an UntilStarted lock outlived its job's start")
	}

	now := s.now(t)
	past, future := now-10, now+3600
	expiring := dialect.UniqueLock{Key: q + "-expired", Mode: dialect.UntilExpired, ExpiresAt: &future}
	if id, _ := s.acquire(t, q, expiring); id == 0 {
		t.Fatal("a free key was refused")
	}
	if again, _ := s.acquire(t, q, expiring); again != 0 {
		t.Fatal("an UntilExpired lock let a second job in before it expired")
	}
	s.exec(t, "UPDATE "+s.Dialect.Tables().UniqueTable()+" SET expires_at = ? WHERE lock_key = ?", past, expiring.Key)
	if again, _ := s.acquire(t, q, expiring); again == 0 {
		t.Fatal("an expired lock was not taken over")
	}
	// Pruning removes locks that hold nothing and keeps live ones.
	s.exec(t, "UPDATE "+s.Dialect.Tables().UniqueTable()+" SET expires_at = ? WHERE lock_key = ?", past, expiring.Key)
	if n := must[int64](t, "prune")(s.Dialect.PruneUnique(s.ctx, s.DB, 1000)); n < 1 {
		t.Fatalf("prune deleted %d locks, want at least the expired one", n)
	}
	if n := s.int(t, "SELECT COUNT(*) FROM "+s.Dialect.Tables().UniqueTable()+" WHERE lock_key = ?", expiring.Key); n != 0 {
		t.Fatal("prune kept an expired lock")
	}
	if again, _ := s.acquire(t, q, finished); again != 0 {
		t.Fatal("pruning freed a live UntilFinished lock")
	}
}

// Hits count in a window of the database's clock and start again once it
// passed; named locks go to one owner at a time and are taken over when
// expired.
func limitsAndLocks(t *testing.T, s *suite) {
	l := s.Dialect
	name := s.queue(t)
	for want := int64(1); want <= 3; want++ {
		hits, left := must2(t, "hit")(l.Hit(s.ctx, s.DB, name, 60))
		if hits != want || left < 1 || left > 60 {
			t.Fatalf("hit %d: hits %d left %d, want %d and 1..60 seconds", want, hits, left, want)
		}
	}
	if err := l.DropHit(s.ctx, s.DB, name, 2); err != nil {
		t.Fatal(err)
	}
	if hits, _ := must2(t, "hits")(l.Hits(s.ctx, s.DB, name, 60)); hits != 1 {
		t.Fatalf("after a hit dropped under a limit of 2: %d hits, want 1", hits)
	}
	s.exec(t, "UPDATE "+s.Dialect.Tables().JobsTable()+"_limits SET window_start = window_start - 61 WHERE name = ?", name)
	if hits, left := must2(t, "hits")(l.Hits(s.ctx, s.DB, name, 60)); hits != 0 || left != 0 {
		t.Fatalf("a passed window reads %d hits %d left, want 0, 0", hits, left)
	}
	if hits, _ := must2(t, "hit")(l.Hit(s.ctx, s.DB, name, 60)); hits != 1 {
		t.Fatalf("the first hit of a new window counts %d, want 1", hits)
	}
	if err := l.ClearHits(s.ctx, s.DB, name); err != nil {
		t.Fatal(err)
	}
	if hits, _ := must2(t, "hits")(l.Hits(s.ctx, s.DB, name, 60)); hits != 0 {
		t.Fatalf("cleared window reads %d hits", hits)
	}

	lock := name + "-lock"
	take := func(owner string, expire int64) bool {
		t.Helper()
		return must[bool](t, "take "+owner)(l.TakeLock(s.ctx, s.DB, lock, owner, expire))
	}
	if !take("a", 60) {
		t.Fatal("a free lock was refused")
	}
	if take("b", 60) {
		t.Fatal("a held lock went to a second owner")
	}
	if err := l.ExtendLock(s.ctx, s.DB, lock, "b", 600); err != nil {
		t.Fatal(err)
	}
	if ok := must[bool](t, "release")(l.ReleaseLock(s.ctx, s.DB, lock, "b")); ok {
		t.Fatal("a non-owner released the lock")
	}
	s.exec(t, "UPDATE "+s.Dialect.Tables().JobsTable()+"_locks SET expires_at = expires_at - 120 WHERE name = ?", lock)
	if !take("b", 60) {
		t.Fatal("an expired lock was not taken over")
	}
	if ok := must[bool](t, "release")(l.ReleaseLock(s.ctx, s.DB, lock, "a")); ok {
		t.Fatal("the owner whose lock was taken over released it")
	}
	if ok := must[bool](t, "release")(l.ReleaseLock(s.ctx, s.DB, lock, "b")); !ok {
		t.Fatal("the owner could not release its lock")
	}
	if !take("a", 60) {
		t.Fatal("a released lock was refused")
	}
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

func must2(t *testing.T, what string) func(a, b int64, err error) (int64, int64) {
	return func(a, b int64, err error) (int64, int64) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return a, b
	}
}
