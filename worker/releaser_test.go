package worker

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// Releases from many runners at once are written together, each runner
// still hearing its own job's outcome: released, or no longer held.
func TestReleasesAreBatched(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		ctx := context.Background()
		q := db.Queue(t)
		const n = 40
		jobs := make([]dbqueue.NewJob, n)
		for i := range jobs {
			jobs[i] = dbqueue.NewJob{Name: "flaky"}
		}
		if _, err := q.PushMany(ctx, jobs); err != nil {
			t.Fatal(err)
		}
		held, err := q.Reserve(ctx, n)
		if err != nil || len(held) != n {
			t.Fatalf("reserved %d, %v", len(held), err)
		}
		// The last job is let go first: its release must come back lost.
		if err := q.Release(ctx, held[n-1], 0); err != nil {
			t.Fatal(err)
		}
		var batches, written atomic.Int64
		rl := startReleaser(&releaser{q: q, flushed: func(k int) { batches.Add(1); written.Add(int64(k)) }})
		errs := make([]error, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, job := range held {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[i] = rl.release(ctx, job, time.Duration(i)*time.Second, nil, nil)
			}()
		}
		close(start)
		wg.Wait()
		rl.close()
		for i, err := range errs[:n-1] {
			if err != nil {
				t.Fatalf("release %d: %v", i, err)
			}
		}
		if !errors.Is(errs[n-1], dbqueue.ErrNotHeld) {
			t.Fatalf("release of a job already let go: %v, want ErrNotHeld", errs[n-1])
		}
		if written.Load() != n || batches.Load() > n/4 {
			t.Fatalf("%d releases written in %d statements; want %d in at most %d", written.Load(), batches.Load(), n, n/4)
		}
		for i, job := range held[:n-1] {
			got := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE id = ? AND reserved_at IS NULL AND available_at - created_at BETWEEN ? AND ?", job.ID, i, i+1)
			if got != 1 {
				t.Fatalf("job %d not released with its delay of %ds", job.ID, i)
			}
		}
		// Bad requests are refused alone, before they reach a batch.
		rl = newReleaser(q, nil)
		defer rl.close()
		if err := rl.release(ctx, held[0], -time.Second, nil, nil); err == nil {
			t.Fatal("negative delay accepted")
		}
		if err := rl.release(ctx, held[0], 0, []byte(`{"job":`), nil); err == nil {
			t.Fatal("malformed payload accepted")
		}
	})
}

// A runner that finishes after Run closed the batchers (its handler
// ignored cancellation past the grace period) still gets its job written,
// on its own, instead of sending on a closed channel.
func TestClosedBatchersWriteAlone(t *testing.T) {
	db := dbtest.New(t, dbqueue.SQLite)
	ctx := context.Background()
	q := db.Queue(t)
	if _, err := q.PushMany(ctx, []dbqueue.NewJob{{Name: "done"}, {Name: "again"}}); err != nil {
		t.Fatal(err)
	}
	jobs, err := q.Reserve(ctx, 2)
	if err != nil || len(jobs) != 2 {
		t.Fatalf("reserved %d, %v", len(jobs), err)
	}
	w, err := New(q, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := &run{w: w}
	defer r.openWrites(ctx)()
	c, rl := newCompleter(r), newReleaser(q, nil)
	c.close()
	rl.close()
	c.add(jobs[0])
	if err := rl.release(ctx, jobs[1], time.Hour, nil, nil); err != nil {
		t.Fatal(err)
	}
	if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 1 {
		t.Fatalf("%d jobs left, want only the released one", n)
	}
	if n := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE reserved_at IS NULL AND available_at > created_at + 3000"); n != 1 {
		t.Fatal("the released job is not back with its hour's delay")
	}
}
