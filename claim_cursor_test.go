package dbqueue_test

import (
	"testing"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// Two Queues on one database claim from one queue (on MySQL each keeps
// its own claim cursor). When everything one Queue's cursor reads next is
// in flight with the other, its claim must still find the job that is
// ready: a claim that comes back empty means an empty queue, which
// StopWhenEmpty and RunOnce stop on.
func TestClaimPastAnotherQueuesJobsFindsTheReadyOne(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		a, b := db.Queue(t), db.Queue(t)
		jobs := make([]dbqueue.NewJob, 6)
		for i := range jobs {
			jobs[i] = dbqueue.NewJob{Name: "work"}
		}
		if _, err := a.PushMany(ctx, jobs); err != nil {
			t.Fatal(err)
		}
		if got := reserve(t, a, 1); len(got) != 1 {
			t.Fatalf("first queue reserved %d jobs, want 1", len(got))
		}
		if got := reserve(t, b, 4); len(got) != 4 {
			t.Fatalf("second queue reserved %d jobs, want 4", len(got))
		}
		got := reserve(t, a, 1)
		if len(got) != 1 {
			t.Fatalf("first queue reserved %d jobs while one was ready, want 1 (ready: %d)", len(got),
				db.Count(t, "SELECT COUNT(*) FROM jobs WHERE reserved_at IS NULL"))
		}
		if got := reserve(t, a, 1); len(got) != 0 {
			t.Fatalf("first queue reserved %d more jobs, but all six are held", len(got))
		}
	})
}

// The same with more jobs in flight than a claim reads from its cursor in
// all its rounds, and a claim that wants more than is ready.
func TestClaimPastManyJobsInFlightFindsTheReadyOnes(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		a, b := db.Queue(t), db.Queue(t)
		jobs := make([]dbqueue.NewJob, 60)
		for i := range jobs {
			jobs[i] = dbqueue.NewJob{Name: "work"}
		}
		if _, err := a.PushMany(ctx, jobs); err != nil {
			t.Fatal(err)
		}
		reserve(t, a, 2)
		if got := reserve(t, b, 55); len(got) != 55 {
			t.Fatalf("second queue reserved %d jobs, want 55", len(got))
		}
		for _, want := range []int{2, 1} {
			if got := reserve(t, a, want); len(got) != want {
				t.Fatalf("first queue reserved %d jobs, want %d (ready: %d)", len(got), want,
					db.Count(t, "SELECT COUNT(*) FROM jobs WHERE reserved_at IS NULL"))
			}
		}
	})
}
