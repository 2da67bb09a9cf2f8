package worker_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/worker"
)

// A payload written by another producer with a negative or absurd timeout
// or backoff fails that job at once, saying which field and value, instead
// of wrapping into a negative time.Duration or retrying in a loop.
func TestAbsurdPayloadLimitsFailTheJob(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		var runs atomic.Int64
		w, _ := newWorker(t, q, worker.Options{Tries: 3, StopWhenEmpty: true})
		w.Handle("bad", func(context.Context, *dbqueue.Job) error { runs.Add(1); return errors.New("try again") })
		var okRuns atomic.Int64
		w.Handle("ok", func(context.Context, *dbqueue.Job) error { okRuns.Add(1); return nil })
		bad := []struct{ field, value string }{
			{"timeout", `-5`},
			{"timeout", `1e12`},
			{"timeout", `1e30`},
			{"backoff", `-3`},
			{"backoff", `9e18`},
			{"backoff", `"1,-3"`},
			{"backoff", `[5,9e18]`},
		}
		insert := "INSERT INTO jobs (queue, payload, attempts, available_at, created_at) VALUES ('default', ?, 0, 0, 0)"
		for i, b := range bad {
			db.Exec(t, insert, fmt.Sprintf(`{"uuid":"3f1e1c1a-0000-4000-8000-%012d","displayName":"bad","job":"bad","maxTries":null,"data":null,%q:%s}`, i, b.field, b.value))
		}
		db.Exec(t, insert, `{"uuid":"3f1e1c1a-0000-4000-8000-000000000100","displayName":"ok","job":"ok","data":null,"timeout":"3","backoff":"0,10"}`)
		if err := runUntil(t, w, 20*time.Second); err != nil {
			t.Fatal(err)
		}
		if runs.Load() != 0 || okRuns.Load() != 1 {
			t.Fatalf("bad jobs ran %d times and the good one %d; want 0 and 1", runs.Load(), okRuns.Load())
		}
		for i, b := range bad {
			var exception string
			err := db.SQL.QueryRow(db.Dialect.Rebind("SELECT exception FROM failed_jobs WHERE uuid = ?"), fmt.Sprintf("3f1e1c1a-0000-4000-8000-%012d", i)).Scan(&exception)
			if err != nil {
				t.Errorf("payload %s %s: not in failed_jobs: %v", b.field, b.value, err)
				continue
			}
			if !strings.Contains(exception, `"`+b.field+`"`) || !strings.Contains(exception, b.value) || !strings.Contains(exception, "100 years") {
				t.Errorf("payload %s %s failed with %q; want the field, the value and the allowed range", b.field, b.value, exception)
			}
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 0 {
			t.Errorf("%d jobs left", n)
		}
	})
}

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
		if err := db.SQL.QueryRow("SELECT available_at - " + db.Now() + " FROM jobs WHERE reserved_at IS NULL").Scan(&wait); err != nil {
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
		"Timeout":         {Timeout: huge},
		"GracePeriod":     {GracePeriod: huge},
		"Sleep":           {Sleep: huge},
		"MaxTime":         {MaxTime: huge},
		"Rest":            {Rest: huge},
		"UnknownKindWait": {UnknownKindWait: -time.Second},
		"SignalInterval":  {SignalInterval: -time.Second},
		"Backoff":         {Timeout: time.Second, Backoff: []time.Duration{time.Second, huge}},
		"MemoryLimitMB":   {MemoryLimitMB: math.MaxInt},
		"Concurrency":     {Concurrency: math.MaxInt},
		"Prefetch":        {Prefetch: math.MaxInt},
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
