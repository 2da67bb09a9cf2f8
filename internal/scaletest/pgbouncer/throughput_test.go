//go:build linux

package pgbouncer_test

import (
	"context"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/worker"
)

// TestThroughputDirectVsPgBouncer is a measurement, not a check: single
// pushes from 16 goroutines, then a 64-goroutine worker draining a backlog
// of 50,000 jobs with a no-op handler, on a pool of 20 connections
// straight to PostgreSQL and through PgBouncer (20 server connections) in
// each exec mode; three rounds, the modes in a new order each round, the
// table vacuumed before each drain so no mode walks another's dead rows.
// It logs each mode's medians and their ratio to the direct pool's. It
// runs only with DBQUEUE_TEST_PGBOUNCER_BENCH=1.
func TestThroughputDirectVsPgBouncer(t *testing.T) {
	if os.Getenv("DBQUEUE_TEST_PGBOUNCER_BENCH") != "1" {
		t.Skip("a measurement: set DBQUEUE_TEST_PGBOUNCER_BENCH=1 to run it")
	}
	ctx := context.Background()
	db := dbtest.NewDatabase(t)
	bouncer := dbtest.StartPgBouncer(t, db.DSN, 20)
	const pushes, jobs, rounds = 2000, 50000, 3
	modes := []struct{ name, dsn string }{
		{"direct cache_statement", db.DSN},
		{"direct exec", dbtest.PgBouncerQueueDSN(db.DSN, "exec")},
		{"pgbouncer exec", dbtest.PgBouncerQueueDSN(bouncer.DSN, "exec")},
		{"pgbouncer cache_describe", dbtest.PgBouncerQueueDSN(bouncer.DSN, "cache_describe")},
		{"pgbouncer simple_protocol", dbtest.PgBouncerQueueDSN(bouncer.DSN, "simple_protocol")},
	}
	pushRates, workRates := make([][]float64, len(modes)), make([][]float64, len(modes))
	for r := range rounds {
		for k := range modes {
			i := (k + r) % len(modes)
			p, w := measureMode(ctx, t, db, modes[i].dsn, pushes, jobs)
			pushRates[i], workRates[i] = append(pushRates[i], p), append(workRates[i], w)
		}
	}
	base := median(workRates[0])
	for i, m := range modes {
		t.Logf("%-26s single pushes %6.0f/s   worked %6.0f jobs/s (%.0f–%.0f), %.2f of direct cache_statement",
			m.name, median(pushRates[i]), median(workRates[i]), slices.Min(workRates[i]), slices.Max(workRates[i]), median(workRates[i])/base)
	}
}

// median is the middle of xs (the mean of the two middle ones when even).
func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// measureMode pushes pushes jobs one at a time from 16 goroutines and the
// rest of jobs in batches, then drains them with one worker; it returns
// both rates.
func measureMode(ctx context.Context, t *testing.T, db *dbtest.DB, dsn string, pushes, jobs int) (pushRate, workRate float64) {
	q, pool := openQueue(ctx, t, dsn, 20)
	defer pool.Close()
	defer q.Close()
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
	pushRate = float64(pushes) / time.Since(start).Seconds()
	batch := make([]dbqueue.NewJob, 1000)
	for i := range batch {
		batch[i] = dbqueue.NewJob{Name: "noop"}
	}
	for range (jobs - pushes) / len(batch) {
		if _, err := q.PushMany(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	db.Exec(t, "VACUUM ANALYZE jobs")
	w, err := worker.New(q, worker.Options{Concurrency: 64, StopWhenEmpty: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	w.Handle("noop", func(context.Context, *dbqueue.Job) error { return nil })
	start = time.Now()
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	workRate = float64(jobs) / time.Since(start).Seconds()
	if n := db.Count(t, "SELECT count(*) FROM jobs"); n != 0 {
		t.Errorf("%d jobs left", n)
	}
	return pushRate, workRate
}
