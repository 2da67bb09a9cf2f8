package worker_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/worker"
)

// manyNames are n queue names, more than a worker reads one by one.
func manyNames(prefix string, n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s%03d", prefix, i)
	}
	return names
}

// A worker of many queues claims from those found ready, and still runs
// jobs that arrive where the set found none: pushed by this process (a
// wake-up), by a second Queue handle, and by a plain INSERT as another
// process would write it (no wake-up at all), and an expired reservation
// in a queue that is otherwise empty.
func TestManyQueuesClaimLateJobs(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q, other := db.Queue(t), db.Queue(t)
		names := manyNames("w", 40)
		weights := map[string]int{}
		for i, n := range names {
			weights[n] = 1 + i%3
		}
		push := func(q *dbqueue.Queue, queue, name string) int64 {
			id, err := q.Push(bg, dbqueue.NewJob{Name: name, Queue: queue})
			if err != nil {
				t.Fatal(err)
			}
			return id
		}
		first := push(q, names[0], "first")
		expired := push(q, names[20], "expired")
		held, err := q.Reserve(bg, 1, names[20])
		if err != nil || len(held) != 1 || held[0].ID != expired {
			t.Fatalf("reserve the job to expire: %v, %v", held, err)
		}
		// Its holder died long ago.
		db.Exec(t, "UPDATE jobs SET reserved_at = reserved_at - 1000 WHERE id = ?", expired)

		var (
			mu  sync.Mutex
			ran = map[string]int{} // job name → attempts
			ids = map[string]int64{}
		)
		w, logs := newWorker(t, q, worker.Options{QueueWeights: weights, Concurrency: 2})
		handle := func(ctx context.Context, job *dbqueue.Job) error {
			mu.Lock()
			ran[job.Name()] = job.Attempts
			ids[job.Name()] = job.ID
			mu.Unlock()
			if job.Name() != "first" {
				return nil
			}
			// The ready set was read before these queues held a job.
			push(q, names[39], "same-process")
			push(other, names[38], "second-handle")
			payload := `{"uuid":"00000000-0000-4000-8000-000000000001","displayName":"plain-insert","job":"plain-insert","maxTries":null,"data":null}`
			db.Exec(t, "INSERT INTO jobs (queue, payload, attempts, reserved_at, available_at, created_at) VALUES (?, ?, 0, NULL, "+db.Now()+", "+db.Now()+")", names[37], payload)
			return nil
		}
		for _, name := range []string{"first", "expired", "same-process", "second-handle", "plain-insert"} {
			w.Handle(name, handle)
		}
		ctx, cancel := context.WithCancel(bg)
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		dbtest.WaitFor(t, 30*time.Second, "all five jobs run", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(ran) == 5
		})
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("run: %v\n%s", err, logs)
		}
		mu.Lock()
		defer mu.Unlock()
		if ids["first"] != first || ids["expired"] != expired || ran["expired"] != 2 {
			t.Fatalf("ran %v (ids %v): want job %d first and expired job %d on its second attempt", ran, ids, first, expired)
		}
	})
}

// Among many listed queues, the weights are shared exactly by the queues
// that hold jobs: empty ones take no turn in the round. a:3 and b:1 beside
// 18 empty queues get the claims 3:1, six of a's in every eight.
func TestManyQueuesWeightsShareAmongReady(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		names := append([]string{"a", "b"}, manyNames("empty", 18)...)
		weights := map[string]int{"a": 3, "b": 1}
		for _, n := range names[2:] {
			weights[n] = 2
		}
		pushN(t, q, 60, dbqueue.NewJob{Name: "job", Queue: "a"})
		pushN(t, q, 60, dbqueue.NewJob{Name: "job", Queue: "b"})
		order := claimOrder(t, q, worker.Options{Queues: names, QueueWeights: weights}, 120)
		for i := 0; i < 80; i += 8 {
			a := 0
			for _, q := range order[i : i+8] {
				if q == "a" {
					a++
				}
			}
			if a != 6 {
				t.Fatalf("jobs %d to %d: %d from a, want exactly 6 of 8 (3:1 between the two ready queues): %v", i, i+8, a, order[:80])
			}
		}
		for _, q := range order[80:] {
			if q != "b" {
				t.Fatalf("after a ran dry a job came from %s, want only b: %v", q, order[80:])
			}
		}
	})
}
