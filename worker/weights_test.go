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

// With QueueWeights a:3, b:1 and both queues full, a worker that claims
// one job at a time takes a's jobs three times as often as b's; when a
// runs dry it keeps taking b's, and it drains both.
func TestQueueWeightsShareClaims(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		pushN(t, q, 60, dbqueue.NewJob{Name: "job", Queue: "a"})
		pushN(t, q, 60, dbqueue.NewJob{Name: "job", Queue: "b"})
		order := claimOrder(t, q, worker.Options{QueueWeights: map[string]int{"a": 3, "b": 1}}, 120)
		count := func(jobs []string, queue string) int {
			n := 0
			for _, j := range jobs {
				if j == queue {
					n++
				}
			}
			return n
		}
		// While both have jobs (the first 80 claims), a gets 3 of every 4,
		// spread out: every 8 claims hold 6 of a's (strict priority would
		// take all 60 of a's first). The schedule is deterministic; the
		// tolerance of one is for a claim a future change might batch
		// differently.
		if a := count(order[:80], "a"); a < 58 || a > 62 {
			t.Fatalf("of the first 80 jobs %d came from a, want 60 (3:1): %v", a, order[:80])
		}
		for i := 0; i < 80; i += 8 {
			if a := count(order[i:i+8], "a"); a < 5 || a > 7 {
				t.Fatalf("jobs %d to %d: %d from a, want 6 of 8 (3:1): %v", i, i+8, a, order[:80])
			}
		}
		if b := count(order[80:], "b"); b != 40 {
			t.Fatalf("after a ran dry, %d of the last 40 jobs came from b, want 40", b)
		}
	})
}

// claimOrder runs a worker with o's queues and weights, one job per claim
// (no prefetch, one claim in flight) so that the order its handler sees
// is the order of the claims, until the queues are empty, and returns the
// queue of each job it ran; it fails unless that is all want jobs.
func claimOrder(t *testing.T, q *dbqueue.Queue, o worker.Options, want int) []string {
	t.Helper()
	var (
		mu    sync.Mutex
		order []string
	)
	o.Concurrency, o.Prefetch, o.Claims, o.StopWhenEmpty = 1, -1, 1, true
	w, _ := newWorker(t, q, o)
	w.Handle("job", func(_ context.Context, job *dbqueue.Job) error {
		mu.Lock()
		order = append(order, job.Queue)
		mu.Unlock()
		return nil
	})
	if err := runUntil(t, w, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	if len(order) != want {
		t.Fatalf("ran %d jobs, want all %d", len(order), want)
	}
	return order
}

// Over more queues than the worker claims one by one, where it claims
// from the queues the ready set holds in one statement, the weights still
// share the claims: 40 queues listed, 20 of them holding jobs, m00 of
// weight 3, m01 of weight 2 and the rest of weight 1. A worker that claims
// one job at a time takes, in every 23 claims while all 20 have jobs,
// 3 of m00's, 2 of m01's and one of each other's; the empty queues take no
// turn. Then it drains them all.
func TestQueueWeightsShareClaimsOverManyQueues(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		weights := map[string]int{}
		var queues []string
		for i := range 40 {
			name := fmt.Sprintf("m%02d", i)
			queues = append(queues, name)
			weights[name] = 1
			if i < 20 {
				pushN(t, q, 10, dbqueue.NewJob{Name: "job", Queue: name})
			}
		}
		weights["m00"], weights["m01"] = 3, 2
		order := claimOrder(t, q, worker.Options{Queues: queues, QueueWeights: weights}, 200)
		for start := 0; start < 46; start += 23 {
			count := map[string]int{}
			for _, name := range order[start : start+23] {
				count[name]++
			}
			for i := range 20 {
				name := queues[i]
				if count[name] != weights[name] {
					t.Fatalf("claims %d to %d took %d of %s's jobs, want its weight %d: %v", start, start+23, count[name], name, weights[name], order[start:start+23])
				}
			}
		}
	})
}
