package worker

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/queueside"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// Transactional handlers: the worker begins a transaction on the queue's
// database, the handler writes in it, and the job's end is written in it
// too before the worker commits, so the handler's effect and the job's
// end commit together or not at all (see dbqueue.Queue.CompleteTx).

// txOps is the part of a dbqueue.Queue's worker side that transactional
// handlers use.
type txOps interface {
	BeginNative(ctx context.Context, as reflect.Type) (native any, tx sqldb.Tx, err error)
	NativeTx() []reflect.Type
	CompleteIn(ctx context.Context, tx sqldb.Tx, job *dbqueue.Job) (before, after *dbqueue.Batch, err error)
	ReleaseIn(ctx context.Context, tx sqldb.Tx, job *dbqueue.Job, delay time.Duration, giveBack bool) error
	FailIn(ctx context.Context, tx sqldb.Tx, job *dbqueue.Job, cause error) (before, after *dbqueue.Batch, err error)
	Snooze(ctx context.Context, job *dbqueue.Job, d time.Duration) error
}

func txOpsOf(q *dbqueue.Queue) txOps { return queueside.Of(q) }

// HandleTx registers a transactional handler for jobs named name: for
// each job the worker begins a transaction on the queue's database and
// passes it to fn. When fn returns nil the job is completed in that
// transaction (deleted with its reservation checked, a chain's next link
// pushed, a batch counted) and the worker commits: fn's writes and the
// job's end happen together, exactly once. Returning ReleaseAfter, Snooze,
// Cancel or Discard writes that in the transaction instead, and commits.
// An error, FailNow, a panic or a timeout rolls everything back, and the
// job is released or failed as for Handle. A worker whose reservation was
// lost (it ran past retry_after and another worker took the job) rolls
// back and applies nothing. Jobs pushed in tx (PushTx, dbqpgx.PushTx)
// exist only if it commits.
//
// Tx is *sql.Tx on every queue, or pgx.Tx on a queue on a pgx pool
// (dbqpgx.New, and Open of a PostgreSQL DSN; there a *sql.Tx runs through
// a database/sql pool over the same pgx pool). Registering another panics,
// as registering a name twice does.
//
// The cost is a transaction per job (begin, fn's statements, one
// completion statement, commit) instead of the batched deletes of Handle.
// Do not commit or roll back tx in fn; the worker does.
func HandleTx[Tx any](w *Worker, name string, fn func(ctx context.Context, tx Tx, job *dbqueue.Job) error, opts ...HandlerOption) {
	if fn == nil {
		panic("worker: HandleTx(" + name + ") with a nil handler")
	}
	ops := txOpsOf(w.q)
	want := reflect.TypeFor[Tx]()
	switch got := ops.NativeTx(); {
	case len(got) == 0:
		panic(fmt.Sprintf("worker: HandleTx(%s): the %s queue's pool begins no transactions for handlers", name, w.q.Dialect()))
	case !slices.Contains(got, want):
		panic(fmt.Sprintf("worker: HandleTx(%s) with a %v handler: this queue's pool gives its handlers a %v (database/sql pools give *sql.Tx, pgx pools pgx.Tx or *sql.Tx); register a func(ctx, %v, *dbqueue.Job) error", name, want, got[0], got[0]))
	}
	w.Handle(name, func(ctx context.Context, job *dbqueue.Job) error {
		return runTx(ctx, w.q, ops, want, job, func(ctx context.Context, native any) error {
			return fn(ctx, native.(Tx), job)
		})
	}, opts...)
}

// RegisterTx is HandleTx for a typed job kind (see Register): the kind is
// T's zero value's Kind(), and the job's data is decoded into a T; data
// that does not decode fails the job at once.
func RegisterTx[T dbqueue.JobArgs, Tx any](w *Worker, fn func(ctx context.Context, tx Tx, job *dbqueue.Job, args T) error, opts ...HandlerOption) {
	var zero T
	kind := kindOf(zero)
	if kind == "" {
		panic(fmt.Sprintf("worker: RegisterTx[%T]: Kind() of its zero value is empty: return a constant kind", zero))
	}
	HandleTx(w, kind, func(ctx context.Context, tx Tx, job *dbqueue.Job) error {
		var args T
		if err := job.Decode(&args); err != nil {
			return FailNow(err)
		}
		return fn(ctx, tx, job, args)
	}, opts...)
}

// settlement is what a transactional handler's transaction wrote of its
// job's end, for the worker to report (events, batch callbacks) instead
// of writing an end of its own.
type settlement struct {
	// kind is 0 for a completion, else the outcome written.
	kind          outcomeKind
	delay         time.Duration
	cause         error // a cancellation's
	before, after *dbqueue.Batch
	// lost: the reservation was no longer held; nothing was applied.
	lost error
	// unknown: the commit failed and what it did could not be found out.
	unknown error
}

// settleKey finds the attempt through the handler's context, whatever
// middleware wrapped around it.
type settleKey struct{}

// runTx runs fn in a transaction of its own and writes the job's end in
// it (see HandleTx), recording what it committed on the job's attempt.
func runTx(ctx context.Context, q *dbqueue.Queue, ops txOps, as reflect.Type, job *dbqueue.Job, fn func(ctx context.Context, native any) error) (err error) {
	native, tx, err := ops.BeginNative(ctx, as)
	if err != nil {
		return err // the job is retried as after any error
	}
	open := true
	defer func() {
		if open { // an error, a panic, runtime.Goexit
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	herr := fn(ctx, native)
	var o *outcome
	errors.As(herr, &o)
	s := &settlement{}
	var ferr error
	switch {
	case herr == nil, o != nil && o.kind == outcomeDiscard:
		if o != nil {
			s.kind = outcomeDiscard
		}
		s.before, s.after, ferr = ops.CompleteIn(ctx, tx, job)
	case o != nil && (o.kind == outcomeRelease || o.kind == outcomeSnooze):
		s.kind, s.delay = o.kind, o.delay
		ferr = ops.ReleaseIn(ctx, tx, job, o.delay, o.kind == outcomeSnooze)
	case o != nil && o.kind == outcomeCancel:
		s.kind, s.cause = o.kind, o.cause
		s.before, s.after, ferr = ops.FailIn(ctx, tx, job, o.cause)
	default:
		return herr // rolled back; released or failed as for Handle
	}
	if errors.Is(ferr, dbqueue.ErrNotHeld) {
		settle(ctx, &settlement{lost: ferr})
		return herr
	}
	if errors.Is(ferr, sql.ErrTxDone) || ferr != nil && strings.Contains(ferr.Error(), "tx is closed") {
		// Whatever the handler committed itself is applied, and the job
		// runs again: say so.
		return fmt.Errorf("the handler committed or rolled back its transaction itself: leave that to the worker, which writes the job's end in it first: %w", ferr)
	}
	if ferr != nil {
		return fmt.Errorf("write the job's end in the handler's transaction: %w", ferr)
	}
	open = false
	if cerr := tx.Commit(ctx); cerr != nil {
		// The reply may be lost with the commit done: ask, never guess,
		// for as long as the reservation lasts.
		rctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), job.ExpiresAt())
		defer cancel()
		switch got, rerr := q.ResolveCommit(rctx, job); {
		case rerr != nil:
			s = &settlement{unknown: fmt.Errorf("commit: %w; %w", cerr, rerr)}
		case got == dbqueue.CommitRolledBack:
			return fmt.Errorf("commit the handler's transaction (rolled back): %w", cerr)
		case got == dbqueue.CommitNotHeld && s.kind != outcomeRelease && s.kind != outcomeSnooze:
			s = &settlement{lost: fmt.Errorf("commit: %w; %w", cerr, dbqueue.ErrNotHeld)}
		}
		// CommitApplied, or a release or snooze that drew its new token.
	}
	settle(ctx, s)
	return herr
}

// settle records s on the job's attempt.
func settle(ctx context.Context, s *settlement) {
	if a, ok := ctx.Value(settleKey{}).(*attempt); ok {
		a.settled = s
	}
}

// settle reports a job whose end a transactional handler's transaction
// committed (or could not commit): logs, events and batch callbacks, as
// outcome does after writing the end itself.
func (r *run) settle(job *dbqueue.Job, h *handler, took time.Duration, s *settlement) {
	ev, ctx := r.w.opts.Events, r.jobCtx
	switch {
	case s.unknown != nil:
		r.logJob(job, took, "commit outcome unknown, left reserved until retry_after", s.unknown)
	case s.lost != nil:
		r.logJob(job, took, "not held", s.lost, "why", "reclaimed after retry_after: its transaction rolled back, nothing applied")
	case s.kind == outcomeRelease, s.kind == outcomeSnooze:
		what := "released"
		if s.kind == outcomeSnooze {
			what = "snoozed"
		}
		r.logJob(job, took, what, nil, "delay", s.delay)
		r.count(job, countReleased, took, true)
		if fn := ev.JobReleased; fn != nil {
			fn(ctx, job, s.delay)
		}
	case s.kind == outcomeCancel:
		r.logJob(job, took, "cancelled", s.cause)
		r.count(job, countFailed, took, true)
		if s.after != nil {
			r.batchMoved(job, s.before, s.after, s.cause)
		}
		r.failed(job, h, s.cause)
	default: // completed, or discarded
		what := "done"
		if s.kind == outcomeDiscard {
			what = "deleted"
		}
		r.logDone(job, took, what, nil)
		r.count(job, countProcessed, took, true)
		if s.after != nil {
			r.batchMoved(job, s.before, s.after, nil)
		}
		if fn := ev.JobProcessed; fn != nil {
			fn(ctx, job, took)
		}
	}
}
