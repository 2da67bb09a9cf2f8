package dbqueue_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/internal/dialect"
)

func sortedIDs(jobs []*dbqueue.Job) []int64 {
	out := make([]int64, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	slices.Sort(out)
	return out
}

// A claim takes, of the jobs under a limit, only as many per key as fit
// beside those running, earliest first; finishing, releasing, failing or
// an expired reservation frees a place; a release waits parked again,
// out of the plain claim's reach.
func TestConcurrencyLimitInTheClaim(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		limited := func(key string) dbqueue.NewJob {
			return dbqueue.NewJob{Name: "sync", Queue: "flow", Concurrency: &dbqueue.Concurrency{Limit: "sync", Key: key, PerKey: 1, Total: 2}}
		}
		a1 := push(t, q, limited("a"))
		a2 := push(t, q, limited("a"))
		b1 := push(t, q, limited("b"))
		c1 := push(t, q, limited("c"))
		plain := push(t, q, dbqueue.NewJob{Name: "plain", Queue: "flow"})
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE reserved_at = ? AND flow_name = 'sync'", dialect.Parked); n != 4 {
			t.Fatalf("%d limited jobs wait parked, want 4", n)
		}

		got := reserve(t, q, 10, "flow")
		if want := []int64{a1, b1, plain}; !slices.Equal(sortedIDs(got), want) {
			t.Fatalf("first claim took %v, want %v: a1 and b1 (the total of 2 leaves c1 out, one per key leaves a2) and the plain job", sortedIDs(got), want)
		}
		if again := reserve(t, q, 10, "flow"); len(again) != 0 {
			t.Fatalf("a claim with the limit full took %v", sortedIDs(again))
		}
		byID := map[int64]*dbqueue.Job{}
		for _, j := range got {
			byID[j.ID] = j
			if j.ReservedAt.IsZero() || j.ReservedAt.Year() > 3000 {
				t.Fatalf("job %d reserved at %v: want the claim's time", j.ID, j.ReservedAt)
			}
		}

		// Finishing a1 frees a place in the total. The keys take turns
		// from where the last claim stopped (after b): c1's turn.
		if err := q.Delete(ctx, byID[a1]); err != nil {
			t.Fatal(err)
		}
		if next := reserve(t, q, 10, "flow"); !slices.Equal(sortedIDs(next), []int64{c1}) {
			t.Fatalf("after a1 finished the claim took %v, want c1 (its key's turn)", sortedIDs(next))
		}

		// A release waits parked, under the limit; the turn comes round
		// to a before b again.
		if err := q.Release(ctx, byID[b1], 0); err != nil {
			t.Fatal(err)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE id = ? AND reserved_at = ?", b1, dialect.Parked); n != 1 {
			t.Fatal("a released limited job is not parked again")
		}
		back := reserve(t, q, 10, "flow")
		if !slices.Equal(sortedIDs(back), []int64{a2}) {
			t.Fatalf("after b1's release the claim took %v, want a2", sortedIDs(back))
		}

		// An expired reservation frees its place, and is taken first:
		// a2's holder "died".
		db.Exec(t, "UPDATE jobs SET reserved_at = reserved_at - 100000 WHERE id = ?", a2)
		taken := reserve(t, q, 10, "flow")
		if !slices.Equal(sortedIDs(taken), []int64{a2}) || taken[0].Attempts != 2 {
			t.Fatalf("with a2's reservation expired the claim took %v, want a2 again at attempt 2", sortedIDs(taken))
		}

		limits, err := q.Limits(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(limits) != 1 || limits[0].Limit != "sync" || limits[0].PerKey != 1 || limits[0].Total != 2 || limits[0].Running != 2 || limits[0].Waiting != 1 {
			t.Fatalf("Limits = %+v, want sync 1/2 with 2 running and 1 waiting", limits)
		}
	})
}

// Bad limits are refused before anything is written.
func TestConcurrencyRefusesBadLimits(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		for _, c := range []struct {
			c    dbqueue.Concurrency
			want string
		}{
			{dbqueue.Concurrency{PerKey: 1}, "Limit is empty"},
			{dbqueue.Concurrency{Limit: "x"}, "PerKey is 0"},
			{dbqueue.Concurrency{Limit: "x", PerKey: 1, Total: -1}, "Total is -1"},
			{dbqueue.Concurrency{Limit: strings.Repeat("é", 100), PerKey: 1}, "at most 191"},
			{dbqueue.Concurrency{Limit: "x", Key: "a\x00b", PerKey: 1}, "without NUL"},
		} {
			_, err := q.Push(ctx, dbqueue.NewJob{Name: "x", Concurrency: &c.c})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("push with %+v: %v, want an error saying %q", c.c, err, c.want)
			}
		}
		if _, err := q.PushChain(ctx, dbqueue.NewJob{Name: "x", Concurrency: &dbqueue.Concurrency{Limit: "x", PerKey: 1}}); err == nil {
			t.Error("a chain with a limited job was pushed")
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 0 {
			t.Fatalf("%d jobs written by refused pushes", n)
		}
	})
}
