package dbqueue

import (
	"context"
	"errors"

	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// workerOps is the worker side of a Queue: the operations package worker (and
// the driver packages, and dbqueuetest) needs and an application does not.
// It reaches them through internal/core, which keeps them off Queue's
// public API; its methods are exported only so that it implements
// core.WorkerSide (workerSide), which they call.
type workerOps struct{ q *Queue }

var _ workerSide = workerOps{}

// DeleteMany deletes jobs that succeeded, in one statement per 1,000, and
// returns those no longer held.
func (e workerOps) DeleteMany(ctx context.Context, jobs []*Job) ([]*Job, error) {
	return e.q.deleteMany(ctx, jobs)
}

// ReleaseMany puts held jobs back, in one statement per 1,000, and returns
// those no longer held.
func (e workerOps) ReleaseMany(ctx context.Context, rs []Releasing) ([]*Job, error) {
	return e.q.releaseMany(ctx, rs)
}

// Reserve is Queue.Reserve that also calls failed for each job it moved
// to failed_jobs at claim time (a malformed payload, ErrAttemptsExhausted),
// so the worker logs it and fires its failure hooks, and short (when not
// nil) for each queue whose claim took fewer rows than it asked for.
func (e workerOps) Reserve(ctx context.Context, n, limited int, queues []string, failed func(job *Job, cause error), short func(queue string)) ([]*Job, error) {
	return e.q.reserve(ctx, n, limited, failed, short, queues)
}

// ReadyQueues returns those of queues that hold a job a claim would take
// now (due and unreserved, or reserved longer ago than retry_after), in
// one statement of index probes (dialect.ReadyQueues).
func (e workerOps) ReadyQueues(ctx context.Context, queues []string) ([]string, error) {
	for _, name := range queues {
		if err := checkQueueName(name); err != nil {
			return nil, err
		}
	}
	var ready []string
	err := sqldb.Retry(ctx, func() (err error) {
		ready, err = e.q.sql.ReadyQueues(ctx, e.q.db, queues, e.q.retryAfter)
		return err
	})
	return ready, sqldb.Wrap("read which queues hold ready jobs", err)
}

// Unreserve gives back a held job without counting its attempt.
func (e workerOps) Unreserve(ctx context.Context, job *Job) error { return e.q.unreserve(ctx, job) }

// Wakeups subscribes to wake-ups for queues (see notifier).
func (e workerOps) Wakeups(queues ...string) (<-chan struct{}, func()) { return e.q.wakeups(queues...) }

// WithKey returns a payload with key set to value, other keys kept.
func (e workerOps) WithKey(raw []byte, key string, value any) ([]byte, error) {
	return withKey(raw, key, value)
}

// PushIn pushes jobs inside a caller's transaction (dbqpgx.PushTx).
func (e workerOps) PushIn(ctx context.Context, tx sqldb.Execer, jobs []NewJob) ([]int64, error) {
	ids, _, err := e.q.push(ctx, tx, jobs)
	return ids, err
}

// PushUniqueIn is PushUnique inside a caller's transaction, under the
// job's own Unique (dbqpgx.PushUniqueTx and PushArgsUniqueTx).
func (e workerOps) PushUniqueIn(ctx context.Context, tx sqldb.Execer, job NewJob) (int64, bool, error) {
	if job.Unique == nil {
		return 0, false, errors.New("dbqueue: a unique push needs the job's Unique set")
	}
	return e.q.pushUnique(ctx, tx, job, *job.Unique)
}

// Signals reads the restart signal and which of queues are paused.
func (e workerOps) Signals(ctx context.Context, queues []string) (restart int64, paused map[string]bool, err error) {
	return e.q.signals(ctx, queues)
}

// Payloads lists the payloads of a queue's jobs in id order.
func (e workerOps) Payloads(ctx context.Context, queue string) ([][]byte, error) {
	return e.q.sql.Payloads(ctx, e.q.db, queue)
}

// Unwritable reports whether err, from a finish, came from the job
// itself (its chain, its new payload) rather than the database's state,
// or is the database refusing the data the finish carried
// (sqldb.Refused: a payload over max_allowed_packet, text a column
// cannot hold): retrying the finish cannot help. It is the one test the
// worker uses for every finish, so a release, a success and a fail agree
// on what is retried: a refused release or success fails the job at
// once, and Fail itself falls back to what can be stored (failureTries).
func (e workerOps) Unwritable(err error) bool {
	var u unwritable
	return errors.As(err, &u) || sqldb.IsRefused(err)
}

// SearchFailed runs a Search over failed_jobs (by its uuid column for
// UUID): the rows that match, as stored, and what the search read.
func (e workerOps) SearchFailed(ctx context.Context, s Search) ([]dialect.FailedRow, SearchResult[struct{}], error) {
	return e.q.searchFailed(ctx, s)
}

// Linked reports whether a job chains a next job or belongs to a batch,
// so its end goes through FinishLinked rather than the batched deletes.
func (e workerOps) Linked(job *Job) bool { return job.linked() }

// FollowsAbandoned reports whether the job's reservation follows an
// abandoned attempt: its claim took over an expired reservation (its
// holder stopped while running it), or a row given back by such a
// reservation. Attempts past a job's tries count as abandoned only then;
// otherwise its last try ended in a release (dialect.AbandonedMark).
func (e workerOps) FollowsAbandoned(job *Job) bool { return dialect.FollowsAbandoned(job.token) }

// FinishLinked ends a held linked job in one transaction (deleted with its
// chain's next job pushed when cause is nil, failed otherwise) and counts
// it in its batch; it returns the batch before and after.
func (e workerOps) FinishLinked(ctx context.Context, job *Job, cause error) (before, after *Batch, err error) {
	return e.q.finishLinked(ctx, job, cause)
}
