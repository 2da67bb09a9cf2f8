package dbqueue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// Concurrency limits how many jobs run at once across every worker
// process of a fleet, enforced when jobs are claimed: a job that may not
// start yet is not claimed, so it uses no attempt, holds no handler, and
// never fails for waiting (Laravel's WithoutOverlapping and RateLimited
// release the job instead; package middleware keeps those for queues
// shared with PHP workers).
//
// Jobs pushed with the same Limit share it. Within a limit, at most
// PerKey jobs of one Key run at once, and at most Total of all keys
// (0: no cap over the keys). Some shapes:
//
//   - one job of a kind at a time: Limit "kind:SendReport", PerKey 1;
//   - at most 5 jobs of a queue at once: the same Concurrency on every
//     push to the queue (a typed job's JobOptions, or push middleware);
//   - at most 1 per customer and 20 in all: Limit "sync", Key the
//     customer's id, PerKey 1, Total 20.
//
// A job runs under the limit from its claim until it is finished,
// released or failed, or until its reservation expires (retry_after: its
// worker died), which frees its place. The caps are written to the
// database by the push (<jobs>_flow, migration 00014), so every worker
// obeys those of the last push that declared them.
//
// Laravel's workers never take a limited job (it waits with a
// reserved_at in the far future), and dbqueue's workers start it only
// through the limit; a job Laravel pushes carries no limit.
type Concurrency struct {
	// Limit names the limit, up to 191 bytes of UTF-8 without NUL.
	Limit string
	// Key splits the limit (a customer, a tenant, an account); "" puts
	// every job of the limit under one key. Up to 191 bytes.
	Key string
	// PerKey is the most jobs of one key running at once: at least 1.
	PerKey int
	// Total is the most jobs of the limit running at once over all its
	// keys; 0 for no such cap.
	Total int
}

// ConcurrencyKeyer is a JobArgs whose jobs each name their key within
// their type's Concurrency limit (JobOptions.Concurrency): JobFor sets
// Key from it when the options leave Key empty.
type ConcurrencyKeyer interface {
	ConcurrencyKey() string
}

func (c Concurrency) check() error {
	for _, f := range []struct{ what, s string }{{"Limit", c.Limit}, {"Key", c.Key}} {
		switch {
		case f.what == "Limit" && f.s == "":
			return errors.New("Concurrency.Limit is empty: name the limit")
		case len(f.s) > dialect.MaxFlowName:
			return fmt.Errorf("Concurrency.%s is %d bytes: at most %d (hash a longer one)", f.what, len(f.s), dialect.MaxFlowName)
		case !utf8.ValidString(f.s) || strings.ContainsRune(f.s, 0):
			return fmt.Errorf("Concurrency.%s %q is not UTF-8 text without NUL", f.what, f.s)
		}
	}
	if c.PerKey < 1 {
		return fmt.Errorf("Concurrency.PerKey is %d: at least 1 job of a key must be able to run", c.PerKey)
	}
	if c.Total < 0 {
		return fmt.Errorf("Concurrency.Total is %d: 0 for no cap, or the most jobs of the limit at once", c.Total)
	}
	return nil
}

// flows is a Queue's knowledge of the limits: whether any exists (so a
// worker on a database without limits never runs the limited claim).
type flows struct {
	mu     sync.Mutex
	any    bool
	readAt time.Time
}

// flowsEvery is how often a Queue that knows of no limit asks the
// database whether one was declared.
const flowsEvery = time.Second

// declareFlows writes the caps of the limits jobs use, each once per
// call, outside any caller's transaction. Every call reads them back
// (one primary-key read a limit) rather than trusting an earlier call: a
// limit whose row went missing would leave its jobs parked for good.
func (q *Queue) declareFlows(ctx context.Context, jobs []NewJob) error {
	var done []string
	for _, j := range jobs {
		if j.Concurrency == nil || slices.Contains(done, j.Concurrency.Limit) {
			continue
		}
		f := dialect.Flow{Name: j.Concurrency.Limit, PerKey: j.Concurrency.PerKey, Total: j.Concurrency.Total}
		err := sqldb.Retry(ctx, func() error { return q.sql.DeclareFlow(ctx, q.db, f) })
		if err != nil {
			return sqldb.Wrap("declare concurrency limit "+f.Name, err)
		}
		done = append(done, f.Name)
		q.flows.mu.Lock()
		q.flows.any = true
		q.flows.mu.Unlock()
	}
	return nil
}

// anyFlows reports whether the database may hold limited jobs: a limit
// was declared (by this Queue, or found in <jobs>_flow at most flowsEvery
// ago). A missing table (migration 00014 not run) counts as none.
func (q *Queue) anyFlows(ctx context.Context) bool {
	q.flows.mu.Lock()
	defer q.flows.mu.Unlock()
	if q.flows.any || time.Since(q.flows.readAt) < flowsEvery {
		return q.flows.any
	}
	q.flows.readAt = time.Now()
	fs, err := q.sql.Flows(ctx, q.db, q.retryAfter)
	q.flows.any = err == nil && len(fs) > 0
	return q.flows.any
}

// placesFreed wakes the workers of the queues of the limited jobs among
// jobs, which ended: a job waiting under their limit may start now. This
// process's are woken at once; other processes' by the database where it
// carries notifications (PostgreSQL), else at their next poll.
func (q *Queue) placesFreed(ctx context.Context, jobs []*Job) {
	var queues []string
	for _, j := range jobs {
		if j.limited && !slices.Contains(queues, j.Queue) {
			queues = append(queues, j.Queue)
			q.wake.wakeLocal(j.Queue, false)
		}
	}
	if len(queues) > 0 {
		// A hint: a worker that misses it polls.
		_ = q.sql.PlacesFreed(context.WithoutCancel(ctx), q.db, queues)
	}
}

// insert writes rows with the dialect's plain insert, or, when some run
// under a limit, one statement a row, in one transaction.
func (q *Queue) insert(ctx context.Context, ex sqldb.Execer, rows []dialect.PushRow, notify bool) ([]int64, error) {
	limited := false
	for _, r := range rows {
		limited = limited || r.Flow != ""
	}
	if !limited {
		return q.sql.Insert(ctx, ex, rows, notify)
	}
	if db, ok := ex.(sqldb.DB); ok && len(rows) > 1 {
		var ids []int64
		err := sqldb.InTx(ctx, db, sqldb.TxOptions{}, func(tx sqldb.Tx) (err error) {
			ids, err = q.sql.InsertFlow(ctx, tx, rows)
			return err
		})
		return ids, err
	}
	return q.sql.InsertFlow(ctx, ex, rows)
}

// Limits lists the concurrency limits declared on this queue's table, with
// the jobs running under each (claimed less than retry_after ago) and
// waiting for a place.
func (q *Queue) Limits(ctx context.Context) ([]LimitInfo, error) {
	fs, err := q.sql.Flows(ctx, q.db, q.retryAfter)
	if err != nil {
		return nil, sqldb.Wrap("read concurrency limits", err)
	}
	out := make([]LimitInfo, len(fs))
	for i, f := range fs {
		out[i] = LimitInfo{
			Concurrency: Concurrency{Limit: f.Name, PerKey: f.PerKey, Total: f.Total},
			Running:     f.Running, Waiting: f.Waiting, Keys: f.Keys,
		}
	}
	return out, nil
}

// LimitInfo is one concurrency limit as Queue.Limits reads it; its
// Concurrency has no Key.
type LimitInfo struct {
	Concurrency
	// Running counts the limit's jobs running now, Waiting those waiting
	// for a place or their time.
	Running, Waiting int64
	// Keys counts the keys with a job running or waiting.
	Keys int64
}
