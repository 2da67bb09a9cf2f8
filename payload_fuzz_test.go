package dbqueue_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/worker"
)

// FuzzWorkerTakesOtherProducersPayload puts any bytes as the payload of a
// row another producer (a PHP app, a hand-written INSERT, a bad migration)
// wrote, with any attempts count, and lets a worker take it, on SQLite.
// Whatever the bytes, the worker must not panic or hang, must never lose
// the row, and must either run the job with usable settings (a finite
// timeout within retry_after, a backoff and a release delay within
// MaxDelay) and write its outcome, or move the row to failed_jobs with an
// error that says why. The handler succeeds or fails as the input says, so
// both ends of a job (a chain's next link pushed, a batch counted, a
// release with backoff) are reached.
func FuzzWorkerTakesOtherProducersPayload(f *testing.F) {
	for _, name := range []string{"string_job.json", "object_job.json", "object_job_retry_until.json"} {
		raw, err := os.ReadFile("testdata/laravel/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw, uint8(0), true)
		f.Add(raw, uint8(3), false)
		f.Add(raw, uint8(255), true)
		f.Add(raw, uint8(254), false)
	}
	for _, s := range []string{
		`{"job":"x","data":null}`,
		`{"job":"x","maxTries":"3","timeout":"60","backoff":[1,"2"],"exceptions":2,"maxExceptions":3}`,
		`{"job":"x","timeout":1e300,"backoff":"1,5,10"}`,
		`{"job":"x","timeout":-1}`,
		`{"job":"x","backoff":[9999999999999]}`,
		`{"job":"x","backoff":-3}`,
		`{"job":"x","retryUntil":-1}`,
		`{"job":"x","retryUntil":9223372036854775807}`,
		`{"job":"x","maxTries":-1}`,
		`{"job":"x","maxTries":0,"maxExceptions":-1,"exceptions":9223372036854775807}`,
		`{"job":"x","failOnTimeout":"yes"}`,
		`{"job":"x","batchId":"no-such-batch"}`,
		`{"job":"x","chained":[{"queue":"next","payload":{"job":"y"}}]}`,
		`{"job":"x","chained":[{"queue":"","payload":{"job":"y"}}]}`,
		`{"job":"x","chained":[{"queue":"next","delay":9223372036854775807,"payload":{"job":"y"}}]}`,
		`{"job":"x","chained":[{"queue":"next","runAt":-9223372036854775808,"payload":{"job":"y"}}]}`,
		`{"job":"x","chained":[{"queue":"next","payload":"not an object"}]}`,
		`{"job":"x","chained":[1,2]}`,
		`{"job":"x","chained":[]}`,
		`{"job":"x","headers":{"a":1}}`,
		`{"job":"","data":1}`, `{"uuid":"u-1"}`, `[]`, `null`, `{`, "", "\xff\xfe",
	} {
		f.Add([]byte(s), uint8(0), true)
		f.Add([]byte(s), uint8(1), false)
	}
	db := dbtest.New(f, dbqueue.SQLite)
	q := db.Queue(f)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	f.Fuzz(func(t *testing.T, raw []byte, attempts uint8, succeed bool) {
		db.Exec(t, "DELETE FROM jobs")
		db.Exec(t, "DELETE FROM failed_jobs")
		db.Exec(t, "DELETE FROM job_batches")
		// The top of the byte stands for the top of the attempts column
		// (2,147,483,647), which a job that keeps coming back reaches.
		tries := int64(attempts)
		if attempts > 250 {
			tries = math.MaxInt32 - int64(255-attempts)
		}
		db.Exec(t, "INSERT INTO jobs (queue, payload, attempts, reserved_at, available_at, created_at) VALUES ('default', ?, ?, NULL, "+
			db.Now()+", "+db.Now()+")", string(raw), tries)
		var id int64
		if err := db.SQL.QueryRow("SELECT id FROM jobs").Scan(&id); err != nil {
			t.Fatal(err)
		}
		w, err := worker.New(q, worker.Options{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		ran := 0
		p, decodeErr := dbqueue.DecodePayload(raw)
		if decodeErr == nil {
			w.Handle(p.Name(), func(ctx context.Context, job *dbqueue.Job) error {
				ran++
				deadline, ok := ctx.Deadline()
				if left := time.Until(deadline); !ok || left <= 0 || left > q.RetryAfter() {
					t.Errorf("job runs with %v left of its timeout (deadline set: %v); want a timeout within retry_after %v", left, ok, q.RetryAfter())
				}
				if succeed {
					return nil
				}
				return errors.New("the handler failed")
			})
		} else {
			w.Handle("unused", func(context.Context, *dbqueue.Job) error { return nil })
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		results, err := w.RunOnce(ctx)
		if ctx.Err() != nil {
			t.Fatalf("RunOnce still busy after 30s with payload %q", raw)
		}
		if err != nil {
			t.Fatalf("RunOnce: %v (payload %q)", err, raw)
		}
		inJobs := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE id = ?", id)
		inFailed := db.Count(t, "SELECT COUNT(*) FROM failed_jobs")
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE typeof(available_at) <> 'integer' OR typeof(attempts) <> 'integer'"); n > 0 {
			t.Errorf("%d rows of jobs hold a time or attempts that is not an integer (payload %q)", n, raw)
		}
		// Not a job a worker can run, or one whose claim reaches the top
		// of the attempts column: failed at the claim, saying why.
		var atClaim string
		switch {
		case decodeErr != nil:
			atClaim = "malformed payload"
		case tries+1 >= math.MaxInt32:
			atClaim = dbqueue.ErrAttemptsExhausted.Error()
		}
		if atClaim != "" {
			var exception string
			if inFailed == 1 {
				_ = db.SQL.QueryRow("SELECT exception FROM failed_jobs").Scan(&exception)
			}
			// RunOnce reports a job failed at its claim as failed, so the
			// caller sees it as a worker's log and events do.
			reported := len(results) == 1 && results[0].Outcome == worker.OutcomeFailed && results[0].Err != nil
			if !reported || ran != 0 || inJobs != 0 || inFailed != 1 || !strings.Contains(exception, atClaim) {
				t.Fatalf("payload %q (attempts %d, decode error %v): results %v, handler ran %d times, in jobs %d, in failed_jobs %d (%q); want it failed at the claim with %q",
					raw, tries, decodeErr, results, ran, inJobs, inFailed, exception, atClaim)
			}
			return
		}
		if len(results) != 1 {
			t.Fatalf("payload %q: %d results, want 1", raw, len(results))
		}
		res := results[0]
		if ran > 1 {
			t.Fatalf("payload %q: the handler ran %d times", raw, ran)
		}
		reserved := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE id = ? AND reserved_at IS NOT NULL", id)
		switch res.Outcome {
		case worker.OutcomeDone:
			if ran != 1 || !succeed || inJobs != 0 || inFailed != 0 || res.Err != nil {
				t.Fatalf("payload %q: done (%v) with the handler run %d times, succeed %v, in jobs %d, in failed_jobs %d", raw, res.Err, ran, succeed, inJobs, inFailed)
			}
		case worker.OutcomeReleased:
			if inJobs != 1 || reserved != 0 || inFailed != 0 || res.Delay < 0 || res.Delay > dbqueue.MaxDelay {
				t.Fatalf("payload %q: released for %v (%v), in jobs %d (reserved %d), in failed_jobs %d", raw, res.Delay, res.Err, inJobs, reserved, inFailed)
			}
		case worker.OutcomeFailed:
			if inJobs != 0 || inFailed != 1 || res.Err == nil {
				t.Fatalf("payload %q: failed (%v), in jobs %d, in failed_jobs %d", raw, res.Err, inJobs, inFailed)
			}
		default:
			// Given back or left reserved: a handler that returns at once
			// never needs either, so the worker could not write what
			// became of the job.
			t.Fatalf("payload %q (attempts %d, succeed %v): %s (%v); in jobs %d (reserved %d), in failed_jobs %d",
				raw, tries, succeed, res.Outcome, res.Err, inJobs, reserved, inFailed)
		}
	})
}
