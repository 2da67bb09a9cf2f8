// Package ceiling is the hand-written minimal queue loop that marks what a
// SQL job queue on a given database can reach at best: a table shaped like
// Laravel's `jobs`, multi-row INSERT to enqueue, and W worker goroutines each
// looping
//
//	claim B ids: SELECT … WHERE queue = ? AND reserved_at IS NULL
//	             AND available_at <= now ORDER BY id LIMIT B
//	             FOR UPDATE SKIP LOCKED
//	             + UPDATE reserved_at = now, attempts = attempts + 1
//	run them (no-op)
//	delete them, checked by ownership: WHERE (id, attempts) IN (…)
//
// "now" is always the database's clock. There is no retry_after reclaim, no
// failed_jobs, no events: whatever dbqueue adds on top of this costs
// something, and the ratio to this loop shows how much.
package ceiling

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dbqueue/dbqueue/bench"
)

// Options shared by both databases.
type Options struct {
	Workers int           // W worker goroutines; default 8
	Batch   int           // B jobs per claim; default 100 (cmd/compare follows dbqueue's claim size)
	Poll    time.Duration // sleep after a claim that found nothing; default 5ms
	Queue   string        // queue name; default "default"
	// Variant, if set, is appended to the system's name after
	// bench.CeilingVariantSep, e.g. "100" for "ceiling-pg-b100": a second
	// ceiling of the same database that the report lists but does not take
	// ratios against.
	Variant string
	// Insert runs the insert workload (see insert.go): each job inserts a
	// row into Effects and is deleted in a transaction of its own. Only
	// the PostgreSQL and MariaDB loops have it.
	Insert bool
	// TxConcurrency is how many job transactions of the insert workload
	// run at once; default DefaultTxConcurrency.
	TxConcurrency int
}

// name is base, or base-b<Variant> for a variant.
func (o Options) name(base string) string {
	if o.Insert {
		base += InsertSuffix
	}
	if o.Variant == "" {
		return base
	}
	return base + bench.CeilingVariantSep + o.Variant
}

func (o Options) withDefaults() Options {
	if o.Workers <= 0 {
		o.Workers = 8
	}
	if o.Batch <= 0 {
		o.Batch = 100
	}
	if o.Poll <= 0 {
		o.Poll = 5 * time.Millisecond
	}
	if o.Queue == "" {
		o.Queue = "default"
	}
	if o.TxConcurrency <= 0 {
		o.TxConcurrency = DefaultTxConcurrency
	}
	return o
}

// Schema (PostgreSQL) or database (MariaDB) the ceiling's table lives in.
const Schema = "ceiling_bench"

// insertBatch is how many rows one multi-row INSERT carries.
const insertBatch = 1_000

// Payload is a Laravel-style job envelope of realistic size. Each row gets
// its own copy with its own uuid (see payloads), as every real job has one:
// a push cannot share one payload between rows.
const Payload = `{"uuid":"7f0c0a8e-5f3b-4a39-9d7b-2f0e5d6c1b11","displayName":"App\\Jobs\\Bench",` +
	`"job":"Illuminate\\Queue\\CallQueuedHandler@call","maxTries":null,"maxExceptions":null,` +
	`"failOnTimeout":false,"backoff":null,"timeout":null,"retryUntil":null,` +
	`"data":{"commandName":"App\\Jobs\\Bench","command":"{\"num\":0}"},"createdAt":1700000000,"delay":null}`

// payloads returns k payloads, each Payload with a uuid of its own. Until
// 2026-11-24 the ceilings pushed one shared payload per statement (a bound
// parameter or session variable named once), which no queue can do; the
// end-to-end ceiling then paid for parsing and storing a few bytes per row
// where dbqueue sends each job's ~400.
func payloads(k int) []string {
	out := make([]string, k)
	for i := range out {
		n := payloadSeq.Add(1)
		out[i] = fmt.Sprintf("%08x-0000-4000-8000-%012x", uint32(n>>48), n&(1<<48-1)) + Payload[len(`{"uuid":"7f0c0a8e-5f3b-4a39-9d7b-2f0e5d6c1b11`):]
		out[i] = `{"uuid":"` + out[i]
	}
	return out
}

var payloadSeq atomic.Uint64

// claimed is one reserved job: its id and the attempts value our reservation
// wrote, which the ownership-checked delete matches on.
type claimed struct {
	id       int64
	attempts int64
}

// loop is the worker side shared by both databases: W goroutines, a shared
// done counter, and the moment the n-th job was deleted.
type loop struct {
	n      int64
	done   atomic.Int64
	cancel context.CancelFunc
	wg     sync.WaitGroup
	fin    chan struct{}
	once   sync.Once

	mu     sync.Mutex
	last   time.Time
	err    error
	errors int // transient errors retried
}

// workerFunc claims up to batch jobs, "runs" them and deletes them; it
// returns how many it completed.
type workerFunc func(ctx context.Context) (int, error)

// retryable reports whether an error should be retried rather than stop the
// run (deadlocks, lock wait timeouts, serialization failures).
type retryable func(error) bool

func startLoop(ctx context.Context, o Options, n int, work workerFunc, isRetryable retryable) *loop {
	ctx, cancel := context.WithCancel(ctx)
	l := &loop{n: int64(n), cancel: cancel, fin: make(chan struct{})}
	for range o.Workers {
		l.wg.Go(func() {
			for ctx.Err() == nil {
				k, err := work(ctx)
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					if isRetryable(err) {
						l.mu.Lock()
						l.errors++
						l.mu.Unlock()
						continue
					}
					l.finish(err)
					return
				}
				if k == 0 {
					select {
					case <-ctx.Done():
						return
					case <-time.After(o.Poll):
					}
					continue
				}
				if l.done.Add(int64(k)) >= l.n {
					l.finish(nil)
					return
				}
			}
		})
	}
	return l
}

func (l *loop) finish(err error) {
	l.once.Do(func() {
		l.mu.Lock()
		l.last = time.Now()
		l.err = err
		l.mu.Unlock()
		close(l.fin)
	})
}

func (l *loop) Wait(ctx context.Context) (time.Time, error) {
	var waitErr error
	select {
	case <-l.fin:
	case <-ctx.Done():
		waitErr = ctx.Err()
	}
	l.cancel()
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	if d := l.done.Load(); waitErr == nil && l.err == nil && d != l.n {
		return l.last, fmt.Errorf("completed %d jobs, want exactly %d", d, l.n)
	}
	return l.last, errors.Join(waitErr, l.err)
}

// Retries is how many transient errors the last run retried.
func (l *loop) Retries() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.errors
}

// placeholders writes n comma-separated groups produced by group(i).
func placeholders(n int, group func(b *strings.Builder, i int)) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		group(&b, i)
	}
	return b.String()
}

func itoa(i int) string { return strconv.Itoa(i) }
