package worker_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/worker"
)

// insertRaw adds a job row as another producer would: its own payload
// text, written straight into the jobs table, due now.
func insertRaw(t *testing.T, db *dbtest.DB, queue, payload string) {
	t.Helper()
	db.Exec(t, "INSERT INTO jobs (queue, payload, attempts, reserved_at, available_at, created_at) VALUES (?, ?, 0, NULL, "+
		db.Now()+", "+db.Now()+")", queue, payload)
}

// Another producer's job chains a link with no queue: the job's own work
// succeeds, but the success can never be written (the next link cannot be
// pushed). The job must not run again and again: it is failed at once,
// saying what was wrong with the link and that the handler succeeded.
func TestPoisonChainLinkFailsTheJobOnce(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		const retryAfter = 8 * time.Second
		q := db.Queue(t, dbqueue.WithRetryAfter(retryAfter))
		insertRaw(t, db, "default", `{"uuid":"0e5d9c8a-1111-4222-8333-444455556666","displayName":"poison","job":"poison","maxTries":null,`+
			`"data":{},"chained":[{"queue":"","payload":{"uuid":"0e5d9c8a-1111-4222-8333-444455556667","displayName":"next","job":"next","data":{}}}]}`)
		// A PHP producer's chain: serialized commands no Go worker can push.
		insertRaw(t, db, "default", `{"uuid":"0e5d9c8a-1111-4222-8333-444455556668","displayName":"poison","job":"poison","maxTries":null,`+
			`"data":{},"chained":["O:8:\"stdClass\":0:{}"]}`)
		var runs, failed atomic.Int64
		o := worker.Options{Tries: worker.Unlimited, Timeout: time.Second, StopWhenEmpty: true,
			Events: worker.Events{JobFailed: func(context.Context, *dbqueue.Job, error) { failed.Add(1) }}}
		w, logs := newWorker(t, q, o)
		w.Handle("poison", func(context.Context, *dbqueue.Job) error { runs.Add(1); return nil })
		w.Handle("next", func(context.Context, *dbqueue.Job) error { t.Error("the poison link ran"); return nil })
		start := time.Now()
		if err := runUntil(t, w, 60*time.Second); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took > retryAfter/2 {
			t.Errorf("the worker spent %v retrying a finish that could never succeed", took)
		}
		if runs.Load() != 2 || failed.Load() != 2 {
			t.Fatalf("handlers ran %d times, JobFailed fired %d times; want 2 and 2", runs.Load(), failed.Load())
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 0 {
			t.Fatalf("%d rows left in jobs: the job that succeeded will run again", n)
		}
		for uuid, what := range map[string]string{"0e5d9c8a-1111-4222-8333-444455556666": "queue", "0e5d9c8a-1111-4222-8333-444455556668": "decode"} {
			var exception string
			if err := db.SQL.QueryRow(db.Dialect.Rebind("SELECT exception FROM failed_jobs WHERE uuid = ?"), uuid).Scan(&exception); err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"succeeded", "chain", what} {
				if !strings.Contains(exception, want) {
					t.Errorf("failed_jobs.exception %q does not mention %q", exception, want)
				}
			}
		}
		if strings.Contains(logs.String(), "cannot finish job; retrying") {
			t.Errorf("a finish that can never succeed was retried:\n%s", logs)
		}
	})
}
