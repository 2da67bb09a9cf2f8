package worker

import (
	"context"
	"slices"
	"testing"
	"time"
)

// The ready set is read when it has not been, when it runs dry, when the
// active queues change, after a wake-up (no sooner than one read's cost
// after the last read), and at least every max(readyEvery, 20 × cost);
// a claim's drop applies only to the set it read.
func TestReadySetRereads(t *testing.T) {
	var s readySet
	active := &[]string{"a", "b", "c"}
	reads := 0
	answer := []string{"c", "a"}
	read := func(_ context.Context, qs []string) ([]string, error) {
		reads++
		return answer, nil
	}
	got, gen, fresh, err := s.take(context.Background(), active, false, read)
	if err != nil || !fresh || reads != 1 || !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("first take: %v fresh %v reads %d err %v; want [a c] (active's order) from one read", got, fresh, reads, err)
	}
	now := s.readAt
	s.cost = 100 * time.Millisecond
	if s.due(active, now.Add(50*time.Millisecond)) {
		t.Fatal("due right after a read")
	}
	s.wake()
	if s.due(active, now.Add(50*time.Millisecond)) {
		t.Fatal("a wake-up within one read's cost of the last read made the set due")
	}
	if !s.due(active, now.Add(100*time.Millisecond)) {
		t.Fatal("a wake-up one read's cost after the last read did not make the set due")
	}
	s.woken = false
	if s.due(active, now.Add(readyCostShare*s.cost-time.Millisecond)) || !s.due(active, now.Add(readyCostShare*s.cost)) {
		t.Fatalf("with reads of %v the set must be read every %v", s.cost, readyCostShare*s.cost)
	}
	s.cost = time.Millisecond
	if s.due(active, now.Add(readyEvery-time.Millisecond)) || !s.due(active, now.Add(readyEvery)) {
		t.Fatalf("with cheap reads the set must be read every %v", readyEvery)
	}
	if !s.due(&[]string{"a", "b", "c"}, now) {
		t.Fatal("other active queues (a pause changed them) did not make the set due")
	}
	s.drop(gen+1, "a")
	if !slices.Equal(s.queues, []string{"a", "c"}) {
		t.Fatalf("a drop for an older set changed the set: %v", s.queues)
	}
	s.drop(gen, "a")
	s.drop(gen, "c")
	if !s.due(active, now) {
		t.Fatal("a dry set is not due")
	}
	answer = nil
	if got, _, fresh, _ := s.take(context.Background(), active, false, read); !fresh || len(got) != 0 || reads != 2 {
		t.Fatalf("take of a dry set: %v fresh %v reads %d; want a read that finds none", got, fresh, reads)
	}
}
