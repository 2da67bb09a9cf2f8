package dbqueue_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/worker"
)

// Another producer writes a chained job by hand whose next link a worker
// could not push: no queue, a list of numbers, a delay past any clock, a
// payload that is no job. The job must not run (it could never be
// finished: it would stay reserved and run again after every retry_after,
// a worker's RunOnce waiting on it meanwhile); it goes to failed_jobs at
// once, with an error that names the chain, and the row is not lost.
func TestChainThatCannotContinueIsFailedBeforeItRuns(t *testing.T) {
	cases := map[string]string{
		"no queue":        `[{"queue":"","payload":{"job":"next"}}]`,
		"not links":       `[1,2]`,
		"endless delay":   `[{"queue":"next","delay":9223372036854775807,"payload":{"job":"next"}}]`,
		"payload not job": `[{"queue":"next","payload":"not a job"},{"queue":"next","payload":{"job":"last"}}]`,
	}
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		for name, chained := range cases {
			db.Exec(t, "DELETE FROM failed_jobs")
			db.Exec(t, "INSERT INTO jobs (queue, payload, attempts, reserved_at, available_at, created_at) VALUES ('default', ?, 0, NULL, "+
				db.Now()+", "+db.Now()+")", `{"uuid":"u-`+strings.ReplaceAll(name, " ", "-")+`","job":"first","data":null,"chained":`+chained+`}`)
			w, err := worker.New(q, worker.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			ran := false
			w.Handle("first", func(context.Context, *dbqueue.Job) error { ran = true; return nil })
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			results, err := w.RunOnce(ctx)
			timedOut := ctx.Err() != nil
			cancel()
			if err != nil || timedOut {
				t.Fatalf("%s: RunOnce: %v (still busy after 15s: %v)", name, err, timedOut)
			}
			var exception string
			if n := db.Count(t, "SELECT COUNT(*) FROM failed_jobs"); n == 1 {
				_ = db.SQL.QueryRow("SELECT exception FROM failed_jobs").Scan(&exception)
			}
			reported := len(results) == 1 && results[0].Outcome == worker.OutcomeFailed
			if ran || !reported || db.Count(t, "SELECT COUNT(*) FROM jobs") != 0 || !strings.Contains(exception, `"chained"`) {
				t.Errorf("%s: handler ran %v, results %v, jobs left %d, failed_jobs exception %q; want it failed before it runs, saying the chain is bad",
					name, ran, results, db.Count(t, "SELECT COUNT(*) FROM jobs"), exception)
			}
		}
	})
}
