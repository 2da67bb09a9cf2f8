package dbqueue_test

import (
	"testing"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// BenchmarkPushMany10k times one PushMany of 10,000 jobs on PostgreSQL by
// multi-row INSERTs and by COPY on one table: the numbers behind
// copyThreshold.
//
//	go test . -run '^$' -bench BenchmarkPushMany10k -count 5
func BenchmarkPushMany10k(b *testing.B) {
	db := dbtest.New(b, dbqueue.Postgres)
	q := db.Queue(b)
	jobs := make([]dbqueue.NewJob, 10_000)
	for i := range jobs {
		jobs[i] = dbqueue.NewJob{Name: "bench", Data: map[string]int{"n": i}}
	}
	for _, path := range []struct {
		name      string
		threshold int
	}{{"insert", len(jobs) + 1}, {"copy", len(jobs)}} {
		b.Run(path.name, func(b *testing.B) {
			defer dbqueue.SetCopyThreshold(path.threshold)()
			for b.Loop() {
				if _, err := q.PushMany(ctx, jobs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*len(jobs))/b.Elapsed().Seconds(), "jobs/s")
			b.StopTimer()
			db.Exec(b, "TRUNCATE jobs")
		})
	}
}
