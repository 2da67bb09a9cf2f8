//go:build linux

package galera

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/worker"
)

// testThroughput (DBQUEUE_GALERA_BENCH=1) measures one workload on a single
// private MariaDB and on the Galera cluster, writing to one node or to all
// three: push 6,000 no-op jobs in batches of 100 from three pushers, then
// drain them with three workers of 8 goroutines. Each figure is the median
// of three runs; the machine is shared and noisy, so read ratios, not
// absolutes.
func testThroughput(t *testing.T, c *dbtest.Cluster) {
	single := dbtest.StartServer(t, dbqueue.MySQL)
	type setup struct {
		name string
		dbs  func() []*dbtest.DB // the database each of the three pushers and workers uses
	}
	setups := []setup{
		{"single MariaDB", func() []*dbtest.DB { db := dbtest.NewOn(t, single); return []*dbtest.DB{db, db, db} }},
		{"Galera, all on node 1", func() []*dbtest.DB { dbs := c.NewDB(t); return []*dbtest.DB{dbs[0], dbs[0], dbs[0]} }},
		{"Galera, one per node", func() []*dbtest.DB { return c.NewDB(t) }},
	}
	for _, s := range setups {
		var push, drain []float64
		cert0, bf0 := certStats(c)
		for range 3 {
			p, d := throughputRun(t, s.dbs())
			push, drain = append(push, p), append(drain, d)
		}
		cert1, bf1 := certStats(c)
		slices.Sort(push)
		slices.Sort(drain)
		t.Logf("%-22s push %6.0f jobs/s  drain %6.0f jobs/s  (runs: push %.0f, drain %.0f; Galera cert failures %d, BF aborts %d)",
			s.name, push[1], drain[1], push, drain, cert1-cert0, bf1-bf0)
	}
}

func throughputRun(t *testing.T, dbs []*dbtest.DB) (push, drain float64) {
	const (
		pushers  = 3
		batches  = 20 // per pusher
		perBatch = 100
		total    = pushers * batches * perBatch
	)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	qs := make([]*dbqueue.Queue, len(dbs))
	for i, db := range dbs {
		q, err := dbqueue.Open(ctx, db.DSN)
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		qs[i] = q
	}
	start := time.Now()
	var wg sync.WaitGroup
	for _, q := range qs {
		wg.Go(func() {
			jobs := make([]dbqueue.NewJob, perBatch)
			for i := range jobs {
				jobs[i] = dbqueue.NewJob{Name: "noop"}
			}
			for range batches {
				if _, err := q.PushMany(ctx, jobs); err != nil {
					t.Errorf("push: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	push = total / time.Since(start).Seconds()
	// Every node must have applied the pushes before the workers start, or
	// a worker on a lagging node stops early on an empty poll.
	end, _ := ctx.Deadline()
	for _, db := range dbs {
		dbtest.Until(time.Until(end), func() bool { return db.Count(t, "SELECT COUNT(*) FROM jobs") >= total })
	}
	start = time.Now()
	for _, q := range qs {
		w, err := worker.New(q, worker.Options{Concurrency: 8, StopWhenEmpty: true, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		w.Handle("noop", func(context.Context, *dbqueue.Job) error { return nil })
		wg.Go(func() {
			if err := w.Run(ctx); err != nil {
				t.Errorf("worker: %v", err)
			}
		})
	}
	wg.Wait()
	// A stopped worker's last claims may still be on their way; the count
	// is checked below.
	dbtest.Until(time.Until(end), func() bool { return dbs[0].Count(t, "SELECT COUNT(*) FROM jobs") == 0 })
	drain = total / time.Since(start).Seconds()
	if n := dbs[0].Count(t, "SELECT COUNT(*) FROM jobs"); n != 0 {
		t.Errorf("%d jobs left", n)
	}
	return push, drain
}
