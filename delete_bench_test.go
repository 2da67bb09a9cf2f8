package dbqueue_test

import (
	"context"
	"testing"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/core"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// BenchmarkDeleteBatch times the success path of jobs that never failed,
// 100 a batch, with nothing but the API every version since batched
// finishes has: copy it into a worktree of another version to compare the
// two side by side (docs/measurements/features.md, "Error history").
//
//	go test . -run '^$' -bench BenchmarkDeleteBatch -benchtime 50x
func BenchmarkDeleteBatch(b *testing.B) {
	type deleter interface {
		DeleteMany(ctx context.Context, jobs []*dbqueue.Job) ([]*dbqueue.Job, error)
	}
	for _, d := range []dbqueue.Dialect{dbqueue.Postgres, dbqueue.MySQL, dbqueue.SQLite} {
		b.Run(string(d), func(b *testing.B) {
			db := dbtest.New(b, d)
			q := db.Queue(b)
			var fin deleter = core.WorkerSideOf[dbqueue.WorkerSide](q)
			jobs := make([]dbqueue.NewJob, 100)
			for i := range jobs {
				jobs[i] = dbqueue.NewJob{Name: "bench", Data: map[string]int{"n": i}}
			}
			for b.Loop() {
				b.StopTimer()
				if _, err := q.PushMany(context.Background(), jobs); err != nil {
					b.Fatal(err)
				}
				held, err := q.Reserve(context.Background(), 100)
				if err != nil || len(held) != 100 {
					b.Fatal(len(held), err)
				}
				b.StartTimer()
				if _, err := fin.DeleteMany(context.Background(), held); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*100), "µs/job")
		})
	}
}
