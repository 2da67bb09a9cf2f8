package periodic_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/periodic"
)

// A schedule is removed by a deploy. A week and more later its tick locks
// are gone from the lock table, deleted by the schedulers still running;
// locks that a late process could still need (younger than a week) stay.
func TestRemovedScheduleLocksArePruned(t *testing.T) {
	t.Parallel()
	quiet := periodic.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		const day = 24 * 3600
		// The removed schedule ran once, a while ago.
		gone, err := periodic.New(db.Queue(t), []periodic.Job{{
			Name:     "gone",
			Schedule: periodic.Every(time.Second),
			New:      func(time.Time) dbqueue.NewJob { return dbqueue.NewJob{Name: "gone", Queue: "gone"} },
		}}, quiet)
		if err != nil {
			t.Fatal(err)
		}
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = gone.Run(ctx) }()
		dbtest.WaitFor(t, 15*time.Second, "the schedule to remove pushes", func() bool {
			return db.Count(t, "SELECT COUNT(*) FROM jobs WHERE queue = 'gone'") > 0
		})
		stop()
		<-done
		locks := db.Count(t, "SELECT COUNT(*) FROM dbqueue_unique")
		if locks == 0 {
			t.Fatal("the schedule left no lock to prune")
		}
		// Eight days pass: age its locks. A lock of a week ago less a day
		// (some other schedule's) must stay.
		db.Exec(t, "UPDATE dbqueue_unique SET expires_at = expires_at - ?", 8*day)
		db.Exec(t, "INSERT INTO dbqueue_unique (lock_key, job_id, until_mode, expires_at) VALUES ('recent', 0, 3, "+db.Now()+" - ?)", 6*day)

		kept, err := periodic.New(db.Queue(t), []periodic.Job{{
			Name:     "kept",
			Schedule: periodic.Every(time.Second),
			New:      func(time.Time) dbqueue.NewJob { return dbqueue.NewJob{Name: "kept", Queue: "kept"} },
		}}, quiet)
		if err != nil {
			t.Fatal(err)
		}
		ctx, stop = context.WithCancel(context.Background())
		done = make(chan struct{})
		go func() { defer close(done); _ = kept.Run(ctx) }()
		defer func() { stop(); <-done }()
		old := "SELECT COUNT(*) FROM dbqueue_unique WHERE expires_at <= " + db.Now() + " - ?"
		if !dbtest.Until(15*time.Second, func() bool {
			return db.Count(t, old, 7*day) == 0 && db.Count(t, "SELECT COUNT(*) FROM jobs WHERE queue = 'kept'") > 0
		}) {
			t.Fatalf("%d of the removed schedule's %d locks still there after 15s", db.Count(t, old, 7*day), locks)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM dbqueue_unique WHERE lock_key = 'recent'"); n != 1 {
			t.Error("a tick lock six days old was pruned; a late process could still need it")
		}
	})
}
