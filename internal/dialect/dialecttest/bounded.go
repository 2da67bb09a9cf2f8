package dialecttest

import (
	"maps"
	"slices"
	"testing"

	"github.com/dbqueue/dbqueue/internal/dialect"
)

// boundedTests are Bounded's.
var boundedTests = []test{
	{method: "QueuesAfter", fn: queuesAfter},
	{method: "CappedSizes", fn: cappedSizes},
	{method: "CappedTotals", fn: cappedTotals},
	{method: "NewestFailed", fn: newestFailed},
}

func (s *suite) bounded(t *testing.T) dialect.Bounded {
	t.Helper()
	return s.Dialect
}

// QueuesAfter lists up to limit names of queues that have rows (waiting
// or reserved), after the name given, in order, each once.
func queuesAfter(t *testing.T, s *suite) {
	b := s.bounded(t)
	base := s.queue(t)
	a, bq, c, d, e := base+"-a", base+"-b", base+"-c", base+"-d", base+"-e"
	s.push(t, a, 1)
	s.push(t, bq, 3)
	s.push(t, c, 1)
	s.claimOne(t, c) // reserved only
	s.push(t, d, 1)
	must[int64](t, "clear")(s.Dialect.Clear(s.ctx, s.DB, d))
	s.insert(t, []dialect.PushRow{{Queue: e, Payload: payload(e, 0), At: 3600}}) // delayed only
	after := func(name string, limit int) []string {
		t.Helper()
		return must[[]string](t, "queues after")(b.QueuesAfter(s.ctx, s.DB, name, limit))
	}
	if got := after(a, 2); !slices.Equal(got, []string{bq, c}) {
		t.Fatalf("2 queues after %q: %q, want %q", a, got, []string{bq, c})
	}
	if got := after(bq, 2); !slices.Equal(got, []string{c, e}) {
		t.Fatalf("2 queues after %q: %q, want %q (the reserved-only %s, the delayed-only %s, not the emptied %s)", bq, got, []string{c, e}, c, e, d)
	}
	if got := after(base+"-", 1); !slices.Equal(got, []string{a}) {
		t.Fatalf("1 queue after %q: %q, want %q", base+"-", got, a)
	}
	if got := after(a, 0); len(got) != 0 {
		t.Fatalf("0 queues after %q: %q", a, got)
	}
}

// CappedSizes counts each state of each named queue, in the order asked,
// flagging a count that reached the limit; a count under it is exact.
func cappedSizes(t *testing.T, s *suite) {
	b := s.bounded(t)
	small, big, empty := s.queue(t), s.queue(t), s.queue(t)
	now := s.now(t)
	s.insert(t, []dialect.PushRow{
		{Queue: small, Payload: payload(small, 0), Absolute: true, At: now - 30},
		{Queue: small, Payload: payload(small, 1)},
		{Queue: small, Payload: payload(small, 2), At: 3600},
		{Queue: small, Payload: payload(small, 3)},
	})
	s.claimOne(t, small)
	s.push(t, big, 12)
	s.insert(t, []dialect.PushRow{{Queue: big, Payload: payload(big, 20), At: 3600}})
	got := must[[]dialect.CappedSizes](t, "capped sizes")(b.CappedSizes(s.ctx, s.DB, []string{big, empty, small}, 5))
	if len(got) != 3 || got[0].Queue != big || got[1].Queue != empty || got[2].Queue != small {
		t.Fatalf("capped sizes of 3 queues: %+v, want them in the order asked", got)
	}
	if x := got[2]; x.Pending != 2 || x.Delayed != 1 || x.Reserved != 1 || x.PendingCapped || x.DelayedCapped || x.ReservedCapped || x.OldestPending == nil || *x.OldestPending > x.Now || x.Now < now {
		t.Fatalf("capped sizes of %s: %+v, want exact 2 pending, 1 delayed, 1 reserved, none capped", small, x)
	}
	if x := got[0]; x.Pending+x.Reserved < 5 || x.Pending > 12 || !x.PendingCapped || x.Delayed != 1 || x.DelayedCapped {
		t.Fatalf("capped sizes of %s (12 due, 1 delayed) at limit 5: %+v, want pending capped at 5 or more, 1 delayed", big, x)
	}
	if x := got[1]; x.Pending != 0 || x.Delayed != 0 || x.Reserved != 0 || x.PendingCapped || x.OldestPending != nil {
		t.Fatalf("capped sizes of an empty queue: %+v", x)
	}
}

// CappedTotals counts the states over every queue, exact under the
// limit, flagged at it (own tables: the counts are of the whole table).
func cappedTotals(t *testing.T, s *suite) {
	o := s.own(t)
	b := o.bounded(t)
	if x := must[dialect.CappedSizes](t, "totals of none")(b.CappedTotals(o.ctx, o.DB, 10)); x.Pending != 0 || x.Delayed != 0 || x.Reserved != 0 || x.PendingCapped {
		t.Fatalf("totals of empty tables: %+v", x)
	}
	q1, q2 := o.queue(t), o.queue(t)
	o.push(t, q1, 3)
	o.insert(t, []dialect.PushRow{{Queue: q2, Payload: payload(q2, 0), At: 3600}, {Queue: q2, Payload: payload(q2, 1)}})
	o.claimOne(t, q2)
	x := must[dialect.CappedSizes](t, "totals")(b.CappedTotals(o.ctx, o.DB, 100))
	if x.Pending != 3 || x.Delayed != 1 || x.Reserved != 1 || x.PendingCapped || x.DelayedCapped || x.ReservedCapped {
		t.Fatalf("totals %+v, want exact 3 pending, 1 delayed, 1 reserved", x)
	}
	x = must[dialect.CappedSizes](t, "capped totals")(b.CappedTotals(o.ctx, o.DB, 2))
	if !x.PendingCapped || x.Pending+x.Delayed+x.Reserved > 5 {
		t.Fatalf("totals at limit 2: %+v, want pending flagged capped", x)
	}
}

// NewestFailed counts the newest window failed rows by queue and says how
// many it read (own tables: the window is of the whole table).
func newestFailed(t *testing.T, s *suite) {
	o := s.own(t)
	b := o.bounded(t)
	if got, read := must2any(t, "none")(b.NewestFailed(o.ctx, o.DB, 10)); len(got) != 0 || read != 0 {
		t.Fatalf("newest failed of none: %v, read %d", got, read)
	}
	q1, q2 := o.queue(t), o.queue(t)
	o.failed(t, q1, q1+"-0")
	o.failed(t, q2, q2+"-0")
	o.failed(t, q1, q1+"-1")
	o.failed(t, q1, q1+"-2")
	if got, read := must2any(t, "all")(b.NewestFailed(o.ctx, o.DB, 10)); !maps.Equal(got, map[string]int64{q1: 3, q2: 1}) || read != 4 {
		t.Fatalf("newest failed in a window of 10: %v read %d, want %s 3, %s 1, read 4", got, read, q1, q2)
	}
	if got, read := must2any(t, "window")(b.NewestFailed(o.ctx, o.DB, 2)); !maps.Equal(got, map[string]int64{q1: 2}) || read != 2 {
		t.Fatalf("newest failed in a window of 2: %v read %d, want %s 2, read 2", got, read, q1)
	}
}

func must2any(t *testing.T, what string) func(m map[string]int64, n int, err error) (map[string]int64, int) {
	return func(m map[string]int64, n int, err error) (map[string]int64, int) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return m, n
	}
}
