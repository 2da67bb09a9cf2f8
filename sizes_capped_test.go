package dbqueue_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// TestSizesCapped: below the cap the counts equal Size's and carry no
// flag; at the cap each state stops there and says so; a queue with no
// jobs counts zero.
func TestSizesCapped(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		for range 5 {
			push(t, q, dbqueue.NewJob{Name: "n", Queue: "big"})
			push(t, q, dbqueue.NewJob{Name: "n", Queue: "big", Delay: time.Hour})
		}
		push(t, q, dbqueue.NewJob{Name: "n", Queue: "small"})
		push(t, q, dbqueue.NewJob{Name: "n", Queue: "small", Delay: time.Hour})
		push(t, q, dbqueue.NewJob{Name: "n", Queue: "small"})
		if jobs, err := q.Reserve(ctx, 1, "small"); err != nil || len(jobs) != 1 {
			t.Fatalf("reserve: %d, %v", len(jobs), err)
		}
		got, err := q.SizesCapped(ctx, []string{"big", "small", "empty"}, 3)
		if err != nil {
			t.Fatal(err)
		}
		want, err := q.Size(ctx, "small")
		if err != nil {
			t.Fatal(err)
		}
		if s := got["small"]; s.Sizes != want || s.Pending != 1 || s.Delayed != 1 || s.Reserved != 1 || s.Capped() {
			t.Errorf("small: %+v, want Size's %+v (1 of each), exact", s, want)
		}
		if s := got["big"]; s.Pending != 3 || s.Delayed != 3 || !s.PendingCapped || !s.DelayedCapped {
			t.Errorf("big: %+v, want pending and delayed 3, capped", s)
		}
		if s, ok := got["empty"]; !ok || s.Total() != 0 || s.Capped() {
			t.Errorf("empty: %+v (listed %v), want zeros", s, ok)
		}
		if _, err := q.SizesCapped(ctx, nil, 0); err == nil {
			t.Error("SizesCapped with limit 0: no error")
		}
	})
}

// TestQueuesAfter: walking the pages visits every queue that holds jobs
// exactly once, in order, whether its jobs wait or are all reserved.
func TestQueuesAfter(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		var want []string
		for i := range 23 {
			name := fmt.Sprintf("q%03d", i)
			want = append(want, name)
			push(t, q, dbqueue.NewJob{Name: "n", Queue: name})
			push(t, q, dbqueue.NewJob{Name: "n", Queue: name, Delay: time.Hour})
		}
		push(t, q, dbqueue.NewJob{Name: "n", Queue: "held"})
		if jobs, err := q.Reserve(ctx, 1, "held"); err != nil || len(jobs) != 1 {
			t.Fatalf("reserve: %d, %v", len(jobs), err)
		}
		want = append(want, "held")
		slices.Sort(want)
		var got []string
		after := ""
		for range 20 {
			page, err := q.QueuesAfter(ctx, after, 5)
			if err != nil {
				t.Fatal(err)
			}
			if len(page) > 5 {
				t.Fatalf("page of %d names, limit 5", len(page))
			}
			if len(page) == 0 {
				break
			}
			got = append(got, page...)
			after = page[len(page)-1]
		}
		if !slices.Equal(got, want) {
			t.Errorf("walked %v\nwant   %v", got, want)
		}
	})
}
