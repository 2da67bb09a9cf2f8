package worker_test

import (
	"context"
	"errors"
	"maps"
	"strings"
	"sync"
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

// Another producer's job chains a link with no queue (or one no Go worker
// can push): its success could never be written, so it must not run again
// and again. It is failed at its claim, before its handler runs, saying
// what is wrong with the chain, and JobFailed fires once for it.
func TestPoisonChainLinkFailsTheJobOnce(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		const retryAfter = 8 * time.Second
		q := db.Queue(t, dbqueue.WithRetryAfter(retryAfter))
		insertRaw(t, db, "default", `{"uuid":"0e5d9c8a-1111-4222-8333-444455556666","displayName":"poison","job":"poison","maxTries":null,`+
			`"data":{},"chained":[{"queue":"","payload":{"uuid":"0e5d9c8a-1111-4222-8333-444455556667","displayName":"next","job":"next","data":{}}}]}`)
		// A PHP producer's chain: serialized commands no Go worker can push.
		insertRaw(t, db, "default", `{"uuid":"0e5d9c8a-1111-4222-8333-444455556668","displayName":"poison","job":"poison","maxTries":null,`+
			`"data":{},"chained":["O:8:\"stdClass\":0:{}"]}`)
		// A link that is no job, and one delayed past any time.
		insertRaw(t, db, "default", `{"uuid":"0e5d9c8a-1111-4222-8333-444455556669","displayName":"poison","job":"poison","maxTries":null,`+
			`"data":{},"chained":[{"queue":"default","payload":5}]}`)
		insertRaw(t, db, "default", `{"uuid":"0e5d9c8a-1111-4222-8333-44445555666a","displayName":"poison","job":"poison","maxTries":null,`+
			`"data":{},"chained":[{"queue":"default","delay":9000000000000000000,"payload":{"uuid":"0e5d9c8a-1111-4222-8333-444455556667","displayName":"next","job":"next","data":{}}}]}`)
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
		if runs.Load() != 0 || failed.Load() != 4 {
			t.Fatalf("handlers ran %d times, JobFailed fired %d times; want 0 and 4", runs.Load(), failed.Load())
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 0 {
			t.Fatalf("%d rows left in jobs: the job that succeeded will run again", n)
		}
		for uuid, what := range map[string]string{"0e5d9c8a-1111-4222-8333-444455556666": "queue", "0e5d9c8a-1111-4222-8333-444455556668": "not a list of chain links",
			"0e5d9c8a-1111-4222-8333-444455556669": "malformed payload", "0e5d9c8a-1111-4222-8333-44445555666a": "delay"} {
			var exception string
			if err := db.SQL.QueryRow(db.Dialect.Rebind("SELECT exception FROM failed_jobs WHERE uuid = ?"), uuid).Scan(&exception); err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"chain", what} {
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

// failures collects what JobFailed and a handler's OnFailure heard.
type failures struct {
	mu        sync.Mutex
	hook, own map[string]error // by the job's raw payload
}

func (f *failures) record(m *map[string]error, job *dbqueue.Job, cause error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if *m == nil {
		*m = map[string]error{}
	}
	(*m)[string(job.RawPayload)] = cause
}

func (f *failures) get() (hook, own map[string]error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.hook), maps.Clone(f.own)
}

// Jobs failed when they are claimed, without running — a payload that
// does not decode, a row reserved as often as its attempts column can
// count — are failures an operator must see like any other: a log line,
// JobFailed, and the handler's OnFailure when the payload names one.
func TestClaimTimeFailuresAreReported(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		const (
			malformed = `{not json`
			exhausted = `{"uuid":"0e5d9c8a-1111-4222-8333-444455550001","displayName":"spent","job":"spent","data":{}}`
		)
		insertRaw(t, db, "default", malformed)
		db.Exec(t, "INSERT INTO jobs (queue, payload, attempts, reserved_at, available_at, created_at) VALUES ('default', ?, 2147483646, NULL, "+
			db.Now()+", "+db.Now()+")", exhausted)
		var f failures
		o := worker.Options{StopWhenEmpty: true, Events: worker.Events{
			JobFailed: func(_ context.Context, job *dbqueue.Job, cause error) { f.record(&f.hook, job, cause) }}}
		w, logs := newWorker(t, q, o)
		w.Handle("spent", func(context.Context, *dbqueue.Job) error { t.Error("a spent job ran"); return nil },
			worker.OnFailure(func(_ context.Context, job *dbqueue.Job, cause error) { f.record(&f.own, job, cause) }))
		if err := runUntil(t, w, 60*time.Second); err != nil {
			t.Fatal(err)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM failed_jobs"); n != 2 {
			t.Fatalf("%d rows in failed_jobs, want 2", n)
		}
		hook, own := f.get()
		if cause, ok := hook[exhausted]; !ok || !errors.Is(cause, dbqueue.ErrAttemptsExhausted) {
			t.Errorf("JobFailed for the spent job: %v (heard %v), want ErrAttemptsExhausted", cause, ok)
		}
		if cause, ok := own[exhausted]; !ok || !errors.Is(cause, dbqueue.ErrAttemptsExhausted) {
			t.Errorf("OnFailure for the spent job: %v (heard %v), want ErrAttemptsExhausted", cause, ok)
		}
		if cause, ok := hook[malformed]; !ok || cause == nil {
			t.Errorf("JobFailed did not hear of the malformed payload: %v", hook)
		}
		log := logs.String()
		for _, want := range []string{"attempts column can count", "malformed payload"} {
			if !strings.Contains(log, want) {
				t.Errorf("the log does not mention %q:\n%s", want, log)
			}
		}
	})
}

// Worker A's reservation of a job runs out while its handler is still
// busy; the job is reclaimed by B, which fails it with the same text A's
// handler is about to fail it with (the same upstream refused both). B's
// failure is the one recorded; A's worker must not fire its failure hooks
// for a failure it did not write.
func TestStaleHolderDoesNotFireFailureHooksForAnotherHoldersFailure(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		id := pushN(t, q, 1, dbqueue.NewJob{Name: "flaky"})[0]
		cause := "upstream answered 503"
		bFailed := make(chan struct{})
		var hooks, callbacks atomic.Int64
		o := sequential // A claims nothing while its handler runs: B does
		o.Events.JobFailed = func(context.Context, *dbqueue.Job, error) { hooks.Add(1) }
		w, _ := newWorker(t, q, o)
		w.Handle("flaky", func(ctx context.Context, job *dbqueue.Job) error {
			// A's reservation runs out; B reclaims the job and fails it.
			db.Exec(t, "UPDATE jobs SET reserved_at = reserved_at - 100000 WHERE id = ?", id)
			b, err := q.Reserve(context.Background(), 1)
			if err != nil || len(b) != 1 {
				t.Errorf("worker B reserved %v, %v", b, err)
			} else if err := q.Fail(context.Background(), b[0], errors.New(cause)); err != nil {
				t.Errorf("B's Fail: %v", err)
			}
			close(bFailed)
			return worker.FailNow(errors.New(cause))
		}, worker.OnFailure(func(context.Context, *dbqueue.Job, error) { callbacks.Add(1) }))
		if err := runUntil(t, w, 60*time.Second); err != nil {
			t.Fatal(err)
		}
		<-bFailed
		if hooks.Load() != 0 || callbacks.Load() != 0 {
			t.Fatalf("stale worker A fired JobFailed %d times and OnFailure %d times for B's failure; want 0", hooks.Load(), callbacks.Load())
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM failed_jobs"); n != 1 {
			t.Fatalf("%d rows in failed_jobs, want B's one", n)
		}
	})
}

// RunOnce (dbqueuetest.Work) reports the jobs its claims failed without
// running as Run does: in its results, and to JobFailed.
func TestRunOnceReportsClaimTimeFailures(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		insertRaw(t, db, "default", `{not json`)
		pushN(t, q, 1, dbqueue.NewJob{Name: "ok"})
		var failed atomic.Int64
		w, _ := newWorker(t, q, worker.Options{Events: worker.Events{
			JobFailed: func(context.Context, *dbqueue.Job, error) { failed.Add(1) }}})
		w.Handle("ok", func(context.Context, *dbqueue.Job) error { return nil })
		results, err := w.RunOnce(bg)
		if err != nil {
			t.Fatal(err)
		}
		if len(results) != 2 || results[0].Outcome != worker.OutcomeFailed || results[0].Err == nil ||
			string(results[0].Job.RawPayload) != `{not json` || results[1].Outcome != worker.OutcomeDone {
			t.Fatalf("RunOnce results %+v, want the malformed job failed, then the good one done", results)
		}
		if failed.Load() != 1 {
			t.Fatalf("JobFailed fired %d times, want 1", failed.Load())
		}
	})
}
