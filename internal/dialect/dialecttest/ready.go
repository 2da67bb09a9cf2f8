package dialecttest

import (
	"slices"
	"strings"
	"testing"

	"github.com/dbqueue/dbqueue/internal/dialect"
)

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
