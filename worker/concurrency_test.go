package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/worker"
)

// flowLedger counts the jobs of a limit running at once, per key and in
// all, from inside the handlers: a job counts from its handler's start to
// its end, and the database counts it longer (until its delete commits),
// so the ledger's peaks are never above what the claims allowed.
type flowLedger struct {
	mu             sync.Mutex
	running        map[string]int
	total          int
	maxKey, maxAll int
	ran            map[int]int
	done           chan struct{}
	want           int
}

func (l *flowLedger) start(key string, i int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.running[key]++
	l.total++
	l.maxKey = max(l.maxKey, l.running[key])
	l.maxAll = max(l.maxAll, l.total)
	l.ran[i]++
}

func (l *flowLedger) end(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.running[key]--
	l.total--
	if len(l.ran) == l.want && l.total == 0 {
		select {
		case <-l.done:
		default:
			close(l.done)
		}
	}
}

// Four workers, each on a Queue (a pool) of its own as four processes
// would be, with 8 handlers each, run 120 jobs under a limit of 2 per key
// and 4 in all: never more at once, every job once.
func TestConcurrencyLimitAcrossWorkers(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		const jobs, perKey, total = 120, 2, 4
		l := &flowLedger{running: map[string]int{}, ran: map[int]int{}, done: make(chan struct{}), want: jobs}
		push := db.Queue(t)
		for i := range jobs {
			key := fmt.Sprintf("k%d", i%5)
			_, err := push.Push(context.Background(), dbqueue.NewJob{Name: "limited", Data: map[string]any{"i": i, "key": key},
				Concurrency: &dbqueue.Concurrency{Limit: "fleet", Key: key, PerKey: perKey, Total: total}})
			if err != nil {
				t.Fatal(err)
			}
		}
		runCtx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var wg sync.WaitGroup
		for range 4 {
			w, logs := newWorker(t, db.Queue(t), worker.Options{Concurrency: 8, Sleep: 20 * time.Millisecond})
			w.Handle("limited", func(ctx context.Context, j *dbqueue.Job) error {
				var d struct {
					I   int
					Key string
				}
				if err := json.Unmarshal(j.Payload.Data, &d); err != nil {
					return err
				}
				l.start(d.Key, d.I)
				defer l.end(d.Key)
				time.Sleep(2 * time.Millisecond) // the job's work
				return nil
			})
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := w.Run(runCtx); err != nil {
					t.Errorf("Run: %v\n%s", err, logs)
				}
			}()
		}
		select {
		case <-l.done:
		case <-time.After(2 * time.Minute):
			t.Errorf("after 2 minutes %d of %d jobs ran", len(l.ran), jobs)
		}
		cancel()
		wg.Wait()
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.maxKey > perKey || l.maxAll > total {
			t.Fatalf("at once: %d jobs of one key (limit %d), %d in all (limit %d)", l.maxKey, perKey, l.maxAll, total)
		}
		if l.maxAll < 2 {
			t.Errorf("never more than %d job at once: the limit of %d ran them one by one", l.maxAll, total)
		}
		for i := range jobs {
			if l.ran[i] != 1 {
				t.Fatalf("job %d ran %d times", i, l.ran[i])
			}
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 0 {
			t.Fatalf("%d jobs left in the table", n)
		}
	})
}
