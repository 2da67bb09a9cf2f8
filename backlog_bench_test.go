package dbqueue_test

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// BenchmarkReserveBehindDelayedBacklog measures one job's round trip (push
// one, reserve one, delete it) on an empty queue and on a queue holding a
// backlog of delayed jobs (DBQUEUE_BENCH_BACKLOG, default 1,000,000). The
// two numbers should be close: the claim reads the ready jobs' index and
// never the delayed rows.
//
//	go test . -run '^$' -bench BenchmarkReserveBehindDelayedBacklog -benchtime 2000x
func BenchmarkReserveBehindDelayedBacklog(b *testing.B) {
	backlog := 1_000_000
	if s := os.Getenv("DBQUEUE_BENCH_BACKLOG"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			b.Fatalf("DBQUEUE_BENCH_BACKLOG=%q: want a number of jobs", s)
		}
		backlog = n
	}
	for _, d := range dbtest.Dialects {
		b.Run(string(d), func(b *testing.B) {
			// This level has sub-benchmarks, so it runs once: the fill is
			// not repeated for each b.N.
			for _, size := range []int{0, backlog} {
				db := dbtest.New(b, d)
				fillJobs(b, db, "bench", size, 3600, false)
				analyze(b, db)
				q := db.Queue(b)
				b.Run(fmt.Sprintf("backlog=%d", size), func(b *testing.B) {
					for b.Loop() {
						id, err := q.Push(ctx, dbqueue.NewJob{Name: "ready", Queue: "bench"})
						if err != nil {
							b.Fatal(err)
						}
						jobs, err := q.Reserve(ctx, 1, "bench")
						if err != nil {
							b.Fatal(err)
						}
						if len(jobs) != 1 || jobs[0].ID != id {
							b.Fatalf("reserved %d jobs, want the one just pushed (%d)", len(jobs), id)
						}
						if err := q.Delete(ctx, jobs[0]); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}
