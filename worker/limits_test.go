package worker_test

import (
	"context"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/worker"
)

// ReleaseAfter with a delay past time.Duration's seconds range saturates at
// MaxDelay instead of wrapping into the past and running the job again.
func TestReleaseAfterSaturates(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		var runs atomic.Int64
		w, _ := newWorker(t, q, worker.Options{Tries: 1, StopWhenEmpty: true})
		w.Handle("later", func(context.Context, *dbqueue.Job) error {
			runs.Add(1)
			return worker.ReleaseAfter(math.MaxInt64)
		})
		pushN(t, q, 1, dbqueue.NewJob{Name: "later"})
		if err := runUntil(t, w, 20*time.Second); err != nil {
			t.Fatal(err)
		}
		if runs.Load() != 1 || db.Count(t, "SELECT COUNT(*) FROM failed_jobs") != 0 {
			t.Fatalf("ran %d times, %d failed; want one run, released", runs.Load(), db.Count(t, "SELECT COUNT(*) FROM failed_jobs"))
		}
		var wait int64
		if err := db.SQL.QueryRow("SELECT available_at - " + db.Dialect.Now() + " FROM jobs WHERE reserved_at IS NULL").Scan(&wait); err != nil {
			t.Fatal(err)
		}
		if most := int64(worker.MaxDelay / time.Second); wait < most-60 || wait > most {
			t.Fatalf("released for %ds, want MaxDelay, %ds", wait, most)
		}
	})
}

// Option durations that are negative or would wrap when a margin is added
// are refused by New, naming the option.
func TestRefusesAbsurdOptions(t *testing.T) {
	q := dbtest.New(t, dbqueue.SQLite).Queue(t) // retry_after 90s: the default Timeout, 60s, fits
	const huge = time.Duration(math.MaxInt64)
	for name, o := range map[string]worker.Options{
		"Timeout":        {Timeout: huge},
		"GracePeriod":    {GracePeriod: huge},
		"Sleep":          {Sleep: huge},
		"MaxTime":        {MaxTime: huge},
		"Rest":           {Rest: huge},
		"SignalInterval": {SignalInterval: -time.Second},
		"Backoff":        {Timeout: time.Second, Backoff: []time.Duration{time.Second, huge}},
		"MemoryLimitMB":  {MemoryLimitMB: math.MaxInt},
		"Concurrency":    {Concurrency: math.MaxInt},
		"Prefetch":       {Prefetch: math.MaxInt},
	} {
		_, err := worker.New(q, o)
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v, want refused naming %s", name, err, name)
		}
	}
	ok := worker.Options{Timeout: time.Second, GracePeriod: worker.MaxDelay, MaxTime: worker.MaxDelay, Backoff: []time.Duration{worker.MaxDelay}}
	if _, err := worker.New(q, ok); err != nil {
		t.Fatalf("durations of MaxDelay refused: %v", err)
	}
}
