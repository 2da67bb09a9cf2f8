package dbqueue_test

import (
	"fmt"
	"testing"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// BenchmarkPushMany times one PushMany of 10,000, 100,000 and 1,000,000
// jobs on PostgreSQL by array INSERTs (1,000 rows a statement, one
// transaction) and by COPY on one table: the numbers behind copyThreshold.
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
		for _, path := range []struct {
			name      string
			threshold int
		}{{"insert", size + 1}, {"copy", size}} {
			b.Run(fmt.Sprintf("%d/%s", size, path.name), func(b *testing.B) {
				defer dbqueue.SetCopyThreshold(path.threshold)()
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
}
