package dialecttest

import (
	"sync"
	"testing"

	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// flowControlTests are FlowControl's.
var flowControlTests = []test{
	{method: "DeclareFlow", fn: declareFlow},
	{method: "Flows", fn: readFlows},
	{method: "InsertFlow", fn: insertFlow},
	{method: "ClaimFlow", fn: claimFlowPerKey},
	{method: "ClaimFlow", fn: claimFlowConcurrent},
	{method: "ClaimFlow", fn: claimFlowTurns},
	{method: "PlacesFreed", fn: placesFreed},
}

// flows reads the declared limits by name.
func flows(t *testing.T, s *suite, retryAfter int64) map[string]dialect.FlowInfo {
	t.Helper()
	fs, err := s.Dialect.Flows(s.ctx, s.DB, retryAfter)
	if err != nil {
		t.Fatalf("Flows: %v", err)
	}
	out := map[string]dialect.FlowInfo{}
	for _, f := range fs {
		out[f.Name] = f
	}
	return out
}

func declare(t *testing.T, s *suite, f dialect.Flow) {
	t.Helper()
	if err := s.Dialect.DeclareFlow(s.ctx, s.DB, f); err != nil {
		t.Fatalf("DeclareFlow(%+v): %v", f, err)
	}
}

// DeclareFlow writes a limit's caps and changes them when they change;
// names are kept byte for byte (a case-insensitive collation would merge
// "A" and "a").
func declareFlow(t *testing.T, s *suite) {
	o := s // the suite's tables: each test names limits of its own
	lower, upper := "sync-"+o.queue(t), "Sync-"+o.queue(t)
	declare(t, o, dialect.Flow{Name: lower, PerKey: 1, Total: 20})
	declare(t, o, dialect.Flow{Name: lower, PerKey: 1, Total: 20}) // again: nothing to change
	declare(t, o, dialect.Flow{Name: upper, PerKey: 3})
	got := flows(t, o, 3600)
	if got[lower].PerKey != 1 || got[lower].Total != 20 || got[upper].PerKey != 3 {
		t.Fatalf("after declaring %s 1/20 and %s 3: %+v", lower, upper, got)
	}
	declare(t, o, dialect.Flow{Name: lower, PerKey: 2, Total: 5})
	if f := flows(t, o, 3600)[lower]; f.PerKey != 2 || f.Total != 5 {
		t.Fatalf("after redeclaring sync 2/5: %+v", f)
	}
}

// insertLimited pushes n due rows of queue under limit name, key keys[i %
// len(keys)].
func insertLimited(t *testing.T, s *suite, queue, name string, keys []string, n int) []int64 {
	t.Helper()
	rows := make([]dialect.PushRow, n)
	for i := range rows {
		rows[i] = dialect.PushRow{Queue: queue, Payload: payload(queue, i), Flow: name, FlowKey: keys[i%len(keys)]}
	}
	ids, err := s.Dialect.InsertFlow(s.ctx, s.DB, rows)
	if err != nil {
		t.Fatalf("InsertFlow: %v", err)
	}
	if len(ids) != n {
		t.Fatalf("InsertFlow of %d rows returned %d ids", n, len(ids))
	}
	return ids
}

// InsertFlow parks limited rows (reserved_at = Parked) with their limit
// and key, writes plain rows among them as Insert does, delays what is
// delayed, and returns the ids in order.
func insertFlow(t *testing.T, s *suite) {
	o := s // the suite's tables: limits named for this test alone
	q := o.queue(t)
	lim := "sync-" + q
	ids, err := o.Dialect.InsertFlow(o.ctx, o.DB, []dialect.PushRow{
		{Queue: q, Payload: payload(q, 0), Flow: lim, FlowKey: "ключ"},
		{Queue: q, Payload: payload(q, 1)},
		{Queue: q, Payload: payload(q, 2), Flow: lim, At: 3600},
	})
	if err != nil {
		t.Fatalf("InsertFlow: %v", err)
	}
	if len(ids) != 3 || !(ids[0] < ids[1] && ids[1] < ids[2]) {
		t.Fatalf("InsertFlow returned ids %v, want three in push order", ids)
	}
	if n := o.int(t, "SELECT COUNT(*) FROM "+o.jobs()+" WHERE id = ? AND reserved_at = ? AND flow_name = ? AND flow_key = ? AND available_at <= "+o.Dialect.Now(), ids[0], dialect.Parked, lim, "ключ"); n != 1 {
		t.Error("the limited row is not parked, due, with its limit and key")
	}
	if n := o.int(t, "SELECT COUNT(*) FROM "+o.jobs()+" WHERE id = ? AND reserved_at IS NULL AND flow_name IS NULL", ids[1]); n != 1 {
		t.Error("the plain row is not a plain unreserved row")
	}
	if n := o.int(t, "SELECT COUNT(*) FROM "+o.jobs()+" WHERE id = ? AND reserved_at = ? AND available_at > "+o.Dialect.Now()+" + 3000", ids[2], dialect.Parked); n != 1 {
		t.Error("the delayed limited row is not parked an hour out")
	}
	// The plain claim never takes a parked row.
	if rows := o.claim(t, q, 1, 10); len(rows) != 1 || rows[0].ID != ids[1] {
		t.Errorf("the plain claim took %d rows, want only the plain one", len(rows))
	}
}

// Flows counts a limit's jobs running and waiting and its keys.
func readFlows(t *testing.T, s *suite) {
	o := s // the suite's tables: limits named for this test alone
	q := o.queue(t)
	lim := "sync-" + q
	declare(t, o, dialect.Flow{Name: lim, PerKey: 1})
	insertLimited(t, o, q, lim, []string{"a", "b", "c"}, 5)
	claimed, err := o.Dialect.ClaimFlow(o.ctx, o.DB, q, 3600, 10)
	if err != nil || len(claimed) != 3 {
		t.Fatalf("ClaimFlow: %d rows, %v; want 3 (one a key)", len(claimed), err)
	}
	f := flows(t, o, 3600)[lim]
	if f.Running != 3 || f.Waiting != 2 || f.Keys != 3 || f.PerKey != 1 {
		t.Fatalf("Flows: %+v, want 3 running, 2 waiting over 3 keys", f)
	}
}

// ClaimFlow takes per key the earliest jobs that fit beside those
// running, caps the whole limit at its total, frees a place when a job
// ends or its reservation expires, and returns rows as Claim does.
func claimFlowPerKey(t *testing.T, s *suite) {
	o := s // the suite's tables: limits named for this test alone
	q := o.queue(t)
	lim := "per2-" + q
	declare(t, o, dialect.Flow{Name: lim, PerKey: 2, Total: 3})
	ids := insertLimited(t, o, q, lim, []string{"a", "a", "a", "b", "b"}, 5) // a a a b b
	rows, err := o.Dialect.ClaimFlow(o.ctx, o.DB, q, 3600, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 || rows[0].ID != ids[0] || rows[1].ID != ids[1] || rows[2].ID != ids[3] {
		t.Fatalf("claimed %v, want a1 a2 b1 (two of a, total 3)", rowIDs(rows))
	}
	now := o.now(t)
	for _, r := range rows {
		if r.Attempts != 1 || r.ReservedAt < now-5 || r.ReservedAt > now+5 || r.Token == 0 {
			t.Fatalf("claimed row %+v: want attempts 1, reserved now, a token", r)
		}
	}
	if more, err := o.Dialect.ClaimFlow(o.ctx, o.DB, q, 3600, 10); err != nil || len(more) != 0 {
		t.Fatalf("a claim at the total took %d rows (%v)", len(more), err)
	}
	// a1 ends; a2's holder dies (its reservation expires at retryAfter
	// 10 once it is 11 seconds old).
	if keys, err := o.Dialect.DeleteHeld(o.ctx, o.DB, []dialect.Held{held(rows[0])}); err != nil || len(keys) != 1 {
		t.Fatalf("DeleteHeld of a1: %v, %v", keys, err)
	}
	o.exec(t, "UPDATE "+o.jobs()+" SET reserved_at = reserved_at - 11 WHERE id = ?", ids[1])
	again, err := o.Dialect.ClaimFlow(o.ctx, o.DB, q, 10, 10)
	if err != nil {
		t.Fatal(err)
	}
	// The cursor stopped at b1, the last job the first claim read before
	// it filled: b2 is next past it, a3 only round from the first.
	if len(again) != 2 || again[0].ID != ids[1] || again[1].ID != ids[4] {
		t.Fatalf("after a1 ended and a2 expired the claim took %v, want a2 (taken over) and b2 (next past the cursor)", rowIDs(again))
	}
	if again[0].Attempts != 2 || !dialect.FollowsAbandoned(again[0].Token) || dialect.FollowsAbandoned(again[1].Token) {
		t.Fatalf("a2 taken over: attempts %d, abandoned mark %v; b2 mark %v: want 2, true, false",
			again[0].Attempts, dialect.FollowsAbandoned(again[0].Token), dialect.FollowsAbandoned(again[1].Token))
	}
}

// ClaimFlow in many transactions at once never starts more than a limit
// allows: each claim counts after the claims before it committed.
func claimFlowConcurrent(t *testing.T, s *suite) {
	o := s // the suite's tables: limits named for this test alone
	q := o.queue(t)
	lim := "one-" + q
	declare(t, o, dialect.Flow{Name: lim, PerKey: 1, Total: 3})
	insertLimited(t, o, q, lim, []string{"a", "b", "c", "d", "e"}, 50)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		taken []dialect.JobRow
		errs  []error
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				var rows []dialect.JobRow
				err := sqldb.Retry(o.ctx, func() (err error) {
					rows, err = o.Dialect.ClaimFlow(o.ctx, o.DB, q, 3600, 4)
					return err
				})
				mu.Lock()
				taken = append(taken, rows...)
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("concurrent claims failed: %v", errs)
	}
	if len(taken) != 3 {
		t.Fatalf("8 claimers at once took %d rows under a total of 3", len(taken))
	}
	keys := map[string]int{}
	for _, r := range taken {
		keys[o.text(t, "SELECT flow_key FROM "+o.jobs()+" WHERE id = ?", r.ID)]++
	}
	for k, n := range keys {
		if n > 1 {
			t.Fatalf("key %s has %d jobs running under a limit of 1 a key", k, n)
		}
	}
}

func rowIDs(rows []dialect.JobRow) []int64 {
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

// ClaimFlow reads on from where the last claim stopped, so a key with one
// job behind another key's thousands starts within a few claims, and
// claims of one job go through the keys.
func claimFlowTurns(t *testing.T, s *suite) {
	o := s // the suite's tables: limits named for this test alone
	q := o.queue(t)
	lim := "turns-" + q
	declare(t, o, dialect.Flow{Name: lim, PerKey: 2})
	big := insertLimited(t, o, q, lim, []string{"big"}, 3000)
	small := insertLimited(t, o, q, lim, []string{"small"}, 1)
	rows, err := o.Dialect.ClaimFlow(o.ctx, o.DB, q, 3600, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if got := rowIDs(rows); len(got) != 3 || got[0] != big[0] || got[1] != big[1] || got[2] != small[0] {
		t.Fatalf("claimed %v, want big's first two and small's one (%d, %d, %d)", got, big[0], big[1], small[0])
	}

	// Claims of one job read on from the job the last claim read: the
	// jobs in claim order, key by key, each key's in push order; a key
	// at its limit is passed over.
	r := o.queue(t)
	lim2 := "round-" + r
	declare(t, o, dialect.Flow{Name: lim2, PerKey: 2})
	ids := insertLimited(t, o, r, lim2, []string{"a", "b", "c"}, 9) // a b c a b c a b c
	want := []int64{ids[0], ids[3], ids[1], ids[4], ids[2], ids[5]} // a1 a2 b1 b2 c1 c2; a3 waits: a has 2 running
	for i, id := range want {
		rows, err := o.Dialect.ClaimFlow(o.ctx, o.DB, r, 3600, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 1 || rows[0].ID != id {
			t.Fatalf("claim %d of one job took %v, want %d (claim order a1 a2 b1 b2 c1 c2, two a key)", i, rowIDs(rows), id)
		}
	}
	if rows, err := o.Dialect.ClaimFlow(o.ctx, o.DB, r, 3600, 1); err != nil || len(rows) != 0 {
		t.Fatalf("with every key at its limit a claim took %v (%v)", rowIDs(rows), err)
	}
}

// PlacesFreed takes any queue names, none included, and fails on none
// (a hint: PostgreSQL notifies, the others do nothing).
func placesFreed(t *testing.T, s *suite) {
	for _, qs := range [][]string{nil, {"default"}, {"a", "b ☃", "a"}} {
		if err := s.Dialect.PlacesFreed(s.ctx, s.DB, qs); err != nil {
			t.Fatalf("PlacesFreed(%q): %v", qs, err)
		}
	}
}
