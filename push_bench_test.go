package dbqueue_test

import (
	"fmt"
	"testing"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// BenchmarkPushMany times one PushMany of 10,000, 100,000 and 1,000,000
// jobs on PostgreSQL: array INSERTs of 1,000 rows in one transaction. It
// is the benchmark that retired the COPY path, which ran at 0.88–0.97 of
// it at these sizes (docs/measurements/choices.md).
//
//	go test . -run '^$' -bench BenchmarkPushMany -count 5
func BenchmarkPushMany(b *testing.B) {
	db := dbtest.New(b, dbqueue.Postgres)
	q := db.Queue(b)
	for _, size := range []int{10_000, 100_000, 1_000_000} {
		jobs := make([]dbqueue.NewJob, size)
		for i := range jobs {
			jobs[i] = dbqueue.NewJob{Name: "bench", Data: map[string]int{"n": i}}
		}
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			for b.Loop() {
				if _, err := q.PushMany(ctx, jobs); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				db.Exec(b, "TRUNCATE jobs")
				b.StartTimer()
			}
			b.ReportMetric(float64(b.N*len(jobs))/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}
