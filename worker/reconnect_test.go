package worker_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/worker"
)

// TestWorkerRidesOutLostDatabase cuts every connection to the database, and
// refuses new ones for a while, in the middle of a run: the worker logs,
// waits, reconnects and finishes every job; Run does not return early.
func TestWorkerRidesOutLostDatabase(t *testing.T) {
	t.Parallel()
	for _, d := range []dbqueue.Dialect{dbqueue.Postgres, dbqueue.MySQL} {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			db := dbtest.New(t, d)
			proxy, dsn := db.Proxy(t)
			q, err := dbqueue.Open(bg, dsn, dbqueue.WithRetryAfter(8*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			const total = 400
			pushN(t, q, total, dbqueue.NewJob{Name: "n"})
			var (
				mu   sync.Mutex
				runs = map[int64]int{}
			)
			ctx, cancel := context.WithTimeout(bg, 60*time.Second)
			defer cancel()
			w, logs := newWorker(t, q, worker.Options{Concurrency: 4, Timeout: 2 * time.Second, Tries: 3})
			w.Handle("n", func(ctx context.Context, job *dbqueue.Job) error {
				mu.Lock()
				runs[job.ID]++
				n := len(runs)
				mu.Unlock()
				if n == total {
					cancel()
				}
				if n == total/4 {
					proxy.Cut()
					time.AfterFunc(1500*time.Millisecond, proxy.Restore)
				}
				time.Sleep(2 * time.Millisecond) // the job's work: keeps jobs running while the cut lasts
				return nil
			})
			// A claim whose reply was lost with the connection holds its jobs
			// until retry_after, and counts as an attempt (hence Tries: 3);
			// the worker must still be running when they come back.
			if err := w.Run(ctx); err != nil {
				t.Fatal(err)
			}
			if len(runs) != total {
				rows, _ := db.SQL.Query("SELECT id, attempts, reserved_at, available_at FROM jobs")
				for rows.Next() {
					var id, att, av int64
					var res *int64
					rows.Scan(&id, &att, &res, &av)
					t.Logf("left: id=%d attempts=%d reserved=%v available=%d", id, att, res, av)
				}
				t.Fatalf("%d of %d jobs ran; log:\n%s", len(runs), total, logs)
			}
			if n := db.Count(t, "SELECT COUNT(*) FROM jobs") + db.Count(t, "SELECT COUNT(*) FROM failed_jobs"); n != 0 {
				t.Fatalf("%d rows left in jobs and failed_jobs", n)
			}
			// Its end may come after the last job ran (they may all have
			// been reserved before the cut): only its start is sure.
			if !strings.Contains(logs.String(), "reserving jobs stopped") {
				t.Fatalf("the outage was not logged:\n%s", logs)
			}
		})
	}
}
