//go:build linux

package pgbouncer_test

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/worker"
)

// TestThroughputDirectVsPgBouncer is a one-off measurement, not a check:
// single pushes from 16 goroutines, then a 64-goroutine worker draining
// the backlog with a no-op handler, on a pool of 20 connections straight
// to PostgreSQL and through PgBouncer (20 server connections) in each
// exec mode. It runs only with DBQUEUE_TEST_PGBOUNCER_BENCH=1; on a
// shared machine its numbers are noisy.
func TestThroughputDirectVsPgBouncer(t *testing.T) {
	if os.Getenv("DBQUEUE_TEST_PGBOUNCER_BENCH") != "1" {
		t.Skip("a measurement: set DBQUEUE_TEST_PGBOUNCER_BENCH=1 to run it")
	}
	ctx := context.Background()
	db := dbtest.NewDatabase(t)
	bouncer := dbtest.StartPgBouncer(t, db.DSN, 20)
	const pushes, jobs = 2000, 10000
	for _, c := range []struct{ name, dsn string }{
		{"direct cache_statement", db.DSN},
		{"direct exec", dbtest.PgBouncerQueueDSN(db.DSN, "exec")},
		{"pgbouncer exec", dbtest.PgBouncerQueueDSN(bouncer.DSN, "exec")},
		{"pgbouncer cache_describe", dbtest.PgBouncerQueueDSN(bouncer.DSN, "cache_describe")},
		{"pgbouncer simple_protocol", dbtest.PgBouncerQueueDSN(bouncer.DSN, "simple_protocol")},
	} {
		q, pool := openQueue(ctx, t, c.dsn, 20)
		start := time.Now()
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for range pushes / 16 {
					if _, err := q.Push(ctx, dbqueue.NewJob{Name: "noop"}); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		pushRate := float64(pushes) / time.Since(start).Seconds()
		batch := make([]dbqueue.NewJob, 1000)
		for i := range batch {
			batch[i] = dbqueue.NewJob{Name: "noop"}
		}
		for range (jobs - pushes) / len(batch) {
			if _, err := q.PushMany(ctx, batch); err != nil {
				t.Fatal(err)
			}
		}
		db.Exec(t, "ANALYZE jobs")
		w, err := worker.New(q, worker.Options{Concurrency: 64, StopWhenEmpty: true, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		w.Handle("noop", func(context.Context, *dbqueue.Job) error { return nil })
		start = time.Now()
		if err := w.Run(ctx); err != nil {
			t.Fatal(err)
		}
		workRate := float64(jobs) / time.Since(start).Seconds()
		if n := db.Count(t, "SELECT count(*) FROM jobs"); n != 0 {
			t.Errorf("%s: %d jobs left", c.name, n)
		}
		t.Logf("%-26s single pushes %6.0f/s   worked %6.0f jobs/s", c.name, pushRate, workRate)
		q.Close()
		pool.Close()
	}
}
