package dialecttest

import (
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// limitsTests are Limits'.
var limitsTests = []test{
	{method: "Hit", fn: limitsAndLocks},
	{method: "Hit", name: "Concurrent", fn: concurrentHits},
	{method: "Hits", fn: hits},
	{method: "ClearHits", fn: clearHits},
	{method: "HitBy", fn: hitBy},
	{method: "EndRun", fn: endRun},
	{method: "TakeLock", fn: takeLock},
	{method: "ExtendLock", fn: extendLock},
	{method: "ReleaseLock", fn: releaseLock},
	{method: "PruneLimits", fn: pruneLimits},
}

func (s *suite) limits(t *testing.T) dialect.Limits {
	t.Helper()
	return s.Dialect
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
	if err := l.EndRun(s.ctx, s.DB, name, true, false, false); err != nil {
		t.Fatal(err)
	}
	if hits, _ := must2(t, "hits")(l.Hits(s.ctx, s.DB, name, 60)); hits != 2 {
		t.Fatalf("after a run's place was taken back: %d hits, want 2", hits)
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

// Hits racing on one name are each counted once, in one window.
func concurrentHits(t *testing.T, s *suite) {
	l := s.limits(t)
	name := s.queue(t)
	var (
		mu   sync.Mutex
		seen []int64
		wg   sync.WaitGroup
	)
	for range 8 {
		wg.Go(func() {
			var hits int64
			err := sqldb.Retry(s.ctx, func() (err error) {
				hits, _, err = l.Hit(s.ctx, s.DB, name, 3600)
				return err
			})
			if err != nil {
				t.Errorf("hit: %v", err)
				return
			}
			mu.Lock()
			seen = append(seen, hits)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.Sort(seen)
	if want := []int64{1, 2, 3, 4, 5, 6, 7, 8}; !slices.Equal(seen, want) {
		t.Fatalf("8 racing hits counted %v, want %v", seen, want)
	}
}

// Hits reads the current window without counting, and 0, 0 for none.
func hits(t *testing.T, s *suite) {
	l := s.limits(t)
	name := s.queue(t)
	if h, left := must2(t, "hits of none")(l.Hits(s.ctx, s.DB, name, 60)); h != 0 || left != 0 {
		t.Fatalf("a name never hit reads %d hits, %d left", h, left)
	}
	must2(t, "hit")(l.Hit(s.ctx, s.DB, name, 60))
	must2(t, "hit")(l.Hit(s.ctx, s.DB, name, 60))
	for range 2 {
		if h, left := must2(t, "hits")(l.Hits(s.ctx, s.DB, name, 60)); h != 2 || left < 1 || left > 60 {
			t.Fatalf("hits reads %d hits, %d left; want 2 (reading counts nothing) and 1..60", h, left)
		}
	}
	// A window of 60 s opened 30 s ago is still current for per 60, and
	// has passed for per 20.
	s.exec(t, "UPDATE "+s.Dialect.Tables().JobsTable()+"_limits SET window_start = window_start - 30 WHERE name = ?", name)
	if h, left := must2(t, "hits")(l.Hits(s.ctx, s.DB, name, 60)); h != 2 || left > 30 || left < 1 {
		t.Fatalf("a window opened 30 s ago reads %d hits, %d left; want 2, at most 30", h, left)
	}
	if h, left := must2(t, "hits")(l.Hits(s.ctx, s.DB, name, 20)); h != 0 || left != 0 {
		t.Fatalf("a 20 s window opened 30 s ago reads %d hits, %d left; want 0, 0", h, left)
	}
}

// ClearHits forgets one name's window and no other's.
func clearHits(t *testing.T, s *suite) {
	l := s.limits(t)
	a, b := s.queue(t), s.queue(t)
	must2(t, "hit")(l.Hit(s.ctx, s.DB, a, 60))
	must2(t, "hit")(l.Hit(s.ctx, s.DB, b, 60))
	if err := l.ClearHits(s.ctx, s.DB, a); err != nil {
		t.Fatal(err)
	}
	if h, _ := must2(t, "hits")(l.Hits(s.ctx, s.DB, a, 60)); h != 0 {
		t.Fatalf("a cleared name reads %d hits", h)
	}
	if h, _ := must2(t, "hits")(l.Hits(s.ctx, s.DB, b, 60)); h != 1 {
		t.Fatalf("clearing another name left %d hits, want 1", h)
	}
	if h, _ := must2(t, "hit")(l.Hit(s.ctx, s.DB, a, 60)); h != 1 {
		t.Fatalf("the first hit after a clear counts %d", h)
	}
}

// HitBy counts n hits at once, in the window Hit uses: an exception
// counted after its window (ThrottleUnit) is one HitBy.
func hitBy(t *testing.T, s *suite) {
	l := s.limits(t)
	name := s.queue(t)
	unit := dialect.ThrottleUnit
	if hits, left := must2(t, "hit by")(l.HitBy(s.ctx, s.DB, name, 60, unit)); hits != unit || left < 1 || left > 60 {
		t.Fatalf("HitBy(%d) counts %d, %d s left", unit, hits, left)
	}
	if hits, _ := must2(t, "hit")(l.Hit(s.ctx, s.DB, name, 60)); hits != unit+1 {
		t.Fatalf("a Hit after HitBy(%d) counts %d", unit, hits)
	}
	if hits, _ := must2(t, "hit by")(l.HitBy(s.ctx, s.DB, name, 60, 3)); hits != unit+4 {
		t.Fatalf("HitBy(3) counts %d, want %d", hits, unit+4)
	}
}

// EndRun ends one run counted on a throttle row: three runs under way; one
// ends in an exception, one succeeds (the exceptions forgotten, the third
// run's place kept), the third ends without an exception, and the row
// holding nothing goes. A place taken back with no run under way leaves
// the exceptions alone.
func endRun(t *testing.T, s *suite) {
	l := s.limits(t)
	name := s.queue(t)
	for range 3 {
		must2(t, "hit")(l.Hit(s.ctx, s.DB, name, 60))
	}
	const unit = dialect.ThrottleUnit
	for _, step := range []struct {
		place, exception, clear bool
		want                    int64
	}{
		{true, true, false, 2 + unit},
		{true, false, true, 1},
		{true, false, false, 0},
	} {
		if err := l.EndRun(s.ctx, s.DB, name, step.place, step.exception, step.clear); err != nil {
			t.Fatal(err)
		}
		if hits, _ := must2(t, "hits")(l.Hits(s.ctx, s.DB, name, 60)); hits != step.want {
			t.Fatalf("after EndRun(place %v, exception %v, clear %v): %d hits, want %d", step.place, step.exception, step.clear, hits, step.want)
		}
	}
	if n := s.int(t, "SELECT COUNT(*) FROM "+s.Dialect.Tables().JobsTable()+"_limits WHERE name = ?", name); n != 0 {
		t.Fatalf("a throttle row holding nothing was kept (%d rows)", n)
	}
	if hits, _ := must2(t, "hit by")(l.HitBy(s.ctx, s.DB, name, 60, unit)); hits != unit {
		t.Fatalf("HitBy(%d) counts %d", unit, hits)
	}
	if err := l.EndRun(s.ctx, s.DB, name, true, false, false); err != nil {
		t.Fatal(err)
	}
	if hits, _ := must2(t, "hits")(l.Hits(s.ctx, s.DB, name, 60)); hits != unit {
		t.Fatalf("a place taken back with no run under way: %d hits, want %d", hits, unit)
	}
}

func (s *suite) lockExpiry(t *testing.T, name string) int64 {
	t.Helper()
	return s.int(t, "SELECT expires_at FROM "+s.Dialect.Tables().JobsTable()+"_locks WHERE name = ?", name)
}

// TakeLock goes to one of racing owners, until now + expire.
func takeLock(t *testing.T, s *suite) {
	l := s.limits(t)
	name := s.queue(t)
	var (
		won atomic.Int64
		wg  sync.WaitGroup
	)
	before := s.now(t)
	for i := range 6 {
		wg.Go(func() {
			var ok bool
			err := sqldb.Retry(s.ctx, func() (err error) {
				ok, err = l.TakeLock(s.ctx, s.DB, name, "owner-"+strconv.Itoa(i), 60)
				return err
			})
			if err != nil {
				t.Errorf("take: %v", err)
			}
			if ok {
				won.Add(1)
			}
		})
	}
	wg.Wait()
	if n := won.Load(); n != 1 {
		t.Fatalf("%d of 6 racing owners took the lock, want 1", n)
	}
	if at := s.lockExpiry(t, name); at < before+60 || at > s.now(t)+60 {
		t.Fatalf("the lock expires at %d, want now + 60 (%d)", at, before+60)
	}
}

// ExtendLock moves the owner's lock to now + expire, and does nothing for
// another owner.
func extendLock(t *testing.T, s *suite) {
	l := s.limits(t)
	name := s.queue(t)
	if !must[bool](t, "take")(l.TakeLock(s.ctx, s.DB, name, "a", 60)) {
		t.Fatal("a free lock was refused")
	}
	first := s.lockExpiry(t, name)
	if err := l.ExtendLock(s.ctx, s.DB, name, "b", 6000); err != nil {
		t.Fatal(err)
	}
	if at := s.lockExpiry(t, name); at != first {
		t.Fatalf("another owner's extend moved the lock from %d to %d", first, at)
	}
	before := s.now(t)
	if err := l.ExtendLock(s.ctx, s.DB, name, "a", 600); err != nil {
		t.Fatal(err)
	}
	if at := s.lockExpiry(t, name); at < before+600 || at > s.now(t)+600 {
		t.Fatalf("the owner's extend by 600 left the lock expiring at %d, want %d", at, before+600)
	}
}

// ReleaseLock lets go of the owner's lock only, and says whether it did.
func releaseLock(t *testing.T, s *suite) {
	l := s.limits(t)
	name := s.queue(t)
	if !must[bool](t, "take")(l.TakeLock(s.ctx, s.DB, name, "a", 60)) {
		t.Fatal("a free lock was refused")
	}
	if must[bool](t, "release by b")(l.ReleaseLock(s.ctx, s.DB, name, "b")) {
		t.Fatal("a non-owner released the lock")
	}
	if !must[bool](t, "release by a")(l.ReleaseLock(s.ctx, s.DB, name, "a")) {
		t.Fatal("the owner could not release its lock")
	}
	if must[bool](t, "release again")(l.ReleaseLock(s.ctx, s.DB, name, "a")) {
		t.Fatal("a released lock was released again")
	}
	if !must[bool](t, "take by b")(l.TakeLock(s.ctx, s.DB, name, "b", 60)) {
		t.Fatal("a released lock was refused")
	}
}

// PruneLimits deletes windows opened more than age ago and expired locks,
// says how many, and keeps the rest (own tables: it prunes whole tables).
func pruneLimits(t *testing.T, s *suite) {
	o := s.own(t)
	l := o.limits(t)
	oldWin, newWin, oldLock, liveLock := o.queue(t), o.queue(t), o.queue(t), o.queue(t)
	must2(t, "hit")(l.Hit(o.ctx, o.DB, oldWin, 60))
	must2(t, "hit")(l.Hit(o.ctx, o.DB, newWin, 60))
	for _, n := range []string{oldLock, liveLock} {
		if !must[bool](t, "take")(l.TakeLock(o.ctx, o.DB, n, "a", 60)) {
			t.Fatal("a free lock was refused")
		}
	}
	o.exec(t, "UPDATE "+o.Dialect.Tables().JobsTable()+"_limits SET window_start = window_start - 7200 WHERE name = ?", oldWin)
	o.exec(t, "UPDATE "+o.Dialect.Tables().JobsTable()+"_locks SET expires_at = expires_at - 120 WHERE name = ?", oldLock)
	if n := must[int64](t, "prune")(l.PruneLimits(o.ctx, o.DB, 3600)); n != 2 {
		t.Fatalf("prune deleted %d rows, want the old window and the expired lock", n)
	}
	if n := o.int(t, "SELECT COUNT(*) FROM "+o.Dialect.Tables().JobsTable()+"_limits WHERE name = ?", newWin); n != 1 {
		t.Fatal("prune deleted a current window")
	}
	if n := o.int(t, "SELECT COUNT(*) FROM "+o.Dialect.Tables().JobsTable()+"_locks WHERE name = ?", liveLock); n != 1 {
		t.Fatal("prune deleted a live lock")
	}
}
