package dashboard

import (
	"context"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// TestSlowSamplesAreSpacedOut: when a sample took long (a huge table),
// the next waits ten times as long, however many requests ask; an action
// still gets a fresh one.
func TestSlowSamplesAreSpacedOut(t *testing.T) {
	ctx := context.Background()
	q := dbtest.New(t, dbqueue.SQLite).Queue(t)
	s := newSampler(q, 10, 100*time.Millisecond, nil)
	first, _, err := s.latest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.cost <= 0 {
		t.Fatalf("the sample's cost was not measured: %v", s.cost)
	}
	s.cost = time.Minute // as if the tables were huge
	if _, err := q.Push(ctx, dbqueue.NewJob{Name: "n"}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(300 * time.Millisecond); time.Now().Before(deadline); {
		got, _, err := s.latest(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !got.at.Equal(first.at) {
			t.Fatalf("a new sample %v after the first; want none for 10 minutes", got.at.Sub(first.at))
		}
	}
	s.invalidate()
	got, _, err := s.latest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.at.Equal(first.at) || got.point.Pending != 1 {
		t.Fatalf("after an action: the old sample, or %d pending; want a fresh sample with 1", got.point.Pending)
	}
}
