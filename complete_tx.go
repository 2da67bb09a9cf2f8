package dbqueue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"time"

	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// Finishing a job inside the caller's transaction.
//
// A handler whose work is writes to the queue's own database can make
// them and the job's end one transaction: begin it, write, call
// CompleteTx (or ReleaseTx, SnoozeTx, CancelTx, FailTx) with it, commit.
// Either both commit or neither does, so the work is applied exactly once
// however often the job runs: a run whose transaction rolled back left
// nothing behind, and a run whose reservation was lost (it expired and
// another worker took the job) gets ErrNotHeld before its commit and
// rolls its writes back with it. Each of these methods adds one statement
// to the transaction (a chained or batched job's end takes a few more)
// and no round trip of its own otherwise. For a pgx transaction use the
// functions of the same names in driver/dbqpgx.

// ErrCancelled is wrapped by the exception text of a job its handler
// cancelled (CancelTx, worker.Cancel): it is in failed_jobs, where an
// operator sees it and may still retry it, and was not retried.
var ErrCancelled = errors.New("dbqueue: cancelled by its handler")

// ErrCommitUnknown is returned by ResolveCommit when the context ended
// before the database could say what a commit did. Nothing was changed:
// the job stays as the commit left it, and if its transaction did roll
// back, the job comes back after retry_after.
var ErrCommitUnknown = errors.New("dbqueue: the outcome of the commit is still unknown")

func txOf(op string, tx *sql.Tx, job *Job) (sqldb.Tx, error) {
	if tx == nil {
		return nil, fmt.Errorf("dbqueue: %s: nil *sql.Tx: pass the transaction the job's writes are in", op)
	}
	if job == nil {
		return nil, fmt.Errorf("dbqueue: %s: nil job", op)
	}
	return sqldb.SQLTx(tx), nil
}

// CompleteTx ends a held job that succeeded inside the caller's
// transaction, as a worker ends it: deleted, checked against its
// reservation; a chained job's next link pushed; a batched job counted in
// its batch. None of it happens unless tx commits. It returns ErrNotHeld
// when the job is no longer held (its reservation expired and another
// worker took it, or it was finished already): roll tx back then, so that
// the writes of a run that lost its job are never applied.
//
// tx must be on the queue's database. When Commit fails, the job's end
// may or may not have happened (a lost reply): ResolveCommit finds out.
func (q *Queue) CompleteTx(ctx context.Context, tx *sql.Tx, job *Job) error {
	stx, err := txOf("CompleteTx", tx, job)
	if err != nil {
		return err
	}
	_, _, err = q.completeIn(ctx, stx, job)
	return err
}

// completeIn is CompleteTx on any transaction; it returns the job's batch
// before and after its count, nil when it has none.
func (q *Queue) completeIn(ctx context.Context, tx sqldb.Tx, job *Job) (before, after *Batch, err error) {
	if !job.linked() {
		held, err := q.finisher().CompleteIn(ctx, tx, job.held())
		if err != nil {
			return nil, nil, sqldb.Wrap("complete", err)
		}
		if !held {
			return nil, nil, notHeld(job)
		}
		return nil, nil, nil
	}
	f := dialect.Finish{BatchID: job.Payload.BatchID, JobUUID: job.Payload.UUID}
	if f.Next, err = chainNext(job); err != nil {
		return nil, nil, err
	}
	f.Notify = len(f.Next) > 0 && q.wake.shouldNotify(f.Next)
	return q.finishIn(ctx, tx, job, f, "complete")
}

func (q *Queue) finishIn(ctx context.Context, tx sqldb.Tx, job *Job, f dialect.Finish, op string) (before, after *Batch, err error) {
	res, err := q.finisher().FinishIn(ctx, tx, job.held(), f)
	if err != nil {
		return nil, nil, sqldb.Wrap(op, err)
	}
	if !res.Held {
		return nil, nil, notHeld(job)
	}
	if res.Batch == nil {
		return nil, nil, nil
	}
	return newBatch(res.Batch.Before), newBatch(res.Batch.After), nil
}

// ReleaseTx puts a held job back inside the caller's transaction, to run
// again after delay (Laravel's $this->release($delay)); the attempt
// counts towards its tries. It returns ErrNotHeld as CompleteTx does.
func (q *Queue) ReleaseTx(ctx context.Context, tx *sql.Tx, job *Job, delay time.Duration) error {
	stx, err := txOf("ReleaseTx", tx, job)
	if err != nil {
		return err
	}
	return q.releaseIn(ctx, stx, job, delay, false)
}

// SnoozeTx puts a held job back inside the caller's transaction, to run
// again after d, and takes its attempt back: a job that waits for
// something (River's JobSnooze) can snooze any number of times without
// running out of tries. It returns ErrNotHeld as CompleteTx does.
func (q *Queue) SnoozeTx(ctx context.Context, tx *sql.Tx, job *Job, d time.Duration) error {
	stx, err := txOf("SnoozeTx", tx, job)
	if err != nil {
		return err
	}
	return q.releaseIn(ctx, stx, job, d, true)
}

// releaseIn is ReleaseTx (SnoozeTx with giveBack) on any transaction.
func (q *Queue) releaseIn(ctx context.Context, tx sqldb.Tx, job *Job, delay time.Duration, giveBack bool) error {
	if delay < 0 || delay > MaxDelay {
		return fmt.Errorf("dbqueue: job %d: a delay of %v: give one from 0 to %v (100 years)", job.ID, delay, MaxDelay)
	}
	held, err := q.finisher().ReleaseIn(ctx, tx, job.held(), wholeSeconds(delay), giveBack)
	if err != nil {
		return sqldb.Wrap("release", err)
	}
	if !held {
		return notHeld(job)
	}
	return nil
}

// FailTx moves a held job to failed_jobs inside the caller's transaction,
// with cause as its exception, whatever tries remain; a chain stops there,
// and a batched job counts as failed in its batch. It returns ErrNotHeld
// as CompleteTx does.
func (q *Queue) FailTx(ctx context.Context, tx *sql.Tx, job *Job, cause error) error {
	stx, err := txOf("FailTx", tx, job)
	if err != nil {
		return err
	}
	_, _, err = q.failIn(ctx, stx, job, cause)
	return err
}

// CancelTx ends a held job inside the caller's transaction without a
// retry, because its handler decided it should not run (River's
// JobCancel): it goes to failed_jobs, where an operator sees it, with the
// exception "dbqueue: cancelled by its handler: reason" (ErrCancelled),
// and can still be retried from there. It is recorded there rather than
// only logged because a log line is gone when the operator asks why a job
// never did its work. A batched job counts as failed. Queue.Cancel is
// something else: it deletes a job that waits, before any worker has it.
func (q *Queue) CancelTx(ctx context.Context, tx *sql.Tx, job *Job, reason string) error {
	stx, err := txOf("CancelTx", tx, job)
	if err != nil {
		return err
	}
	_, _, err = q.failIn(ctx, stx, job, Cancelled(reason))
	return err
}

// Cancelled is the cause a cancelled job is failed with: ErrCancelled,
// with the reason when there is one.
func Cancelled(reason string) error {
	if reason == "" {
		return ErrCancelled
	}
	return fmt.Errorf("%w: %s", ErrCancelled, reason)
}

// failIn is FailTx on any transaction.
func (q *Queue) failIn(ctx context.Context, tx sqldb.Tx, job *Job, cause error) (before, after *Batch, err error) {
	text, uuid := failureText(job, cause)
	f := dialect.Finish{
		BatchID: job.Payload.BatchID, JobUUID: job.Payload.UUID,
		Fail: &dialect.Failure{UUID: uuid, Connection: q.connection, Queue: job.Queue, Payload: job.RawPayload, Exception: text},
	}
	return q.finishIn(ctx, tx, job, f, "fail")
}

func (q *Queue) finisher() dialect.TxFinisher { return q.sql }

// CommitOutcome is what a transaction that ended a job did, as
// ResolveCommit found it.
type CommitOutcome int

// The outcomes ResolveCommit finds.
const (
	// CommitApplied: the job's row is gone, so a transaction that ended it
	// committed. Do not run the job again.
	CommitApplied CommitOutcome = iota + 1
	// CommitRolledBack: the job is still held by this reservation, so the
	// transaction certainly rolled back and none of its writes happened.
	// Release the job (or fail it) as after a handler error.
	CommitRolledBack
	// CommitNotHeld: the row is there under another reservation, or put
	// back: a release or snooze of this transaction committed, or the
	// reservation expired and the job is another worker's now. Either way
	// there is nothing left for this holder to do.
	CommitNotHeld
)

func (o CommitOutcome) String() string {
	switch o {
	case CommitApplied:
		return "applied"
	case CommitRolledBack:
		return "rolled back"
	case CommitNotHeld:
		return "not held"
	}
	return fmt.Sprintf("CommitOutcome(%d)", int(o))
}

// ResolveCommit finds out what became of a transaction that ended job
// (CompleteTx, ReleaseTx, SnoozeTx, CancelTx, FailTx) when its Commit
// returned an error: a connection lost after COMMIT was sent leaves the
// client unable to tell whether the server committed. It never guesses:
//
//   - It locks the job's row before reading it (SELECT … FOR UPDATE). A
//     commit still in flight on the server holds that lock, so the read
//     waits until the server has decided, then sees what it decided; a
//     plain read would see the row as it was before and call a commit
//     about to land a rollback. Each wait is bounded (a lock timeout) and
//     retried, as is every error (the read writes nothing), until ctx
//     ends: then the answer is ErrCommitUnknown, never a guess.
//   - The row is gone: a transaction that deleted it committed
//     (CommitApplied). While the reservation was held, only this holder's
//     transaction could delete it; after the reservation expired, another
//     holder's run might have finished it instead, and then this
//     transaction rolled back. Either way exactly one transaction ended
//     the job with its writes, and the job must not run again.
//   - The row is held by this reservation: the transaction rolled back,
//     since the end it wrote would have deleted the row or drawn a new
//     token (CommitRolledBack).
//   - The row is there otherwise: this holder's release or snooze
//     committed (each draws a new token), or another holder has it
//     (CommitNotHeld).
//
// On SQLite a commit's outcome is known when Commit returns; the read
// waits for the database's one writer all the same.
func (q *Queue) ResolveCommit(ctx context.Context, job *Job) (CommitOutcome, error) {
	if job == nil {
		return 0, errors.New("dbqueue: ResolveCommit: nil job")
	}
	var (
		r     dialect.Reservation
		found bool
		err   error
		wait  = 2 * time.Millisecond
	)
	for {
		r, found, err = q.finisher().LockReservation(ctx, q.db, job.ID)
		if err == nil {
			break
		}
		if sqldb.MissingTable(err) {
			return 0, sqldb.Wrap("resolve commit", err)
		}
		t := time.NewTimer(wait/2 + time.Duration(rand.Int64N(int64(wait))))
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, fmt.Errorf("dbqueue: job %d (attempt %d): %w: %w (last error: %w)", job.ID, job.Attempts, ErrCommitUnknown, context.Cause(ctx), err)
		case <-t.C:
		}
		wait = min(wait*2, time.Second)
	}
	switch {
	case !found:
		return CommitApplied, nil
	case r.HeldBy(job.held()):
		return CommitRolledBack, nil
	}
	return CommitNotHeld, nil
}

// CompleteIn, ReleaseIn, FailIn: the transactional ends for the driver
// packages (dbqpgx) and the worker, on any transaction.

// CompleteIn is CompleteTx on any transaction; it returns the job's batch
// before and after its count.
func (e workerOps) CompleteIn(ctx context.Context, tx sqldb.Tx, job *Job) (before, after *Batch, err error) {
	return e.q.completeIn(ctx, tx, job)
}

// ReleaseIn is ReleaseTx (SnoozeTx with giveBack) on any transaction.
func (e workerOps) ReleaseIn(ctx context.Context, tx sqldb.Tx, job *Job, delay time.Duration, giveBack bool) error {
	return e.q.releaseIn(ctx, tx, job, delay, giveBack)
}

// FailIn is FailTx on any transaction; it returns the job's batch before
// and after its count.
func (e workerOps) FailIn(ctx context.Context, tx sqldb.Tx, job *Job, cause error) (before, after *Batch, err error) {
	return e.q.failIn(ctx, tx, job, cause)
}

// Snooze puts a held job back to run again after d and takes its attempt
// back, as SnoozeTx does, in a transaction of its own.
func (q *Queue) Snooze(ctx context.Context, job *Job, d time.Duration) error {
	if job == nil {
		return errors.New("dbqueue: Snooze: nil job")
	}
	return sqldb.Retry(ctx, func() error {
		tx, err := q.db.Begin(ctx, sqldb.TxOptions{})
		if err != nil {
			return sqldb.Wrap("snooze", err)
		}
		if err := q.releaseIn(ctx, tx, job, d, true); err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
			return err
		}
		return sqldb.Wrap("snooze", tx.Commit(ctx))
	})
}

// Snooze is Queue.Snooze, for the worker.
func (e workerOps) Snooze(ctx context.Context, job *Job, d time.Duration) error {
	return e.q.Snooze(ctx, job, d)
}

// BeginNative begins a transaction on the queue's pool as a value of
// type as (*sql.Tx, pgx.Tx; see NativeTx) for a transactional handler,
// with the same transaction adapted for the ends above.
func (e workerOps) BeginNative(ctx context.Context, as reflect.Type) (native any, tx sqldb.Tx, err error) {
	b, ok := e.q.db.(sqldb.NativeBeginner)
	if !ok {
		return nil, nil, fmt.Errorf("dbqueue: the %s queue's pool cannot begin a transaction for a handler", e.q.dialect)
	}
	native, tx, err = b.BeginNative(ctx, as)
	if err != nil {
		return nil, nil, sqldb.Wrap("begin the handler's transaction", err)
	}
	return native, tx, nil
}

// NativeTx are the transaction types BeginNative can begin, none when the
// pool begins none.
func (e workerOps) NativeTx() []reflect.Type {
	if b, ok := e.q.db.(sqldb.NativeBeginner); ok {
		return b.NativeTx()
	}
	return nil
}
