package dbqueue_test

import (
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// TestSizesByQueue: one grouped read gives what Size gives queue by
// queue, including a queue whose every job is reserved and a name of 255
// bytes, and lists no queue without jobs.
func TestSizesByQueue(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		long := "q" + strings.Repeat("x", 254)
		push(t, q, dbqueue.NewJob{Name: "n", Queue: "ready"})
		push(t, q, dbqueue.NewJob{Name: "n", Queue: "ready"})
		push(t, q, dbqueue.NewJob{Name: "n", Queue: "ready", Delay: time.Hour})
		push(t, q, dbqueue.NewJob{Name: "n", Queue: "held"})
		push(t, q, dbqueue.NewJob{Name: "n", Queue: long, Delay: time.Hour})
		if jobs, err := q.Reserve(ctx, 1, "held"); err != nil || len(jobs) != 1 {
			t.Fatalf("reserve: %d, %v", len(jobs), err)
		}
		got, err := q.SizesByQueue(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 {
			t.Errorf("SizesByQueue lists %d queues, want 3: %v", len(got), got)
		}
		for _, name := range []string{"ready", "held", long} {
			want, err := q.Size(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			s, ok := got[name]
			if !ok {
				t.Errorf("queue %.20q… missing", name)
				continue
			}
			// OldestPending moves with the clock between the two reads.
			if s.Pending != want.Pending || s.Delayed != want.Delayed || s.Reserved != want.Reserved ||
				(s.OldestPending == 0) != (want.OldestPending == 0) {
				t.Errorf("queue %.20q…: SizesByQueue %+v, Size %+v", name, s, want)
			}
		}
		if s := got["held"]; s.Reserved != 1 || s.Pending != 0 {
			t.Errorf("held: %+v, want 1 reserved", s)
		}
		if s := got["ready"]; s.Pending != 2 || s.Delayed != 1 {
			t.Errorf("ready: %+v, want 2 pending and 1 delayed", s)
		}
	})
}
