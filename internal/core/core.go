// Package core is what dbqueue's own packages (worker, failed, the driver
// packages, dbqueuetest) share of a queue and no user sees: its
// connection, its dialect, its settings, and the worker-side operations of
// package dbqueue. A *dbqueue.Queue carries a Handle, whose unexported
// method only this package can call, so nothing outside the module can
// reach in, and nothing here is global.
package core

import (
	"context"
	"reflect"
	"time"

	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// Queue is one queue's connection and settings.
type Queue struct {
	DB      sqldb.DB
	Dialect dialect.Dialect
	// Connection is failed_jobs.connection; DefaultQueue the queue used
	// when a caller names none; RetryAfter the reservation's length in
	// seconds.
	Connection   string
	DefaultQueue string
	RetryAfter   int64
	// Redact passes a payload read for showing through the queue's
	// Redactor (dbqueue.WithRedactor).
	Redact func(name string, payload []byte) []byte
}

// Handle is embedded in dbqueue.Queue: its core, and its worker side,
// of type E (WorkerSide over package dbqueue's types).
type Handle[E any] struct {
	q    *Queue
	side E
}

// NewHandle wraps q and the queue's worker side for embedding.
func NewHandle[E any](q *Queue, side E) Handle[E] { return Handle[E]{q, side} }

func (h Handle[E]) coreQueue() *Queue { return h.q }

func (h Handle[E]) workerSide() E { return h.side }

// Holder is anything that embeds a Handle: a *dbqueue.Queue.
type Holder interface{ coreQueue() *Queue }

// Of returns the core of a *dbqueue.Queue (nil for a nil queue).
func Of(h Holder) *Queue {
	if h == nil {
		return nil
	}
	return h.coreQueue()
}

// WorkerSideOf returns the worker side of h, a *dbqueue.Queue. E is spelled
// WorkerSide[*dbqueue.Job, dbqueue.Releasing, *dbqueue.Batch, dbqueue.NewJob,
// dbqueue.Search, dbqueue.SearchResult[struct{}], dbqueue.ScheduleInfo],
// the type the queue carries (internal/queueside names it once for the
// packages around the root): with any other type the call does not
// compile.
func WorkerSideOf[E any](h interface{ workerSide() E }) E { return h.workerSide() }

// WorkerSide is the worker side of a dbqueue.Queue: the operations package
// worker, failed, periodic, the dashboard and the driver packages need
// and an application does not. Its type parameters are package
// dbqueue's types, which core cannot import: Job is *dbqueue.Job,
// Releasing dbqueue.Releasing, Batch *dbqueue.Batch, NewJob
// dbqueue.NewJob, Search dbqueue.Search, SearchResult
// dbqueue.SearchResult[struct{}] and ScheduleInfo dbqueue.ScheduleInfo.
type WorkerSide[Job, Releasing, Batch, NewJob, Search, SearchResult, ScheduleInfo any] interface {
	// DeleteMany deletes jobs that succeeded and returns those no longer
	// held.
	DeleteMany(ctx context.Context, jobs []Job) ([]Job, error)
	// ReleaseMany puts held jobs back and returns those no longer held.
	ReleaseMany(ctx context.Context, rs []Releasing) ([]Job, error)
	// Reserve claims up to n jobs of queues, of which at most limited run
	// under a concurrency limit; failed is called for each job moved to
	// failed_jobs at claim time, short (when not nil) for each queue whose
	// claim took fewer rows than it asked for.
	Reserve(ctx context.Context, n, limited int, queues []string, failed func(job Job, cause error), short func(queue string)) ([]Job, error)
	// ReadyQueues returns those of queues that hold a job a claim would
	// take now.
	ReadyQueues(ctx context.Context, queues []string) ([]string, error)
	// Unreserve gives back a held job without counting its attempt.
	Unreserve(ctx context.Context, job Job) error
	// Wakeups subscribes to wake-ups for queues.
	Wakeups(queues ...string) (<-chan struct{}, func())
	// WithKey returns a payload with key set to value, other keys kept.
	WithKey(raw []byte, key string, value any) ([]byte, error)
	// PushIn pushes jobs inside a caller's transaction.
	PushIn(ctx context.Context, tx sqldb.Execer, jobs []NewJob) ([]int64, error)
	// PushUniqueIn pushes job under its Unique inside a caller's
	// transaction and reports whether it was a duplicate.
	PushUniqueIn(ctx context.Context, tx sqldb.Execer, job NewJob) (id int64, duplicate bool, err error)
	// Signals reads the restart signal and which of queues are paused.
	Signals(ctx context.Context, queues []string) (restart int64, paused map[string]bool, err error)
	// Payloads lists the payloads of a queue's jobs in id order.
	Payloads(ctx context.Context, queue string) ([][]byte, error)
	// Unwritable reports whether err, from a finish, came from the job
	// itself rather than the database.
	Unwritable(err error) bool
	// SearchFailed runs a search over failed_jobs.
	SearchFailed(ctx context.Context, s Search) ([]dialect.FailedRow, SearchResult, error)
	// Linked reports whether a job chains a next job or belongs to a
	// batch.
	Linked(job Job) bool
	// FollowsAbandoned reports whether the job's reservation follows an
	// abandoned attempt (dialect.AbandonedMark).
	FollowsAbandoned(job Job) bool
	// FinishLinked ends a held linked job in one transaction and returns
	// its batch before and after.
	FinishLinked(ctx context.Context, job Job, cause error) (before, after Batch, err error)

	// CompleteIn, ReleaseIn and FailIn end a held job inside tx; Snooze
	// puts it back for d without counting the attempt.
	CompleteIn(ctx context.Context, tx sqldb.Tx, job Job) (before, after Batch, err error)
	ReleaseIn(ctx context.Context, tx sqldb.Tx, job Job, delay time.Duration, giveBack bool) error
	FailIn(ctx context.Context, tx sqldb.Tx, job Job, cause error) (before, after Batch, err error)
	Snooze(ctx context.Context, job Job, d time.Duration) error
	// BeginNative begins a transaction of the native type as (one of
	// NativeTx) on the queue's database.
	BeginNative(ctx context.Context, as reflect.Type) (native any, tx sqldb.Tx, err error)
	NativeTx() []reflect.Type

	// PushScheduledTick pushes a periodic schedule's tick once across
	// processes; PruneTickLocks deletes the tick locks no scheduler needs.
	PushScheduledTick(ctx context.Context, job NewJob, schedule, spec string, tick, next, keep int64) (id int64, pushed bool, err error)
	PruneTickLocks(ctx context.Context, grace int64, limit int) (int64, error)
	// PushScheduleStart pushes a schedule's run at start once across the
	// processes starting together.
	PushScheduleStart(ctx context.Context, job NewJob, schedule string, at, until int64) (id int64, pushed bool, err error)
	// SeeSchedules, RecordScheduleTick and PruneSchedules keep the
	// schedules table, which reports and decides nothing.
	SeeSchedules(ctx context.Context, list []ScheduleInfo) error
	RecordScheduleTick(ctx context.Context, s ScheduleInfo) error
	PruneSchedules(ctx context.Context, age int64, limit int) (int64, error)
	// DBNow reads the database clock in Unix seconds.
	DBNow(ctx context.Context) (int64, error)
}
