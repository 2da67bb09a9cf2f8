package dbqueue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/core"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// finisher is the batched finishes a worker uses (package worker's queueOps).
type finisher interface {
	DeleteMany(ctx context.Context, jobs []*dbqueue.Job) ([]*dbqueue.Job, error)
	ReleaseMany(ctx context.Context, rs []dbqueue.Releasing) ([]*dbqueue.Job, error)
}

// historyBatch is the jobs one benchmarked finish ends: a worker's
// batches are of this order.
const historyBatch = 100

// BenchmarkErrorHistory times the two finishes error history touches, a
// batch of 100 jobs at a time, on each database, the two variants of each
// in turn within every iteration so that a busy machine slows both
// alike: a release without an error (as before error history) against
// one with an error (history written, marked, pruned, in the release's
// statement or transaction), and the delete of jobs that never failed
// (no history: nothing more to do) against that of jobs with history (one
// more statement). Reported per job, with the ratio of the two.
//
//	go test . -run '^$' -bench BenchmarkErrorHistory -count 5
func BenchmarkErrorHistory(b *testing.B) {
	for _, d := range []dbqueue.Dialect{dbqueue.Postgres, dbqueue.MySQL, dbqueue.SQLite} {
		b.Run(string(d), func(b *testing.B) {
			db := dbtest.New(b, d)
			q := db.Queue(b)
			var fin finisher = core.WorkerSideOf[dbqueue.WorkerSide](q)
			cause := errors.New("upstream answered 503 Service Unavailable")
			held := func(b *testing.B, withHistory bool) []*dbqueue.Job {
				b.Helper()
				db.Exec(b, "DELETE FROM jobs")
				db.Exec(b, "DELETE FROM dbqueue_job_errors")
				jobs := make([]dbqueue.NewJob, historyBatch)
				for i := range jobs {
					jobs[i] = dbqueue.NewJob{Name: "bench", Data: map[string]int{"n": i}}
				}
				if _, err := q.PushMany(ctx, jobs); err != nil {
					b.Fatal(err)
				}
				got := reserveAll(b, q)
				if !withHistory {
					return got
				}
				if err := release(fin, got, cause); err != nil {
					b.Fatal(err)
				}
				db.Exec(b, "UPDATE jobs SET available_at = 0")
				return reserveAll(b, q)
			}
			deleteAll := func(jobs []*dbqueue.Job) error { _, err := fin.DeleteMany(ctx, jobs); return err }
			for _, c := range []struct {
				name, without, with string
				history             bool // the jobs of the second variant have history
				first, second       func([]*dbqueue.Job) error
			}{
				{"release", "plain", "error", false,
					func(jobs []*dbqueue.Job) error { return release(fin, jobs, nil) },
					func(jobs []*dbqueue.Job) error { return release(fin, jobs, cause) }},
				{"delete", "no-history", "history", true, deleteAll, deleteAll},
			} {
				b.Run(c.name, func(b *testing.B) {
					var took [2]time.Duration
					i := 0
					for b.Loop() {
						b.StopTimer()
						for k := range 2 {
							v := (i + k) % 2 // alternate which variant goes first
							jobs := held(b, v == 1 && c.history)
							fn := c.first
							if v == 1 {
								fn = c.second
							}
							start := time.Now()
							if err := fn(jobs); err != nil {
								b.Fatal(err)
							}
							took[v] += time.Since(start)
						}
						i++
						b.StartTimer()
					}
					per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N*historyBatch) }
					b.ReportMetric(per(took[0]), c.without+"-µs/job")
					b.ReportMetric(per(took[1]), c.with+"-µs/job")
					b.ReportMetric(float64(took[1])/float64(took[0]), "ratio")
				})
			}
		})
	}
}

func release(fin finisher, jobs []*dbqueue.Job, cause error) error {
	rs := make([]dbqueue.Releasing, len(jobs))
	for i, j := range jobs {
		rs[i] = dbqueue.Releasing{Job: j, Delay: time.Hour, Cause: cause}
	}
	_, err := fin.ReleaseMany(ctx, rs)
	return err
}

func reserveAll(b *testing.B, q *dbqueue.Queue) []*dbqueue.Job {
	b.Helper()
	jobs, err := q.Reserve(ctx, historyBatch)
	if err != nil || len(jobs) != historyBatch {
		b.Fatalf("reserved %d jobs (%v), want %d", len(jobs), err, historyBatch)
	}
	return jobs
}
