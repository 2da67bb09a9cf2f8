package dialecttest

import (
	"slices"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// uniquerTests are Uniquer's.
var uniquerTests = []test{
	{method: "AcquireUnique", fn: unique},
	{method: "SetUniqueJob", fn: setUniqueJob},
	{method: "PruneUnique", fn: pruneUnique},
	{method: "DBNow", fn: uniquerDBNow},
	{method: "RetryUnique", fn: retryUnique},
}

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

// SetUniqueJob records the job that holds a key, which a second push then
// names; a key that is not held fails.
func setUniqueJob(t *testing.T, s *suite) {
	u := s.Dialect
	q := s.queue(t)
	l := dialect.UniqueLock{Key: q + "-key", Mode: dialect.UntilFinished}
	id, _ := s.acquire(t, q, l)
	if got := s.int(t, "SELECT job_id FROM "+s.Dialect.Tables().UniqueTable()+" WHERE lock_key = ?", l.Key); got != id {
		t.Fatalf("the lock records job %d, want %d", got, id)
	}
	if _, holder := s.acquire(t, q, l); holder != id {
		t.Fatalf("a second push names holder %d, want %d", holder, id)
	}
	if err := u.SetUniqueJob(s.ctx, s.DB, q+"-no-such-key", id); err == nil {
		t.Fatal("SetUniqueJob of a key nobody holds did not fail")
	}
}

// PruneUnique deletes up to limit locks that hold nothing (job gone,
// started for UntilStarted, expired) and keeps live and tick locks (own
// tables: it prunes the whole table).
func pruneUnique(t *testing.T, s *suite) {
	o := s.own(t)
	u := o.Dialect
	q := o.queue(t)
	now := o.now(t)
	past, future := now-10, now+3600
	live, _ := o.acquire(t, q, dialect.UniqueLock{Key: q + "-live", Mode: dialect.UntilFinished})
	gone, _ := o.acquire(t, q, dialect.UniqueLock{Key: q + "-gone", Mode: dialect.UntilFinished})
	o.exec(t, "DELETE FROM "+o.jobs()+" WHERE id = ?", gone) // as Laravel's worker deletes it
	q2 := o.queue(t)
	o.acquire(t, q2, dialect.UniqueLock{Key: q + "-started", Mode: dialect.UntilStarted})
	o.claimOne(t, q2)
	o.acquire(t, q, dialect.UniqueLock{Key: q + "-expired", Mode: dialect.UntilExpired, ExpiresAt: &future})
	o.exec(t, "UPDATE "+o.Dialect.Tables().UniqueTable()+" SET expires_at = ? WHERE lock_key = ?", past, q+"-expired")
	o.acquire(t, q, dialect.UniqueLock{Key: q + "-until", Mode: dialect.UntilExpired, ExpiresAt: &future})
	tick := o.Dialect
	o.inTx(t, sqldb.TxOptions{}, func(tx sqldb.Tx) error {
		_, _, err := tick.AcquireTickLock(o.ctx, tx, dialect.UniqueLock{Key: q + "-tick", Mode: dialect.UntilTick, ExpiresAt: &past, StaleAt: &past})
		return err
	})
	if n := must[int64](t, "prune")(u.PruneUnique(o.ctx, o.DB, 2)); n != 2 {
		t.Fatalf("prune with limit 2 deleted %d", n)
	}
	if n := must[int64](t, "prune")(u.PruneUnique(o.ctx, o.DB, 100)); n != 1 {
		t.Fatalf("the second prune deleted %d, want the last of 3 stale locks", n)
	}
	var left []string
	for _, k := range []string{"-live", "-gone", "-started", "-expired", "-until", "-tick"} {
		if o.int(t, "SELECT COUNT(*) FROM "+o.Dialect.Tables().UniqueTable()+" WHERE lock_key = ?", q+k) == 1 {
			left = append(left, k)
		}
	}
	if want := []string{"-live", "-until", "-tick"}; !slices.Equal(left, want) {
		t.Fatalf("locks left %q, want %q", left, want)
	}
	if again, holder := o.acquire(t, q, dialect.UniqueLock{Key: q + "-live", Mode: dialect.UntilFinished}); again != 0 || holder != live {
		t.Fatalf("after a prune the live lock lets job %d in (holder %d), want held by %d", again, holder, live)
	}
}

// DBNow is the database's clock in Unix seconds.
func uniquerDBNow(t *testing.T, s *suite) {
	before := s.now(t)
	now := must[int64](t, "DBNow")(s.Dialect.DBNow(s.ctx, s.DB))
	if now < before || now > s.now(t) {
		t.Fatalf("DBNow %d, want the database's now (%d)", now, before)
	}
	if wall := time.Now().Unix(); now < wall-60 || now > wall+60 {
		t.Fatalf("DBNow %d, the host's Unix time %d: want Unix seconds", now, wall)
	}
}

// RetryUnique moves a locked failed row back into jobs, due now, and
// takes its lock for the new job, unless a live job holds it: then the
// job goes back without the lock.
func retryUnique(t *testing.T, s *suite) {
	u := s.Dialect
	q := s.queue(t)
	retry := func(uuid string, l dialect.UniqueLock) bool {
		t.Helper()
		var locked bool
		s.inTx(t, s.Dialect.FailedTxOptions(), func(tx sqldb.Tx) error {
			rows, err := s.Dialect.LockFailed(s.ctx, tx, dialect.FailedFilter{UUIDs: []string{uuid}})
			if err != nil {
				return err
			}
			if len(rows) != 1 {
				t.Fatalf("locked %d failed rows of %s, want 1", len(rows), uuid)
			}
			locked, err = u.RetryUnique(s.ctx, tx, rows[0], l)
			return err
		})
		return locked
	}
	free := dialect.UniqueLock{Key: q + "-free", Mode: dialect.UntilFinished}
	f := s.failed(t, q, q+"-0")
	if !retry(f.UUID, free) {
		t.Fatal("a retry under a free key did not take it")
	}
	back := s.claimOne(t, q)
	if string(back.Payload) != string(f.Payload) || back.Attempts != 1 {
		t.Fatalf("the retried job came back as %+v", back)
	}
	if n := s.int(t, "SELECT COUNT(*) FROM "+s.Dialect.Tables().FailedTable()+" WHERE uuid = ?", f.UUID); n != 0 {
		t.Fatal("a retried job stayed in failed_jobs")
	}
	if again, holder := s.acquire(t, q, free); again != 0 || holder != back.ID {
		t.Fatalf("a push under the retried job's key: job %d holder %d, want refused, held by %d", again, holder, back.ID)
	}
	q2 := s.queue(t)
	taken := dialect.UniqueLock{Key: q + "-taken", Mode: dialect.UntilFinished}
	holder, _ := s.acquire(t, q2, taken)
	g := s.failed(t, q, q+"-1")
	if retry(g.UUID, taken) {
		t.Fatal("a retry took a key a live job holds")
	}
	if again := s.claimOne(t, q); string(again.Payload) != string(g.Payload) {
		t.Fatalf("a retry under a held key did not bring the job back: claimed %+v", again)
	}
	if _, h := s.acquire(t, q2, taken); h != holder {
		t.Fatalf("the key is held by %d after the retry, want %d", h, holder)
	}
}
