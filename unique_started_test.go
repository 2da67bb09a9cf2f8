package dbqueue_test

import (
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// An UntilStarted lock ends at the job's first claim and stays ended: a
// snooze takes the attempt back (attempts 0 again, unreserved), but the
// job started, so a duplicate pushed during the snooze is queued, and
// PruneUnique counts the lock as ended.
func TestSnoozeKeepsAnUntilStartedLockEnded(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		u := dbqueue.Unique{Until: dbqueue.UntilStarted}
		snoozeFirst := func(name string) int64 {
			t.Helper()
			id, dup := pushUnique(t, q, dbqueue.NewJob{Name: name, Queue: name}, u)
			if dup {
				t.Fatalf("the first %s was a duplicate", name)
			}
			got := reserve(t, q, 1, name)
			if len(got) != 1 || got[0].ID != id {
				t.Fatalf("reserved %v, want job %d", got, id)
			}
			if err := q.Snooze(ctx, got[0], time.Hour); err != nil {
				t.Fatal(err)
			}
			if n := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE id = ? AND attempts = 0 AND reserved_at IS NULL", id); n != 1 {
				t.Fatalf("the snoozed job is not back at attempts 0, unreserved")
			}
			return id
		}
		first := snoozeFirst("sync")
		second, dup := pushUnique(t, q, dbqueue.NewJob{Name: "sync", Queue: "sync"}, u)
		if dup || second == first {
			t.Fatalf("a push while the started job %d is snoozed was refused as its duplicate (got %d): the lock ended at its first claim", first, second)
		}
		snoozeFirst("prune")
		if n, err := q.PruneUnique(ctx); err != nil || n != 1 {
			t.Fatalf("PruneUnique: %d, %v; want 1 (the snoozed job's lock; the second sync job's holds)", n, err)
		}
		// A job never claimed still holds its lock.
		if again, dup := pushUnique(t, q, dbqueue.NewJob{Name: "sync", Queue: "sync"}, u); !dup || again != second {
			t.Fatalf("a push beside the queued job %d: got %d, duplicate %v; want refused", second, again, dup)
		}
	})
}
