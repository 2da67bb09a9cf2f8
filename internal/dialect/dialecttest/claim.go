package dialecttest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// A row another transaction has locked is skipped, not waited for: the
// claim returns the other rows at once (SKIP LOCKED).
func claimSkipsLockedRows(t *testing.T, s *suite) {
	if !s.RowLocks {
		t.Skip("the database locks whole, not rows: concurrent claims are covered by ConcurrentClaimsAreDisjoint")
	}
	q := s.queue(t)
	pushed := s.push(t, q, 3)
	tx, err := s.DB.Begin(s.ctx, sqldb.TxOptions{ReadCommitted: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	var locked int64
	if err := tx.QueryRow(s.ctx, s.Dialect.Rebind("SELECT id FROM "+s.jobs()+" WHERE id = ? FOR UPDATE"), pushed[0]).Scan(&locked); err != nil {
		t.Fatalf("lock row %d: %v", pushed[0], err)
	}
	// A claim that waits on the lock runs into this deadline.
	short, cancel := context.WithTimeout(s.ctx, 5*time.Second)
	defer cancel()
	rows, err := s.Dialect.Claim(short, s.DB, q, 3600, 3)
	if err != nil {
		t.Fatalf("claim beside a locked row: %v (a claim must skip locked rows, not wait)", err)
	}
	if got := ids(rows); !slices.Equal(got, pushed[1:]) {
		t.Fatalf("claim beside locked row %d took %v, want %v", pushed[0], got, pushed[1:])
	}
	if err := tx.Rollback(s.ctx); err != nil {
		t.Fatal(err)
	}
	if again := s.claimOne(t, q); again.ID != pushed[0] {
		t.Fatalf("after the lock ended the claim took %d, want %d", again.ID, pushed[0])
	}
}

// Claims racing on one queue each take rows no other claim took, and
// together take them all.
func concurrentClaimsAreDisjoint(t *testing.T, s *suite) {
	q := s.queue(t)
	pushed := s.push(t, q, 40)
	var (
		mu    sync.Mutex
		taken []int64
		wg    sync.WaitGroup
	)
	for range 4 {
		wg.Go(func() {
			for {
				var rows []dialect.JobRow
				err := sqldb.Retry(s.ctx, func() (err error) {
					rows, err = s.Dialect.Claim(s.ctx, s.DB, q, 3600, 3)
					return err
				})
				if err != nil {
					t.Errorf("claim: %v", err)
					return
				}
				if len(rows) == 0 {
					return
				}
				mu.Lock()
				taken = append(taken, ids(rows)...)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(taken)
	if !slices.Equal(taken, pushed) {
		t.Fatalf("four racing claims took %v, want each of %v once", taken, pushed)
	}
}

// A claim takes due rows in id order, leaves delayed and live reserved
// rows alone, and takes over a reservation older than retryAfter with a
// new token and one more attempt, never past MaxAttempts.
func claimReclaimsExpired(t *testing.T, s *suite) {
	q := s.queue(t)
	s.insert(t, []dialect.PushRow{{Queue: q, Payload: payload(q, 0), At: 3600}})
	pushed := s.push(t, q, 2)
	first := s.claim(t, q, 60, 1)
	if len(first) != 1 || first[0].ID != pushed[0] || first[0].Attempts != 1 || !first[0].Reserved {
		t.Fatalf("first claim %+v, want row %d with attempt 1, reserved", first, pushed[0])
	}
	if got := s.claim(t, q, 60, 5); len(got) != 1 || got[0].ID != pushed[1] {
		t.Fatalf("second claim took %v, want only %d (the delayed row and the live reservation stay)", ids(got), pushed[1])
	}
	if got := s.claim(t, q, 60, 5); len(got) != 0 {
		t.Fatalf("a claim with nothing due took %v", ids(got))
	}
	// The holder of the first row died two minutes ago.
	s.exec(t, "UPDATE "+s.jobs()+" SET reserved_at = reserved_at - 120 WHERE id = ?", pushed[0])
	if got := s.claim(t, q, 600, 5); len(got) != 0 {
		t.Fatalf("a reservation younger than retryAfter was taken over: %v", ids(got))
	}
	again := s.claim(t, q, 60, 5)
	if len(again) != 1 || again[0].ID != pushed[0] {
		t.Fatalf("reclaim took %v, want %d", ids(again), pushed[0])
	}
	if again[0].Attempts != 2 || again[0].Token == first[0].Token {
		t.Fatalf("reclaimed row: attempts %d token %d, want 2 and a token other than %d", again[0].Attempts, again[0].Token, first[0].Token)
	}
	if now := s.now(t); again[0].ReservedAt < now-5 || again[0].ReservedAt > now {
		t.Fatalf("reclaimed row reserved at %d, want the database's now (%d)", again[0].ReservedAt, now)
	}
	// attempts is an integer column: a claim never counts past its top.
	s.exec(t, "UPDATE "+s.jobs()+" SET reserved_at = NULL, attempts = ? WHERE id = ?", dialect.MaxAttempts, pushed[1])
	if top := s.claimOne(t, q); top.ID != pushed[1] || top.Attempts != dialect.MaxAttempts {
		t.Fatalf("claim at MaxAttempts: %+v, want row %d with %d attempts", top, pushed[1], dialect.MaxAttempts)
	}
}

// Delete, release, give-back and fail act only on the reservation still
// held: one taken over by another claim (new token, same attempts after a
// give-back) is left alone, and the result says so.
func finishesCheckTheToken(t *testing.T, s *suite) {
	q := s.queue(t)
	pushed := s.push(t, q, 3)
	c1 := s.claimOne(t, q)
	if ok := must[bool](t, "give back")(s.Dialect.GiveBack(s.ctx, s.DB, held(c1))); !ok {
		t.Fatal("give-back of a held row reported it not held")
	}
	c2 := s.claimOne(t, q)
	if c2.ID != c1.ID || c2.Attempts != c1.Attempts || c2.Token == c1.Token {
		t.Fatalf("after a give-back the claim took %+v; want row %d again with attempts %d and a new token", c2, c1.ID, c1.Attempts)
	}
	stale := held(c1) // same id and attempts as c2: only the token tells them apart
	if got := must[[]dialect.Key](t, "delete stale")(s.Dialect.DeleteHeld(s.ctx, s.DB, []dialect.Held{stale})); len(got) != 0 {
		t.Fatalf("a stale delete deleted %v", got)
	}
	if got := must[map[dialect.Key]bool](t, "release stale")(s.Dialect.ReleaseHeld(s.ctx, s.DB, []dialect.Release{{Held: stale}})); len(got) != 0 {
		t.Fatalf("a stale release released %v", got)
	}
	if ok := must[bool](t, "give back stale")(s.Dialect.GiveBack(s.ctx, s.DB, stale)); ok {
		t.Fatal("a stale give-back reported the row held")
	}
	f := dialect.Failure{UUID: q + "-stale", Connection: "database", Queue: q, Payload: c1.Payload, Exception: "stale"}
	if ok := must[bool](t, "fail stale")(s.Dialect.FailMove(s.ctx, s.DB, stale, f)); ok {
		t.Fatal("a stale fail reported the row held")
	}
	if n := s.int(t, "SELECT COUNT(*) FROM "+s.Dialect.Tables().FailedTable()+" WHERE uuid = ?", f.UUID); n != 0 {
		t.Fatalf("a stale fail wrote %d failed rows", n)
	}
	if tok := s.int(t, "SELECT reservation_token FROM "+s.jobs()+" WHERE id = ? AND reserved_at IS NOT NULL", c1.ID); tok != c2.Token {
		t.Fatalf("after the stale finishes the row holds token %d, want the holder's %d", tok, c2.Token)
	}

	// The holder's own finishes act, and a batch acts on its held rows only.
	rest := s.claim(t, q, 3600, 2)
	if len(rest) != 2 {
		t.Fatalf("claimed %d of the other rows, want 2", len(rest))
	}
	released := must[map[dialect.Key]bool](t, "release")(s.Dialect.ReleaseHeld(s.ctx, s.DB, []dialect.Release{
		{Held: held(c2), Payload: []byte(`{"uuid":"released"}`)}, {Held: stale},
	}))
	if len(released) != 1 || !released[held(c2).Key()] {
		t.Fatalf("release of the holder's row and a stale one released %v, want only %v", released, held(c2).Key())
	}
	c3 := s.claimOne(t, q)
	if c3.ID != c1.ID || string(c3.Payload) != `{"uuid":"released"}` || c3.Attempts != c2.Attempts+1 {
		t.Fatalf("after a release with a new payload the claim took %+v", c3)
	}
	deleted := must[[]dialect.Key](t, "delete")(s.Dialect.DeleteHeld(s.ctx, s.DB, []dialect.Held{held(rest[0]), stale, held(rest[1])}))
	slices.SortFunc(deleted, func(a, b dialect.Key) int { return int(a.ID - b.ID) })
	if want := []dialect.Key{held(rest[0]).Key(), held(rest[1]).Key()}; !slices.Equal(deleted, want) {
		t.Fatalf("delete of two held rows and a stale one deleted %v, want %v", deleted, want)
	}
	f.UUID, f.Exception = q+"-held", "boom"
	if ok := must[bool](t, "fail")(s.Dialect.FailMove(s.ctx, s.DB, held(c3), f)); !ok {
		t.Fatal("the holder's fail reported the row not held")
	}
	if done := must[bool](t, "failed already")(s.Dialect.FailedAlready(s.ctx, s.DB, c3.ID, f)); !done {
		t.Fatal("FailedAlready does not see a committed FailMove")
	}
	if n := s.int(t, "SELECT COUNT(*) FROM "+s.jobs()+" WHERE queue = ?", q); n != 0 {
		t.Fatalf("%d rows left of %v", n, pushed)
	}
}

// Insert returns the ids the database gave, in row order, whatever the
// auto-increment step and offset (MySQL auto_increment_increment, a
// PostgreSQL sequence's INCREMENT BY): each id reads back its own payload.
func insertIDsAnyStep(t *testing.T, s *suite) {
	q1, q2 := s.queue(t), s.queue(t)
	var rows []dialect.PushRow
	for i := range 25 {
		q := q1
		if i%3 == 0 {
			q = q2
		}
		r := dialect.PushRow{Queue: q, Payload: payload(q, i)}
		if i%5 == 0 {
			r.At = 3600
		}
		if i == 7 {
			r.Payload = []byte(`{"uuid":"quote ' and backslash \\ and é"}`)
		}
		rows = append(rows, r)
	}
	check := func(ids []int64, rows []dialect.PushRow) {
		t.Helper()
		for i, id := range ids {
			if i > 0 && id <= ids[i-1] {
				t.Fatalf("ids %v are not increasing", ids)
			}
			if got := s.text(t, "SELECT payload FROM "+s.jobs()+" WHERE id = ?", id); got != string(rows[i].Payload) {
				t.Fatalf("row %d of the insert got id %d, which holds %s; want %s (ids %v)", i, id, got, rows[i].Payload, ids)
			}
		}
	}
	check(s.insert(t, rows), rows)
	one := rows[3:4]
	check(s.insert(t, one), one)
	// Inside a caller's transaction too.
	tx, err := s.DB.Begin(s.ctx, sqldb.TxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	inTx, err := s.Dialect.Insert(s.ctx, tx, rows[:4], false)
	if err != nil {
		tx.Rollback(context.Background())
		t.Fatalf("insert in a transaction: %v", err)
	}
	if err := tx.Commit(s.ctx); err != nil {
		t.Fatal(err)
	}
	check(inTx, rows[:4])
}

// Every time the dialect writes or reads is the database's clock in Unix
// seconds (UTC): created_at and available_at of a push, Sizes' now, and a
// delay counted from it.
func databaseClock(t *testing.T, s *suite) {
	q := s.queue(t)
	before := s.now(t)
	if wall := time.Now().Unix(); before < wall-60 || before > wall+60 {
		t.Fatalf("the dialect's now is %d, the host's Unix time %d: Now must be Unix seconds", before, wall)
	}
	if dbNow := must[int64](t, "DBNow")(s.Dialect.DBNow(s.ctx, s.DB)); dbNow < before || dbNow > before+5 {
		t.Fatalf("DBNow %d, want the database's now %d", dbNow, before)
	}
	at := before + 7200
	ids := s.insert(t, []dialect.PushRow{
		{Queue: q, Payload: payload(q, 0)},
		{Queue: q, Payload: payload(q, 1), At: 30},
		{Queue: q, Payload: payload(q, 2), Absolute: true, At: at},
	})
	after := s.now(t)
	for i, want := range []struct{ lo, hi int64 }{{before, after}, {before + 30, after + 30}, {at, at}} {
		created := s.int(t, "SELECT created_at FROM "+s.jobs()+" WHERE id = ?", ids[i])
		avail := s.int(t, "SELECT available_at FROM "+s.jobs()+" WHERE id = ?", ids[i])
		if created < before || created > after || avail < want.lo || avail > want.hi {
			t.Fatalf("row %d: created_at %d available_at %d, want created in [%d, %d] and available in [%d, %d]", i, created, avail, before, after, want.lo, want.hi)
		}
	}
	sz := must[dialect.Sizes](t, "sizes")(s.Dialect.Sizes(s.ctx, s.DB, q))
	if sz.Pending != 1 || sz.Delayed != 2 || sz.Reserved != 0 || sz.Now < before || sz.Now > s.now(t) {
		t.Fatalf("sizes %+v, want 1 pending, 2 delayed, now in [%d, now]", sz, before)
	}
	if sz.OldestPending == nil || *sz.OldestPending < before || *sz.OldestPending > after {
		t.Fatalf("oldest pending %v, want the push's time", sz.OldestPending)
	}
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
