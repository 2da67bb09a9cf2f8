package dialecttest

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// dialectTests are Dialect's: one or more per method.
var dialectTests = []test{
	{method: "Name", fn: dialectName},
	{method: "Tables", fn: dialectTables},
	{method: "Now", fn: databaseClock},
	{method: "Rebind", fn: rebind},
	{method: "Claim", fn: claimReclaimsExpired},
	{method: "Claim", name: "SkipsLockedRows", fn: claimSkipsLockedRows},
	{method: "Claim", name: "MarksAbandoned", fn: claimMarksAbandoned},
	{method: "Claim", name: "ConcurrentClaimsAreDisjoint", fn: concurrentClaimsAreDisjoint},
	{method: "ClaimQueues", fn: claimQueues},
	{method: "ClaimQueues", name: "ConcurrentClaimsAreDisjoint", fn: concurrentClaimQueuesAreDisjoint},
	{method: "ReadyQueues", fn: readyQueues},
	{method: "DeleteHeld", fn: deleteHeld},
	{method: "DeleteHeld", name: "FinishesCheckTheToken", fn: finishesCheckTheToken},
	{method: "ReleaseHeld", fn: releaseHeld},
	{method: "GiveBack", fn: giveBack},
	{method: "FailMove", fn: failMove},
	{method: "FailedAlready", fn: failedAlready},
	{method: "Insert", fn: insertIDsAnyStep},
	{method: "Sizes", fn: sizes},
	{method: "SizesByQueue", fn: sizesByQueue},
	{method: "Clear", fn: clearQueue},
	{method: "Queues", fn: queues},
	{method: "Payloads", fn: payloads},
	{method: "ListFailed", fn: listFailed},
	{method: "DeleteFailed", fn: deleteFailed},
	{method: "MaxFailedID", fn: maxFailedID},
	{method: "LockFailed", fn: lockFailed},
	{method: "RetryFromFailed", fn: retryFromFailed},
	{method: "FailedTxOptions", fn: failedTxOptions},
	{method: "SetSignal", fn: signals},
	{method: "DeleteSignal", fn: deleteSignal},
	{method: "Signals", fn: readSignals},
	{method: "NotifyChannel", fn: notifyChannel},
	{method: "CheckTables", fn: checkTables},
	{method: "CheckServer", fn: checkServer},
}

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

// raceClaims runs claim in four goroutines at once until each comes back
// empty, retrying what a worker retries, and returns the ids taken,
// sorted.
func raceClaims(t *testing.T, s *suite, what string, claim func() ([]dialect.JobRow, error)) []int64 {
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
					rows, err = claim()
					return err
				})
				if err != nil {
					t.Errorf("%s: %v", what, err)
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
	return taken
}

// Claims racing on one queue each take rows no other claim took, and
// together take them all.
func concurrentClaimsAreDisjoint(t *testing.T, s *suite) {
	q := s.queue(t)
	pushed := s.push(t, q, 40)
	taken := raceClaims(t, s, "claim", func() ([]dialect.JobRow, error) {
		return s.Dialect.Claim(s.ctx, s.DB, q, 3600, 3)
	})
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

// ClaimQueues takes rows queue by queue in the order given until it holds
// n, each queue's in claim order, and returns them in that order with
// their queues; it leaves delayed rows and live reservations alone, and
// takes over a reservation older than retryAfter with one more attempt
// and a new token, as Claim does.
func claimQueues(t *testing.T, s *suite) {
	base := s.queue(t)
	a, b, c, e := base+"-a", base+"-b", base+"-c", base+"-e"
	pa := s.push(t, a, 3)
	s.insert(t, []dialect.PushRow{{Queue: b, Payload: payload(b, 0), At: 3600}})
	pb := s.push(t, b, 1)
	if got := s.claim(t, b, 60, 1); len(got) != 1 || got[0].ID != pb[0] {
		t.Fatalf("claim of %s took %v, want %d", b, ids(got), pb[0])
	}
	pc := s.push(t, c, 2)
	pe := s.push(t, e, 2)
	claim := func(queues []string, retryAfter int64, n int) []dialect.JobRow {
		t.Helper()
		return must[[]dialect.JobRow](t, "claim queues")(s.Dialect.ClaimQueues(s.ctx, s.DB, queues, retryAfter, n))
	}
	type taken struct {
		queue string
		id    int64
	}
	check := func(rows []dialect.JobRow, want ...taken) {
		t.Helper()
		var got []taken
		for _, r := range rows {
			got = append(got, taken{r.Queue, r.ID})
		}
		if !slices.Equal(got, want) {
			t.Fatalf("claim took %v, want %v", got, want)
		}
	}
	first := claim([]string{c, b, a, e}, 60, 4)
	check(first, taken{c, pc[0]}, taken{c, pc[1]}, taken{a, pa[0]}, taken{a, pa[1]})
	for _, r := range first {
		if r.Attempts != 1 || !r.Reserved {
			t.Fatalf("claimed row %+v, want attempt 1, reserved", r)
		}
	}
	if now := s.now(t); first[0].ReservedAt < now-5 || first[0].ReservedAt > now {
		t.Fatalf("row reserved at %d, want the database's now (%d)", first[0].ReservedAt, now)
	}
	// The next claim goes on where the queues' rows are left: e before a.
	check(claim([]string{b, e, a}, 60, 10), taken{e, pe[0]}, taken{e, pe[1]}, taken{a, pa[2]})
	check(claim([]string{a, b, c, e}, 60, 10))
	// The holder of a's first row died two minutes ago.
	s.exec(t, "UPDATE "+s.jobs()+" SET reserved_at = reserved_at - 120 WHERE id = ?", pa[0])
	check(claim([]string{b, a}, 600, 5))
	again := claim([]string{c, b, a}, 60, 5)
	check(again, taken{a, pa[0]})
	if again[0].Attempts != 2 || again[0].Token == first[2].Token {
		t.Fatalf("reclaimed row: attempts %d token %d, want 2 and a token other than %d", again[0].Attempts, again[0].Token, first[2].Token)
	}
	if got := claim(nil, 60, 5); len(got) != 0 {
		t.Fatalf("a claim of no queues took %v", ids(got))
	}
}

// ClaimQueues racing over the same queues each take rows no other claim
// took, and together take them all: a row another claim holds is skipped,
// and the claim goes on to the next.
func concurrentClaimQueuesAreDisjoint(t *testing.T, s *suite) {
	base := s.queue(t)
	var (
		queues []string
		pushed []int64
	)
	for i := range 10 {
		q := base + "-" + strconv.Itoa(i)
		queues = append(queues, q)
		pushed = append(pushed, s.push(t, q, 4)...)
	}
	slices.Sort(pushed)
	taken := raceClaims(t, s, "claim queues", func() ([]dialect.JobRow, error) {
		return s.Dialect.ClaimQueues(s.ctx, s.DB, queues, 3600, 5)
	})
	if !slices.Equal(taken, pushed) {
		t.Fatalf("four racing claims took %v, want each of %v once", taken, pushed)
	}
}

// ReadyQueues names exactly the queues a claim would take a row from: one
// with a due row, one with only an expired reservation; not one that is
// empty, holds only delayed rows or live reservations, or whose name
// differs from a ready one by case or a trailing space (names compare byte
// for byte, as the claim compares them). Every answer is checked against
// what the claim then does.
func readyQueues(t *testing.T, s *suite) {
	base := s.queue(t)
	name := func(suffix string) string { return base + suffix }
	due, expired, delayed, live, empty := name("-due"), name("-expired"), name("-delayed"), name("-live"), name("-empty")
	// Names the database must not fold onto due's.
	upper, padded := strings.ToUpper(due), due+" "
	// A long name of multi-byte characters, cut to the column's 255.
	long := []rune(base + "-ünïcödé-" + strings.Repeat("ß", 255))
	wide := string(long[:255])

	s.push(t, due, 2)
	s.push(t, wide, 1)
	s.insert(t, []dialect.PushRow{{Queue: delayed, Payload: payload(delayed, 0), At: 3600}})
	s.push(t, live, 1)
	if got := s.claim(t, live, 60, 1); len(got) != 1 {
		t.Fatalf("claim of %s took %d rows, want 1", live, len(got))
	}
	exp := s.push(t, expired, 1)
	if got := s.claim(t, expired, 60, 1); len(got) != 1 {
		t.Fatalf("claim of %s took %d rows, want 1", expired, len(got))
	}
	// Its holder died two minutes ago.
	s.exec(t, "UPDATE "+s.jobs()+" SET reserved_at = reserved_at - 120 WHERE id = ?", exp[0])

	all := []string{empty, delayed, upper, due, live, padded, expired, wide}
	ask := func(retryAfter int64) []string {
		t.Helper()
		got := must[[]string](t, "ready queues")(s.Dialect.ReadyQueues(s.ctx, s.DB, all, retryAfter))
		slices.Sort(got)
		return got
	}
	want := []string{due, expired, wide}
	slices.Sort(want)
	if got := ask(60); !slices.Equal(got, want) {
		t.Fatalf("ready queues %q, want %q", got, want)
	}
	// With a retry_after longer than the reservation's age, the expired
	// row is still its holder's: the claim would not take it.
	want = []string{due, wide}
	slices.Sort(want)
	if got := ask(600); !slices.Equal(got, want) {
		t.Fatalf("ready queues with retryAfter 600 %q, want %q (the reservation is 120 s old)", got, want)
	}
	if got := s.claim(t, expired, 600, 5); len(got) != 0 {
		t.Fatalf("the claim disagrees: with retryAfter 600 it took %v from %s", ids(got), expired)
	}
	// Each queue it names, the claim empties; then none is ready.
	for _, q := range []string{due, expired, wide} {
		if got := s.claim(t, q, 60, 5); len(got) == 0 {
			t.Fatalf("ready queue %q: the claim took nothing", q)
		}
	}
	if got := ask(60); len(got) != 0 {
		t.Fatalf("after the claims, ready queues %q, want none", got)
	}
	if got := must[[]string](t, "ready queues of none")(s.Dialect.ReadyQueues(s.ctx, s.DB, nil, 60)); len(got) != 0 {
		t.Fatalf("ready queues of no names: %q", got)
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

// Name is one of the three, and the dialect For builds of that name
// confirms the server (so it names the database it is opened on).
func dialectName(t *testing.T, s *suite) {
	name := s.Dialect.Name()
	if !slices.Contains([]string{"postgres", "mysql", "sqlite"}, name) {
		t.Fatalf("Name %q, want postgres, mysql or sqlite", name)
	}
	d := must[dialect.Dialect](t, "For "+name)(dialect.For(name, s.Dialect.Tables(), dialect.MySQLServer{}))
	if err := d.CheckServer(s.ctx, s.DB); err != nil {
		t.Fatalf("the %s dialect does not take this database for its own: %v", name, err)
	}
}

// Tables are the tables the dialect was built for: its rows go there and
// nowhere else.
func dialectTables(t *testing.T, s *suite) {
	if got := s.Dialect.Tables(); got.Check() != nil || got.Jobs != dialect.DefaultTables.Jobs || got.Failed != dialect.DefaultTables.Failed {
		t.Fatalf("the harness's dialect reads tables %+v, want Laravel's (%v)", got, got.Check())
	}
	o := s.own(t) // checks that Tables is what Own opened it on
	q := s.queue(t)
	id := o.push(t, q, 1)[0]
	if n := o.int(t, "SELECT COUNT(*) FROM "+o.jobs()+" WHERE id = ? AND queue = ?", id, q); n != 1 {
		t.Fatalf("a push through the dialect of %s left %d rows there", o.jobs(), n)
	}
	if n := s.int(t, "SELECT COUNT(*) FROM "+s.jobs()+" WHERE queue = ?", q); n != 0 {
		t.Fatalf("a push through the dialect of %s wrote %d rows into %s", o.jobs(), n, s.jobs())
	}
}

// Rebind makes '?' placeholders the database's, in order.
func rebind(t *testing.T, s *suite) {
	q := s.queue(t)
	ids := s.push(t, q, 3)
	// Bound in the wrong order, the count would differ.
	if n := s.int(t, "SELECT COUNT(*) FROM "+s.jobs()+" WHERE queue = ? AND id >= ? AND id < ?", q, ids[1], ids[2]); n != 1 {
		t.Fatalf("a rebound query with three placeholders counted %d rows, want 1", n)
	}
	if got := s.Dialect.Rebind("SELECT 1"); got != "SELECT 1" {
		t.Fatalf("Rebind changed a query without placeholders to %q", got)
	}
}

// DeleteHeld deletes the held rows given, returns exactly their keys, and
// takes their error history with them.
func deleteHeld(t *testing.T, s *suite) {
	if gone, err := s.Dialect.DeleteHeld(s.ctx, s.DB, nil); err != nil || len(gone) != 0 {
		t.Fatalf("DeleteHeld of nothing: %v, %v", gone, err)
	}
	q := s.queue(t)
	s.push(t, q, 3)
	rows := s.claim(t, q, 3600, 3)
	if len(rows) != 3 {
		t.Fatalf("claimed %d rows, want 3", len(rows))
	}
	rows[0] = s.releaseWithError(t, rows[0], "first attempt")
	if !dialect.Marked(rows[0].Token) {
		t.Fatalf("a row with history claimed with token %d, without the history mark", rows[0].Token)
	}
	gone := dialect.Held{ID: rows[2].ID + 1_000_000, Token: 1, Attempts: 1}
	got := must[[]dialect.Key](t, "delete")(s.Dialect.DeleteHeld(s.ctx, s.DB, []dialect.Held{held(rows[0]), held(rows[1]), gone}))
	slices.SortFunc(got, func(a, b dialect.Key) int { return cmp.Compare(a.ID, b.ID) })
	if want := []dialect.Key{held(rows[0]).Key(), held(rows[1]).Key()}; !slices.Equal(got, want) {
		t.Fatalf("delete of two held rows and a missing one returned %v, want %v", got, want)
	}
	if n := s.int(t, "SELECT COUNT(*) FROM "+s.jobs()+" WHERE queue = ?", q); n != 1 {
		t.Fatalf("%d rows left, want the one not deleted", n)
	}
	if errs := must[[]dialect.AttemptError](t, "job errors")(s.history(t).JobErrors(s.ctx, s.DB, rows[0].ID)); len(errs) != 0 {
		t.Fatalf("a deleted row's history stayed: %+v", errs)
	}
}

// ReleaseHeld puts each held row back after its delay, with its new
// payload when given, keeps the attempts it counted, writes the error of
// a row it released, and returns the rows it released: a stale
// reservation of the same row in the same batch changes nothing.
func releaseHeld(t *testing.T, s *suite) {
	q := s.queue(t)
	pushed := s.push(t, q, 2)
	rows := s.claim(t, q, 3600, 2)
	if len(rows) != 2 {
		t.Fatalf("claimed %d rows, want 2", len(rows))
	}
	later, now := held(rows[0]), held(rows[1])
	stale := now
	stale.Token--
	before := s.now(t)
	got := must[map[dialect.Key]bool](t, "release")(s.Dialect.ReleaseHeld(s.ctx, s.DB, []dialect.Release{
		{Held: later, Delay: 3600},
		// A stale holder's release of the same row, in the same batch: its
		// delay, payload and error must not reach the row.
		{Held: stale, Delay: 7200, Payload: []byte(`{"uuid":"stale"}`), Error: &dialect.ReleaseError{Error: "stale holder", Worker: "host:8"}},
		{Held: now, Payload: []byte(`{"uuid":"new"}`), Error: &dialect.ReleaseError{Error: "attempt failed", Worker: "host:7"}},
	}))
	after := s.now(t)
	if len(got) != 2 || !got[later.Key()] || !got[now.Key()] {
		t.Fatalf("release returned %v, want %v and %v", got, later.Key(), now.Key())
	}
	if at := s.int(t, "SELECT available_at FROM "+s.jobs()+" WHERE id = ? AND reserved_at IS NULL", later.ID); at < before+3600 || at > after+3600 {
		t.Fatalf("a release delayed 3600 s is available at %d, want in [%d, %d]", at, before+3600, after+3600)
	}
	if p := s.text(t, "SELECT payload FROM "+s.jobs()+" WHERE id = ?", later.ID); p != string(payload(q, 0)) {
		t.Fatalf("a release without a payload changed it to %s", p)
	}
	if n := s.int(t, "SELECT attempts FROM "+s.jobs()+" WHERE id = ?", later.ID); n != int64(later.Attempts) {
		t.Fatalf("a release left attempts %d, want the claim's %d", n, later.Attempts)
	}
	errs := must[[]dialect.AttemptError](t, "job errors")(s.history(t).JobErrors(s.ctx, s.DB, now.ID))
	if len(errs) != 1 || errs[0].Error != "attempt failed" || errs[0].Worker != "host:7" || errs[0].Attempt != now.Attempts || errs[0].At < before || errs[0].At > after {
		t.Fatalf("history after a release with an error (and a stale one's): %+v", errs)
	}
	back := s.claimOne(t, q)
	if back.ID != pushed[1] || string(back.Payload) != `{"uuid":"new"}` || back.Attempts != now.Attempts+1 || !dialect.Marked(back.Token) {
		t.Fatalf("after the release the claim took %+v; want row %d with the new payload, attempt %d and a marked token", back, pushed[1], now.Attempts+1)
	}
	// The same without errors: the stale release's delay must not apply.
	stale = held(back)
	stale.Token--
	got = must[map[dialect.Key]bool](t, "release")(s.Dialect.ReleaseHeld(s.ctx, s.DB, []dialect.Release{{Held: stale, Delay: 7200}, {Held: held(back)}}))
	if len(got) != 1 || !got[held(back).Key()] {
		t.Fatalf("release of a row and a stale reservation of it returned %v, want only %v", got, held(back).Key())
	}
	if again := s.claimOne(t, q); again.ID != back.ID {
		t.Fatalf("the released row is not due at once: the claim took %d", again.ID)
	}
}

// GiveBack makes a held row due at once, its attempt taken back, with a
// new token; a stale or missing reservation is not held.
func giveBack(t *testing.T, s *suite) {
	q := s.queue(t)
	s.insert(t, []dialect.PushRow{{Queue: q, Payload: payload(q, 0), At: -60}})
	c := s.claimOne(t, q)
	if ok := must[bool](t, "give back")(s.Dialect.GiveBack(s.ctx, s.DB, held(c))); !ok {
		t.Fatal("the holder's give-back reported the row not held")
	}
	if n := s.int(t, "SELECT COUNT(*) FROM "+s.jobs()+" WHERE id = ? AND reserved_at IS NULL AND attempts = 0 AND available_at <= "+s.Dialect.Now(), c.ID); n != 1 {
		t.Fatal("a given-back row is not due, unreserved, with its attempt taken back")
	}
	if ok := must[bool](t, "give back again")(s.Dialect.GiveBack(s.ctx, s.DB, held(c))); ok {
		t.Fatal("a second give-back of the same reservation reported it held")
	}
	again := s.claimOne(t, q)
	if again.Attempts != c.Attempts || again.Token == c.Token {
		t.Fatalf("after a give-back the claim counts attempt %d with token %d, want attempt %d and a token other than %d", again.Attempts, again.Token, c.Attempts, c.Token)
	}
	if ok := must[bool](t, "give back missing")(s.Dialect.GiveBack(s.ctx, s.DB, dialect.Held{ID: again.ID + 1_000_000, Token: again.Token, Attempts: 1})); ok {
		t.Fatal("a give-back of a missing row reported it held")
	}
}

// FailMove moves a held row to failed_jobs in one transaction, with every
// field of the failure, and reports it; a second fail of the same
// reservation finds it gone and writes nothing.
func failMove(t *testing.T, s *suite) {
	q := s.queue(t)
	s.push(t, q, 1)
	c := s.claimOne(t, q)
	f := dialect.Failure{UUID: q + "-uuid", Connection: "conn-" + q, Queue: q, Payload: []byte(`{"uuid":"é ' \\"}`), Exception: "Exception: é\nstack"}
	if ok := must[bool](t, "fail")(s.Dialect.FailMove(s.ctx, s.DB, held(c), f)); !ok {
		t.Fatal("the holder's fail reported the row not held")
	}
	if n := s.int(t, "SELECT COUNT(*) FROM "+s.jobs()+" WHERE id = ?", c.ID); n != 0 {
		t.Fatal("a failed row stayed in jobs")
	}
	rows := must[[]dialect.FailedRow](t, "list")(s.Dialect.ListFailed(s.ctx, s.DB, dialect.FailedFilter{UUIDs: []string{f.UUID}}))
	if len(rows) != 1 {
		t.Fatalf("%d failed rows of %s, want 1", len(rows), f.UUID)
	}
	r := rows[0]
	if r.UUID != f.UUID || r.Connection != f.Connection || r.Queue != q || string(r.Payload) != string(f.Payload) || r.Exception != f.Exception || r.FailedAt == nil {
		t.Fatalf("failed row %+v, want %+v with a failure time", r, f)
	}
	if ok := must[bool](t, "fail again")(s.Dialect.FailMove(s.ctx, s.DB, held(c), f)); ok {
		t.Fatal("a second fail of the same reservation reported it held")
	}
	if n := s.int(t, "SELECT COUNT(*) FROM "+s.Dialect.Tables().FailedTable()+" WHERE queue = ?", q); n != 1 {
		t.Fatalf("%d failed rows of %s after a second fail, want 1", n, q)
	}
}

// FailedAlready sees a committed FailMove of exactly this failure, and
// nothing while the row is in jobs or for another failure's text.
func failedAlready(t *testing.T, s *suite) {
	q := s.queue(t)
	s.push(t, q, 1)
	c := s.claimOne(t, q)
	f := dialect.Failure{UUID: q + "-uuid", Connection: "database", Queue: q, Payload: dialect.MarkFailed(c.Payload, c.ID, c.Token, c.Attempts), Exception: "boom"}
	if done := must[bool](t, "before")(s.Dialect.FailedAlready(s.ctx, s.DB, c.ID, f)); done {
		t.Fatal("FailedAlready is true for a row still in jobs")
	}
	if ok := must[bool](t, "fail")(s.Dialect.FailMove(s.ctx, s.DB, held(c), f)); !ok {
		t.Fatal("fail of a held row reported it not held")
	}
	if done := must[bool](t, "after")(s.Dialect.FailedAlready(s.ctx, s.DB, c.ID, f)); !done {
		t.Fatal("FailedAlready does not see a committed FailMove")
	}
	other := f
	other.Payload = dialect.MarkFailed(c.Payload, c.ID, c.Token+1, c.Attempts)
	if done := must[bool](t, "other holder")(s.Dialect.FailedAlready(s.ctx, s.DB, c.ID, other)); done {
		t.Fatal("FailedAlready takes another reservation's failure, same uuid and text, for this one's")
	}
	other = f
	other.Exception = "another"
	if done := must[bool](t, "other text")(s.Dialect.FailedAlready(s.ctx, s.DB, c.ID, other)); done {
		t.Fatal("FailedAlready matches a failure with another exception")
	}
}

// Sizes counts pending, delayed and reserved rows (an expired reservation
// still reserved), the oldest pending row's available_at, and now.
func sizes(t *testing.T, s *suite) {
	q := s.queue(t)
	now := s.now(t)
	ids := s.insert(t, []dialect.PushRow{
		{Queue: q, Payload: payload(q, 0), Absolute: true, At: now - 50}, // claimed below
		{Queue: q, Payload: payload(q, 1), Absolute: true, At: now - 40},
		{Queue: q, Payload: payload(q, 2), Absolute: true, At: now - 30},
		{Queue: q, Payload: payload(q, 3), At: 3600},
	})
	if c := s.claimOne(t, q); c.ID != ids[0] {
		t.Fatalf("claimed %d, want %d", c.ID, ids[0])
	}
	s.exec(t, "UPDATE "+s.jobs()+" SET reserved_at = reserved_at - 7200 WHERE id = ?", ids[0])
	sz := must[dialect.Sizes](t, "sizes")(s.Dialect.Sizes(s.ctx, s.DB, q))
	if sz.Pending != 2 || sz.Delayed != 1 || sz.Reserved != 1 || sz.OldestPending == nil || *sz.OldestPending != now-40 || sz.Now < now || sz.Now > s.now(t) {
		t.Fatalf("sizes %+v (oldest %v), want 2 pending, 1 delayed, 1 reserved, oldest pending %d", sz, sz.OldestPending, now-40)
	}
	empty := must[dialect.Sizes](t, "sizes of empty")(s.Dialect.Sizes(s.ctx, s.DB, q+"-empty"))
	if empty.Pending != 0 || empty.Delayed != 0 || empty.Reserved != 0 || empty.OldestPending != nil || empty.Now < now {
		t.Fatalf("sizes of an empty queue %+v", empty)
	}
}

// SizesByQueue reads Sizes of each queue that has rows, a queue whose
// rows are all reserved included, sorted by queue.
func sizesByQueue(t *testing.T, s *suite) {
	base := s.queue(t)
	a, b, c := base+"-a", base+"-b", base+"-c"
	now := s.now(t)
	s.insert(t, []dialect.PushRow{
		{Queue: a, Payload: payload(a, 0), Absolute: true, At: now - 20},
		{Queue: a, Payload: payload(a, 1)},
		{Queue: a, Payload: payload(a, 2), At: 3600},
		{Queue: b, Payload: payload(b, 0)},
		{Queue: c, Payload: payload(c, 0)},
	})
	s.claimOne(t, b)
	must[int64](t, "clear")(s.Dialect.Clear(s.ctx, s.DB, c))
	all := must[[]dialect.QueueSizes](t, "sizes by queue")(s.Dialect.SizesByQueue(s.ctx, s.DB))
	var mine []dialect.QueueSizes
	for _, qs := range all {
		if strings.HasPrefix(qs.Queue, base+"-") {
			mine = append(mine, qs)
		}
	}
	if len(mine) != 2 || mine[0].Queue != a || mine[1].Queue != b {
		t.Fatalf("sizes by queue lists %+v of this test's queues, want %s then %s (and not the empty %s)", mine, a, b, c)
	}
	if x := mine[0]; x.Pending != 2 || x.Delayed != 1 || x.Reserved != 0 || x.OldestPending == nil || *x.OldestPending != now-20 || x.Now < now {
		t.Fatalf("sizes of %s: %+v, want 2 pending, 1 delayed, oldest %d", a, x, now-20)
	}
	if x := mine[1]; x.Pending != 0 || x.Delayed != 0 || x.Reserved != 1 || x.OldestPending != nil {
		t.Fatalf("sizes of %s, all reserved: %+v, want 1 reserved", b, x)
	}
}

// Clear deletes every row of one queue, whatever its state, and says how
// many; other queues keep theirs.
func clearQueue(t *testing.T, s *suite) {
	q, other := s.queue(t), s.queue(t)
	s.push(t, q, 2)
	s.insert(t, []dialect.PushRow{{Queue: q, Payload: payload(q, 2), At: 3600}})
	keep := s.push(t, other, 1)
	s.claimOne(t, q)
	if n := must[int64](t, "clear")(s.Dialect.Clear(s.ctx, s.DB, q)); n != 3 {
		t.Fatalf("clear of a queue of 3 rows (pending, delayed, reserved) says %d", n)
	}
	if n := s.int(t, "SELECT COUNT(*) FROM "+s.jobs()+" WHERE queue = ?", q); n != 0 {
		t.Fatalf("%d rows left after clear", n)
	}
	if n := s.int(t, "SELECT COUNT(*) FROM "+s.jobs()+" WHERE id = ?", keep[0]); n != 1 {
		t.Fatal("clear of one queue deleted another's row")
	}
	if n := must[int64](t, "clear again")(s.Dialect.Clear(s.ctx, s.DB, q)); n != 0 {
		t.Fatalf("clear of an empty queue says %d", n)
	}
}

// Queues lists each queue that has rows once, sorted, names that differ
// in case apart.
func queues(t *testing.T, s *suite) {
	base := s.queue(t)
	a, b, upper, gone := base+"-a", base+"-b", strings.ToUpper(base+"-a"), base+"-gone"
	s.push(t, a, 2)
	s.push(t, b, 1)
	s.push(t, upper, 1)
	s.push(t, gone, 1)
	s.claimOne(t, b)
	must[int64](t, "clear")(s.Dialect.Clear(s.ctx, s.DB, gone))
	names := must[[]string](t, "queues")(s.Dialect.Queues(s.ctx, s.DB))
	var mine []string
	for _, n := range names {
		if strings.HasPrefix(n, base+"-") || n == upper {
			mine = append(mine, n)
		}
	}
	if i, j := slices.Index(mine, a), slices.Index(mine, b); len(mine) != 3 || i < 0 || j < i || !slices.Contains(mine, upper) {
		t.Fatalf("queues lists %q of this test's, want %q before %q, and %q (each once, the cleared %q not)", mine, a, b, upper, gone)
	}
}

// Payloads reads a queue's payloads byte for byte in id order, whatever
// the rows' states, and no other queue's.
func payloads(t *testing.T, s *suite) {
	q, other := s.queue(t), s.queue(t)
	rows := []dialect.PushRow{
		{Queue: q, Payload: []byte(`{"uuid":"a","s":"é ' \\ \u0000"}`)},
		{Queue: q, Payload: payload(q, 1), At: 3600},
		{Queue: q, Payload: payload(q, 2)},
	}
	s.insert(t, rows)
	s.push(t, other, 1)
	s.claimOne(t, q)
	got := must[[][]byte](t, "payloads")(s.Dialect.Payloads(s.ctx, s.DB, q))
	if len(got) != 3 {
		t.Fatalf("payloads of %s: %d, want 3", q, len(got))
	}
	for i, p := range got {
		if string(p) != string(rows[i].Payload) {
			t.Fatalf("payload %d reads %q, want %q", i, p, rows[i].Payload)
		}
	}
}

// ListFailed reads the failed rows a filter selects, newest first.
func listFailed(t *testing.T, s *suite) {
	q, other := s.queue(t), s.queue(t)
	var rows []dialect.FailedRow
	for i := range 4 {
		rows = append(rows, s.failed(t, q, q+"-"+strconv.Itoa(i)))
	}
	s.failed(t, other, other+"-0")
	list := func(f dialect.FailedFilter) []int64 {
		t.Helper()
		return failedIDs(must[[]dialect.FailedRow](t, "list")(s.Dialect.ListFailed(s.ctx, s.DB, f)))
	}
	id := func(i int) int64 { return rows[i].ID }
	now := s.now(t)
	hourAgo, inAnHour := now-3600, now+3600
	for _, c := range []struct {
		what string
		f    dialect.FailedFilter
		want []int64
	}{
		{"queue", dialect.FailedFilter{Queue: q}, []int64{id(3), id(2), id(1), id(0)}},
		{"limit", dialect.FailedFilter{Queue: q, Limit: 2}, []int64{id(3), id(2)}},
		{"uuids", dialect.FailedFilter{UUIDs: []string{q + "-0", q + "-2"}}, []int64{id(2), id(0)}},
		{"after id", dialect.FailedFilter{Queue: q, AfterID: id(1)}, []int64{id(3), id(2)}},
		{"up to id", dialect.FailedFilter{Queue: q, UpToID: id(1)}, []int64{id(1), id(0)}},
		{"before id", dialect.FailedFilter{Queue: q, BeforeID: id(1)}, []int64{id(0)}},
		{"connection", dialect.FailedFilter{Queue: q, Connection: "none"}, []int64{}},
		{"failed before an hour ago", dialect.FailedFilter{Queue: q, FailedBefore: &hourAgo}, []int64{}},
		{"failed before in an hour", dialect.FailedFilter{Queue: q, FailedBefore: &inAnHour}, []int64{id(3), id(2), id(1), id(0)}},
	} {
		if got := list(c.f); !slices.Equal(got, c.want) && !(len(got) == 0 && len(c.want) == 0) {
			t.Errorf("list failed by %s: ids %v, want %v", c.what, got, c.want)
		}
	}
}

// DeleteFailed deletes the failed rows a filter selects and says how many.
func deleteFailed(t *testing.T, s *suite) {
	q, other := s.queue(t), s.queue(t)
	var rows []dialect.FailedRow
	for i := range 4 {
		rows = append(rows, s.failed(t, q, q+"-"+strconv.Itoa(i)))
	}
	keep := s.failed(t, other, other+"-0")
	del := func(f dialect.FailedFilter) int64 {
		t.Helper()
		return must[int64](t, "delete failed")(s.Dialect.DeleteFailed(s.ctx, s.DB, f))
	}
	if n := del(dialect.FailedFilter{UUIDs: []string{rows[1].UUID}}); n != 1 {
		t.Fatalf("delete of one uuid deleted %d", n)
	}
	if n := del(dialect.FailedFilter{Queue: q, UpToID: rows[2].ID}); n != 2 {
		t.Fatalf("delete of %s up to id %d deleted %d, want 2", q, rows[2].ID, n)
	}
	left := failedIDs(must[[]dialect.FailedRow](t, "list")(s.Dialect.ListFailed(s.ctx, s.DB, dialect.FailedFilter{Queue: q})))
	if !slices.Equal(left, []int64{rows[3].ID}) {
		t.Fatalf("failed rows left %v, want %v", left, []int64{rows[3].ID})
	}
	if n := del(dialect.FailedFilter{Queue: q}); n != 1 {
		t.Fatalf("delete of the queue's last failed row deleted %d", n)
	}
	if n := s.int(t, "SELECT COUNT(*) FROM "+s.Dialect.Tables().FailedTable()+" WHERE id = ?", keep.ID); n != 1 {
		t.Fatal("a delete of one queue's failed rows deleted another's")
	}
}

// MaxFailedID is the newest failed row's id, 0 when there is none (own
// tables: the answer is of the whole table).
func maxFailedID(t *testing.T, s *suite) {
	o := s.own(t)
	if id := must[int64](t, "max of none")(o.Dialect.MaxFailedID(o.ctx, o.DB)); id != 0 {
		t.Fatalf("MaxFailedID of an empty table is %d", id)
	}
	q := o.queue(t)
	first := o.failed(t, q, q+"-0")
	second := o.failed(t, q, q+"-1")
	if id := must[int64](t, "max")(o.Dialect.MaxFailedID(o.ctx, o.DB)); id != second.ID || second.ID <= first.ID {
		t.Fatalf("MaxFailedID %d, want the newest's %d", id, second.ID)
	}
	must[int64](t, "delete")(o.Dialect.DeleteFailed(o.ctx, o.DB, dialect.FailedFilter{UUIDs: []string{second.UUID}}))
	if id := must[int64](t, "max")(o.Dialect.MaxFailedID(o.ctx, o.DB)); id != first.ID {
		t.Fatalf("MaxFailedID %d after the newest went, want %d", id, first.ID)
	}
}

// LockFailed reads the failed rows a filter selects in id order, and
// holds their locks until the transaction ends.
func lockFailed(t *testing.T, s *suite) {
	q := s.queue(t)
	var rows []dialect.FailedRow
	for i := range 3 {
		rows = append(rows, s.failed(t, q, q+"-"+strconv.Itoa(i)))
	}
	tx, err := s.DB.Begin(s.ctx, s.Dialect.FailedTxOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	locked := must[[]dialect.FailedRow](t, "lock failed")(s.Dialect.LockFailed(s.ctx, tx, dialect.FailedFilter{Queue: q, Limit: 2}))
	if got, want := failedIDs(locked), []int64{rows[0].ID, rows[1].ID}; !slices.Equal(got, want) {
		t.Fatalf("locked ids %v, want %v (id order, limit 2)", got, want)
	}
	if l := locked[0]; l.UUID != rows[0].UUID || string(l.Payload) != string(rows[0].Payload) || l.Queue != q {
		t.Fatalf("locked row %+v, want %+v", l, rows[0])
	}
	if s.RowLocks {
		// Another transaction skips the locked rows and takes the third.
		free := func() []int64 {
			t.Helper()
			var got []int64
			s.inTx(t, sqldb.TxOptions{ReadCommitted: true}, func(other sqldb.Tx) error {
				got = nil
				rs, err := other.Query(s.ctx, s.Dialect.Rebind("SELECT id FROM "+s.Dialect.Tables().FailedTable()+" WHERE queue = ? ORDER BY id FOR UPDATE SKIP LOCKED"), q)
				if err != nil {
					return err
				}
				defer rs.Close()
				for rs.Next() {
					var id int64
					if err := rs.Scan(&id); err != nil {
						return err
					}
					got = append(got, id)
				}
				return rs.Err()
			})
			return got
		}
		if got := free(); !slices.Equal(got, []int64{rows[2].ID}) {
			t.Fatalf("beside the locks another transaction could lock %v, want only %d", got, rows[2].ID)
		}
		if err := tx.Commit(s.ctx); err != nil {
			t.Fatal(err)
		}
		if got := free(); len(got) != 3 {
			t.Fatalf("after the commit another transaction could lock %v, want all 3", got)
		}
	}
}

// FailedTxOptions begin a transaction that locks failed rows without
// holding up failures written meanwhile (MySQL: READ COMMITTED, no gap
// locks).
func failedTxOptions(t *testing.T, s *suite) {
	opts := s.Dialect.FailedTxOptions()
	if s.Dialect.Name() == "mysql" && !opts.ReadCommitted {
		t.Fatal("MySQL's FailedTxOptions are not READ COMMITTED: a lock of failed rows takes gap locks")
	}
	if !s.RowLocks {
		t.Skip("a writer holds the whole database: a failure waits for any transaction")
	}
	q, other := s.queue(t), s.queue(t)
	s.failed(t, q, q+"-0")
	s.push(t, other, 1)
	c := s.claimOne(t, other)
	tx, err := s.DB.Begin(s.ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if rows := must[[]dialect.FailedRow](t, "lock")(s.Dialect.LockFailed(s.ctx, tx, dialect.FailedFilter{Queue: q})); len(rows) != 1 {
		t.Fatalf("locked %d rows, want 1", len(rows))
	}
	short, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	f := dialect.Failure{UUID: other + "-0", Connection: "database", Queue: other, Payload: c.Payload, Exception: "boom"}
	if ok, err := s.Dialect.FailMove(short, s.DB, held(c), f); err != nil || !ok {
		t.Fatalf("a failure of another queue beside a lock of failed rows: %v, %v (it must not wait for the lock)", ok, err)
	}
}

// DeleteSignal removes one signal and leaves the others; removing one
// that is not set is no error.
func deleteSignal(t *testing.T, s *suite) {
	a, b := s.queue(t), s.queue(t)
	one := int64(1)
	for _, n := range []string{a, b} {
		if err := s.Dialect.SetSignal(s.ctx, s.DB, n, &one); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Dialect.DeleteSignal(s.ctx, s.DB, a); err != nil {
		t.Fatal(err)
	}
	if err := s.Dialect.DeleteSignal(s.ctx, s.DB, a); err != nil {
		t.Fatalf("delete of a signal not set: %v", err)
	}
	got := must[map[string]int64](t, "signals")(s.Dialect.Signals(s.ctx, s.DB, []string{a, b}))
	if _, ok := got[a]; ok || got[b] != 1 || len(got) != 1 {
		t.Fatalf("after deleting %s signals read %v, want only %s", a, got, b)
	}
}

// Signals reads the values of the named signals that are set, and no
// others.
func readSignals(t *testing.T, s *suite) {
	if got, err := s.Dialect.Signals(s.ctx, s.DB, nil); err != nil || len(got) != 0 {
		t.Fatalf("Signals of no names: %v, %v", got, err)
	}
	a, b, unset := s.queue(t), s.queue(t), s.queue(t)
	big, neg := int64(1)<<52+3, int64(-7)
	if err := s.Dialect.SetSignal(s.ctx, s.DB, a, &big); err != nil {
		t.Fatal(err)
	}
	if err := s.Dialect.SetSignal(s.ctx, s.DB, b, &neg); err != nil {
		t.Fatal(err)
	}
	got := must[map[string]int64](t, "signals")(s.Dialect.Signals(s.ctx, s.DB, []string{a, unset, b}))
	if want := map[string]int64{a: big, b: neg}; !maps.Equal(got, want) {
		t.Fatalf("signals read %v, want %v", got, want)
	}
}

// NotifyChannel is PostgreSQL's channel of this table set, one pg_notify
// takes, and "" elsewhere.
func notifyChannel(t *testing.T, s *suite) {
	ch := s.Dialect.NotifyChannel()
	if s.Dialect.Name() != "postgres" {
		if ch != "" {
			t.Fatalf("the %s dialect names notify channel %q", s.Dialect.Name(), ch)
		}
		return
	}
	if ch == "" || len(ch) > 63 {
		t.Fatalf("PostgreSQL's notify channel %q: want a name of 1 to 63 bytes", ch)
	}
	other := must[dialect.Dialect](t, "For")(dialect.For("postgres", dialect.Tables{Jobs: "other_jobs", Failed: "other_failed"}, dialect.MySQLServer{}))
	if other.NotifyChannel() == ch {
		t.Fatalf("two table sets share notify channel %q", ch)
	}
	s.exec(t, "SELECT pg_notify(?, 'conformance')", ch)
}

// CheckTables passes on migrated tables, and fails with a missing-table
// error when the tables, or a column a migration adds, are missing.
func checkTables(t *testing.T, s *suite) {
	if err := s.Dialect.CheckTables(s.ctx, s.DB); err != nil {
		t.Fatalf("check of migrated tables: %v", err)
	}
	n := s.seq.Add(1)
	absent := must[dialect.Dialect](t, "For")(dialect.For(s.Dialect.Name(), dialect.Tables{Jobs: fmt.Sprintf("absent%d_jobs", n), Failed: fmt.Sprintf("absent%d_failed", n)}, dialect.MySQLServer{}))
	if err := absent.CheckTables(s.ctx, s.DB); err == nil || !sqldb.MissingTable(err) {
		t.Fatalf("check of missing tables: %v, want a missing-table error", err)
	}
	// Tables of an old schema: no reservation_token.
	jobs, failed := fmt.Sprintf("old%d_jobs", n), fmt.Sprintf("old%d_failed", n)
	s.exec(t, "CREATE TABLE "+jobs+" (id bigint)")
	s.exec(t, "CREATE TABLE "+failed+" (id bigint)")
	old := must[dialect.Dialect](t, "For")(dialect.For(s.Dialect.Name(), dialect.Tables{Jobs: jobs, Failed: failed}, dialect.MySQLServer{}))
	if err := old.CheckTables(s.ctx, s.DB); err == nil || !sqldb.MissingTable(err) {
		t.Fatalf("check of a jobs table without reservation_token: %v, want a missing-table error", err)
	}
}

// CheckServer passes on the dialect's own database and fails on the
// others' dialects.
func checkServer(t *testing.T, s *suite) {
	if err := s.Dialect.CheckServer(s.ctx, s.DB); err != nil {
		t.Fatalf("check of the dialect's own server: %v", err)
	}
	for _, name := range []string{"postgres", "mysql", "sqlite"} {
		if name == s.Dialect.Name() {
			continue
		}
		d := must[dialect.Dialect](t, "For "+name)(dialect.For(name, dialect.DefaultTables, dialect.MySQLServer{}))
		if err := d.CheckServer(s.ctx, s.DB); err == nil {
			t.Errorf("the %s dialect's CheckServer passed on a %s database", name, s.Dialect.Name())
		}
	}
}
