package dbqueue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// ErrNotHeld is returned by Delete, Release and Fail when the caller no
// longer holds the job's reservation: it was reclaimed after retry_after and
// is another worker's now, or it was already finished. Nothing was changed.
var ErrNotHeld = errors.New("dbqueue: job is no longer held by this reservation (reclaimed after retry_after, or already finished)")

// finishChunk bounds the jobs one finishing statement names.
const finishChunk = 1000

// unwritable marks an error a finish meets in the job itself rather than
// in the database: a chain link that cannot be pushed, a payload a
// release cannot write. Running the finish again meets it again, so a
// worker fails the job at once instead of retrying until its reservation
// runs out and running a job that succeeded again (see workerOps.Unwritable).
type unwritable struct{ err error }

func (u unwritable) Error() string { return u.err.Error() }
func (u unwritable) Unwrap() error { return u.err }

// markUnwritable marks err as unwritable (nil stays nil).
func markUnwritable(err error) error {
	if err == nil {
		return nil
	}
	return unwritable{err}
}

func notHeld(job *Job) error {
	return fmt.Errorf("job %d (attempt %d): %w", job.ID, job.Attempts, ErrNotHeld)
}

// Delete removes a job that succeeded. A chained job's next link is
// pushed and a batched job counted as succeeded in its batch, in the same
// transaction as the delete, as a worker ends them: the rest of a chain is
// never lost and a batch never stays pending. A chain whose next link
// cannot be pushed (its payload was written by hand wrong) gives an error
// and the job stays held: fail it instead. Delete fires no batch callbacks
// (then, catch, finally): those are a worker's (worker.OnBatch), which
// finishes its jobs itself.
func (q *Queue) Delete(ctx context.Context, job *Job) error {
	if job.linked() {
		_, _, err := q.finishLinked(ctx, job, nil)
		return err
	}
	lost, err := q.deleteMany(ctx, []*Job{job})
	if err != nil {
		return err
	}
	if len(lost) > 0 {
		return notHeld(job)
	}
	return nil
}

// deleteMany removes jobs that succeeded in one statement per 1,000, each
// checked against its own reservation, and returns those that were no
// longer held (and so were left alone).
func (q *Queue) deleteMany(ctx context.Context, jobs []*Job) (lost []*Job, err error) {
	for chunk := range slices.Chunk(jobs, finishChunk) {
		held := make([]dialect.Held, len(chunk))
		for i, j := range chunk {
			held[i] = j.held()
		}
		var deleted []dialect.Key
		err := sqldb.Retry(ctx, func() (err error) {
			deleted, err = q.sql.DeleteHeld(ctx, q.db, held)
			return err
		})
		if err != nil {
			return lost, sqldb.Wrap("delete", err)
		}
		if len(deleted) == len(chunk) {
			continue // a reservation names one row: all were held
		}
		gone := make(map[dialect.Key]bool, len(deleted))
		for _, k := range deleted {
			gone[k] = true
		}
		for i, j := range chunk {
			if !gone[held[i].Key()] {
				lost = append(lost, j)
			}
		}
	}
	return lost, nil
}

// Release puts a held job back, available again after delay. The row is
// updated in place and keeps its id and attempts (Laravel deletes and
// re-inserts it, which loses the job if the process dies in between).
func (q *Queue) Release(ctx context.Context, job *Job, delay time.Duration) error {
	return q.releaseOne(ctx, job, delay, nil)
}

// ReleaseWithPayload is Release that also replaces the payload, for workers
// that carry state from one attempt to the next (the exception count that
// maxExceptions needs). The job's Payload and RawPayload are updated.
//
// The new payload of a chained or batched job must keep its "chained"
// and "batchId" as they are: a payload without them would drop the rest
// of the chain, or leave the batch pending for ever, once the job ends.
// One that does not is refused, and the job is left as it was.
func (q *Queue) ReleaseWithPayload(ctx context.Context, job *Job, delay time.Duration, payload []byte) error {
	if payload == nil {
		return fmt.Errorf("dbqueue: ReleaseWithPayload job %d: nil payload", job.ID)
	}
	if err := keepsLinks(job, payload); err != nil {
		return err
	}
	return q.releaseOne(ctx, job, delay, payload)
}

// keepsLinks refuses a new payload for a linked job that changes its
// batch or its chain.
func keepsLinks(job *Job, payload []byte) error {
	if !job.linked() {
		return nil
	}
	p, err := DecodePayload(payload)
	if err != nil {
		return fmt.Errorf("dbqueue: ReleaseWithPayload job %d: the new payload: %w", job.ID, err)
	}
	if p.BatchID != job.Payload.BatchID {
		return fmt.Errorf("dbqueue: ReleaseWithPayload job %d: the new payload names batch %q, the job is in batch %q: keep its \"batchId\" as it is", job.ID, p.BatchID, job.Payload.BatchID)
	}
	if !sameJSON(p.Chained, job.Payload.Chained) {
		return fmt.Errorf("dbqueue: ReleaseWithPayload job %d: the new payload changes the rest of the job's chain: keep its \"chained\" as it is", job.ID)
	}
	return nil
}

// sameJSON reports whether two JSON texts are the same but for spacing
// (both empty counts as the same).
func sameJSON(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}

func (q *Queue) releaseOne(ctx context.Context, job *Job, delay time.Duration, payload []byte) error {
	lost, err := q.releaseMany(ctx, []Releasing{{Job: job, Delay: delay, Payload: payload}})
	if err != nil {
		return err
	}
	if len(lost) > 0 {
		return notHeld(job)
	}
	return nil
}

// unreserve gives back a held job that did not run, or was interrupted by
// its worker stopping, without counting the attempt: it is available again
// at once, with the attempts it had before it was reserved, and a new
// reservation token. A worker uses it for prefetched jobs it never started.
func (q *Queue) unreserve(ctx context.Context, job *Job) error {
	var held bool
	err := sqldb.Retry(ctx, func() (err error) {
		held, err = q.sql.GiveBack(ctx, q.db, job.held())
		return err
	})
	if err != nil {
		return sqldb.Wrap("unreserve", err)
	}
	if !held {
		return notHeld(job)
	}
	return nil
}

// Fail moves a held job to failed_jobs with cause as its exception text. The
// row leaves jobs and enters failed_jobs in one transaction: never both,
// never neither. A uuid already in failed_jobs (the job failed before, was
// retried and failed again) is replaced by the new failure.
//
// A Fail retried after its reply was lost finds its own work done (the row
// gone, failed_jobs holding it with this very cause) and succeeds, so a
// worker's failure hooks still run.
//
// The copy of the payload in failed_jobs carries, under the key
// "dbqueueFailedBy", the reservation that failed it (the row's id and the
// claim's token): that is how a retried Fail tells its own committed work
// from another holder's failure with the same text — a stale holder whose
// reservation ran out, whose job was reclaimed and failed by the new one.
// Laravel ignores the key and its queue:retry carries it along; package
// failed lists and retries the payload without it.
//
// A chained job's chain stops there (the rest stays in its payload in
// failed_jobs, and retrying it resumes the chain), and a batched job is
// counted as failed in its batch in the same transaction (without
// AllowFailures that cancels the batch), as a worker fails them. Fail
// fires no batch callbacks (then, catch, finally): those are a worker's
// (worker.OnBatch).
func (q *Queue) Fail(ctx context.Context, job *Job, cause error) error {
	if job.linked() {
		_, _, err := q.finishLinked(ctx, job, cause)
		return err
	}
	f := q.failure(job, cause)
	var held bool
	err := sqldb.Retry(ctx, func() (err error) {
		held, err = q.sql.FailMove(ctx, q.db, job.held(), f)
		return err
	})
	if err != nil {
		return sqldb.Wrap("fail", err)
	}
	if !held {
		if done, cerr := q.sql.FailedAlready(ctx, q.db, job.ID, f); cerr == nil && done {
			return nil
		}
		return notHeld(job)
	}
	return nil
}

// failure is the failed_jobs row that failing job with cause writes.
func (q *Queue) failure(job *Job, cause error) dialect.Failure {
	text, uuid := failureText(job, cause)
	return dialect.Failure{UUID: uuid, Connection: q.connection, Queue: job.Queue, Payload: dialect.MarkFailed(job.RawPayload, job.ID, job.token), Exception: text}
}

// failureText is the exception text and uuid a failure of job writes.
func failureText(job *Job, cause error) (text, uuid string) {
	text = "failed"
	if cause != nil {
		text = cause.Error()
	}
	uuid = job.Payload.UUID
	if uuid == "" {
		uuid = newUUID() // a malformed row carries none
	}
	return text, uuid
}
