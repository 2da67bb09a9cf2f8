package worker

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// UnwrittenError is what Run returns (and Events.WorkerStopping receives)
// when it stopped with jobs whose outcomes it could not write: the
// database stayed unreachable through the grace period, or the queue was
// closed under the worker. Those jobs stay reserved and run again once
// their reservations pass retry_after; IDs names them, so an operator
// knows which jobs may run twice. Match it with errors.As.
type UnwrittenError struct {
	// IDs are the jobs' ids, in the order they were given up.
	IDs []int64
	// Err is the error the last of those writes met.
	Err error
}

func (e *UnwrittenError) Error() string {
	const shown = 20
	ids := make([]string, 0, min(len(e.IDs), shown))
	for _, id := range e.IDs[:min(len(e.IDs), shown)] {
		ids = append(ids, strconv.FormatInt(id, 10))
	}
	list := strings.Join(ids, ", ")
	if len(e.IDs) > shown {
		list += fmt.Sprintf(" and %d more", len(e.IDs)-shown)
	}
	return fmt.Sprintf("worker: stopped without writing the outcomes of %d jobs (ids %s): they stay reserved and run again after retry_after: %v", len(e.IDs), list, e.Err)
}

func (e *UnwrittenError) Unwrap() error { return e.Err }

// lastWrite is how long a write of job outcomes may take once the grace
// period is over before it is cut: a database that accepts connections
// and never answers holds a stopping worker no longer.
const lastWrite = 2 * time.Second

// writes is how a run bounds the writing of job outcomes as it stops:
// while it runs and through the grace period, a write that fails is
// retried (until the job's reservation is about to expire); once the grace
// period is over, each gets one more try, cut after lastWrite.
type writes struct {
	// retrying ends when the grace period does (endRetrying), or as the
	// run returns.
	retrying    context.Context
	endRetrying context.CancelFunc
	hooks       *sqldb.RetryHooks // stops sqldb.Retry's retries with retrying

	mu      sync.Mutex
	ids     []int64 // jobs given up as the worker stopped
	lastErr error
}

// openWrites starts the bounds on parent's values; the function it
// returns releases them.
func (r *run) openWrites(parent context.Context) (release func()) {
	wr := &r.writes
	wr.retrying, wr.endRetrying = context.WithCancel(context.WithoutCancel(parent))
	wr.hooks = &sqldb.RetryHooks{Stop: wr.retrying.Done()}
	return wr.endRetrying
}

// writeCtx is the context of one try at writing outcomes: parent's
// values, at most flushTimeout, at most lastWrite past the end of the
// grace period, and with the retries inside it (sqldb.Retry retries a
// refused connection for up to 30s) stopped when the grace period is
// over.
func (r *run) writeCtx(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), flushTimeout)
	stop := context.AfterFunc(r.writes.retrying, func() { time.AfterFunc(lastWrite, cancel) })
	return sqldb.WithRetryHooks(ctx, r.writes.hooks), func() { stop(); cancel() }
}

// gaveUp records jobs whose outcome was not written: those given up as
// the worker stops, or because the queue was closed (which stops it), are
// what Run reports.
func (r *run) gaveUp(err error, jobs ...*dbqueue.Job) {
	if !r.stopping.Load() && !sqldb.IsClosed(err) {
		return
	}
	wr := &r.writes
	wr.mu.Lock()
	defer wr.mu.Unlock()
	for _, j := range jobs {
		wr.ids = append(wr.ids, j.ID)
	}
	wr.lastErr = err
}

// unwritten is the error Run returns for the jobs given up as it stopped,
// nil when there were none.
func (r *run) unwritten() error {
	wr := &r.writes
	wr.mu.Lock()
	defer wr.mu.Unlock()
	if len(wr.ids) == 0 {
		return nil
	}
	return &UnwrittenError{IDs: append([]int64(nil), wr.ids...), Err: wr.lastErr}
}
