package worker_test

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/worker"
)

// BenchmarkBurnDown is the worker's cost per job: b.N no-op jobs are
// pushed (not timed), then one worker, tuned as bench/cmd/compare runs it
// (Concurrency 100, Prefetch 1,900), claims, runs and deletes them all.
// One op is one job, so allocs/op and B/op are the Go side's allocations
// per job, claim, run and delete included; the database's own CPU is not
// in ns/op's denominator but is in its wall time.
//
//	go test ./worker -run '^$' -bench BurnDown -benchtime 100000x
func BenchmarkBurnDown(b *testing.B) {
	for _, d := range dbtest.Dialects {
		b.Run(string(d), func(b *testing.B) { burnDown(b, d, 0) })
	}
}

// BenchmarkMetricsCost is BenchmarkBurnDown with the worker's metrics on
// (the default, MetricsInterval 10 s) and off (-1), side by side in each
// run, so that -count N alternates them. Its cpu-ns/op is this process's
// CPU per job: the recording is all client side (the database gets one
// upsert per queue and kind every 10 s), so the difference between the two
// is the metrics' cost per job, steadier than a rate on a shared machine.
//
//	go test ./worker -run '^$' -bench MetricsCost -benchtime 200000x -count 5
func BenchmarkMetricsCost(b *testing.B) {
	for _, d := range dbtest.Dialects {
		for _, m := range []struct {
			name     string
			interval time.Duration
		}{{"on", 0}, {"off", -1}} {
			b.Run(string(d)+"/metrics-"+m.name, func(b *testing.B) { burnDown(b, d, m.interval) })
		}
	}
}

// burnDown pushes b.N jobs (not timed) and times one worker burning them
// down, with Options.MetricsInterval set to metrics.
func burnDown(b *testing.B, d dbqueue.Dialect, metrics time.Duration) {
	db := dbtest.New(b, d)
	q := db.Queue(b)
	jobs := make([]dbqueue.NewJob, 1000)
	for i := range jobs {
		jobs[i] = dbqueue.NewJob{Name: "bench", Data: map[string]int{"num": i}}
	}
	for left := b.N; left > 0; left -= len(jobs) {
		if _, err := q.PushMany(context.Background(), jobs[:min(left, len(jobs))]); err != nil {
			b.Fatal(err)
		}
	}
	var ran atomic.Int64
	w, err := worker.New(q, worker.Options{
		Concurrency: 100, Prefetch: 1900, StopWhenEmpty: true, Sleep: 10 * time.Millisecond,
		MetricsInterval: metrics,
		// Job lines are info: off, as in bench/dbqueueq.
		Logger: slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		b.Fatal(err)
	}
	w.Handle("bench", func(context.Context, *dbqueue.Job) error {
		ran.Add(1)
		return nil
	})
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	if err := w.Run(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	// This process's CPU per job: steadier than ns/op on a shared
	// machine, and on a small one what the database does not get.
	b.ReportMetric(float64((processCPU()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
	if got := ran.Load(); got != int64(b.N) {
		b.Fatalf("ran %d jobs, want %d", got, b.N)
	}
	if n := db.Count(b, "SELECT COUNT(*) FROM jobs"); n != 0 {
		b.Fatalf("%d jobs left in the table", n)
	}
}

// processCPU is the user and system time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
