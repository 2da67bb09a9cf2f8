package dbqueue_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/worker"
)

// A weighted worker of 2,000 queues, 10 of them holding 5 jobs each,
// claims one job at a time and stops when the queues are empty. A claim
// statement per empty queue would be thousands (the last, empty claim
// alone reads all 2,000); reading which queues are ready first, the
// claims are about one per job plus one per queue that runs dry.
func TestManyQueuesSkipEmptyOnes(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		const listed, busy, each = 2000, 10, 5
		names := make([]string, listed)
		weights := map[string]int{}
		for i := range names {
			names[i] = fmt.Sprintf("width%04d", i)
			weights[names[i]] = 1 + i%3
		}
		var jobs []dbqueue.NewJob
		for _, name := range names[listed-busy:] { // the busy ones come last in Queues
			for range each {
				jobs = append(jobs, dbqueue.NewJob{Name: "job", Queue: name})
			}
		}
		if _, err := q.PushMany(ctx, jobs); err != nil {
			t.Fatal(err)
		}
		claims := dbqueue.CountClaims(q)
		ran := 0
		w, err := worker.New(q, worker.Options{
			Queues: names, QueueWeights: weights,
			Concurrency: 1, Prefetch: -1, Claims: 1, StopWhenEmpty: true,
			Sleep: 50 * time.Millisecond, SignalInterval: 50 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		w.Handle("job", func(context.Context, *dbqueue.Job) error { ran++; return nil })
		rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		if err := w.Run(rctx); err != nil || rctx.Err() != nil {
			t.Fatalf("run: %v (context: %v)", err, rctx.Err())
		}
		if ran != busy*each {
			t.Fatalf("ran %d jobs, want %d", ran, busy*each)
		}
		if n := claims.Load(); n > 2*busy*each {
			t.Fatalf("%d claim statements for %d jobs in %d busy queues among %d: the claims read empty queues", n, busy*each, busy, listed)
		}
	})
}

// A reserve over 300 queues of 3 jobs each takes the 900 in one claim
// statement, where a statement per queue took 300, and returns them queue
// by queue in the order the queues were given (here the reverse of their
// push order), each queue's jobs in the order they were pushed. A reserve
// of fewer stops inside the queue that fills it.
func TestReserveManyQueuesInOneStatement(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		const queues, each = 300, 3
		names := make([]string, queues)
		var jobs []dbqueue.NewJob
		for i := range names {
			names[i] = fmt.Sprintf("wide%03d", i)
			for range each {
				jobs = append(jobs, dbqueue.NewJob{Name: "job", Queue: names[i]})
			}
		}
		ids, err := q.PushMany(ctx, jobs)
		if err != nil {
			t.Fatal(err)
		}
		slices.Reverse(names)
		var want []int64
		for i := range names {
			first := (queues - 1 - i) * each
			want = append(want, ids[first:first+each]...)
		}
		claims := dbqueue.CountClaims(q)
		got, err := q.Reserve(ctx, 4, names...)
		if err != nil {
			t.Fatal(err)
		}
		if n := claims.Swap(0); n != 1 {
			t.Fatalf("a reserve of 4 over %d queues ran %d claim statements, want 1", queues, n)
		}
		if g := jobIDs(got); !slices.Equal(g, want[:4]) {
			t.Fatalf("a reserve of 4 took %v, want %v", g, want[:4])
		}
		got, err = q.Reserve(ctx, 1000, names...)
		if err != nil {
			t.Fatal(err)
		}
		if n := claims.Load(); n != 1 {
			t.Fatalf("a reserve over %d queues ran %d claim statements, want 1", queues, n)
		}
		if g := jobIDs(got); !slices.Equal(g, want[4:]) {
			t.Fatalf("a reserve over %d queues took %d jobs, want the %d left in the queues' order:\ngot  %v\nwant %v", queues, len(g), len(want)-4, g, want[4:])
		}
		for _, j := range got {
			if j.Queue == "" || j.Attempts != 1 {
				t.Fatalf("job %d: queue %q, attempts %d", j.ID, j.Queue, j.Attempts)
			}
		}
	})
}
