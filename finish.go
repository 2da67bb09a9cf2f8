package dbqueue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
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
		q.placesFreed(ctx, chunk)
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
	q.placesFreed(ctx, []*Job{job})
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
	fs := q.failures(job, cause)
	var held bool
	err := writeFailure(fs, func(f dialect.Failure) error {
		return sqldb.Retry(ctx, func() (err error) {
			held, err = q.sql.FailMove(ctx, q.db, job.held(), f)
			return err
		})
	})
	if err != nil {
		return sqldb.Wrap("fail", err)
	}
	q.placesFreed(ctx, []*Job{job})
	if !held {
		if q.failedAlready(ctx, job, fs) {
			return nil
		}
		return notHeld(job)
	}
	return nil
}

// failures are the failed_jobs rows failing job with cause may write, in
// the order they are tried (see writeFailure).
func (q *Queue) failures(job *Job, cause error) *failureTries {
	return &failureTries{job: job, first: q.failure(job, cause), cause: cause}
}

// failure is the failed_jobs row that failing job with cause writes.
func (q *Queue) failure(job *Job, cause error) dialect.Failure {
	text, uuid := failureText(job, cause)
	return dialect.Failure{UUID: uuid, Connection: q.connection, Queue: job.Queue, Payload: dialect.MarkFailed(job.RawPayload, job.ID, job.token, job.Attempts), Exception: text}
}

// failureText is the exception text and uuid a failure of job writes:
// the cause's text as dialect.StorableText makes it (invalid UTF-8 and
// NUL escaped, cut to FailureTextBytes), and the payload's uuid, or a new
// one for a malformed row that carries none. A uuid that is no storable
// varchar(255) (another producer's) is escaped and cut the same way.
func failureText(job *Job, cause error) (text, uuid string) {
	text = "failed"
	if cause != nil {
		text = cause.Error()
	}
	uuid = job.Payload.UUID
	if uuid == "" {
		uuid = newUUID() // a malformed row carries none
	}
	return dialect.StorableText(text, FailureTextBytes), dialect.StorableText(uuid, maxUUIDBytes)
}

// FailureTextBytes bounds the exception text a failure writes to
// failed_jobs: an error's or a Cancel reason's text longer than this
// (after escaping) is cut, and says how long it was. See
// dialect.StorableText for the escapes: a byte that is not UTF-8 and a NUL
// are written as \xff and \x00, so every database stores the text.
const FailureTextBytes = dialect.FailureTextBytes

// maxUUIDBytes is the width of failed_jobs.uuid (varchar(255)) in bytes,
// so in characters too.
const maxUUIDBytes = 255

// failureTries writes a failure the database may refuse: a row of
// failed_jobs is first written as it should be; when the database
// refuses its data (sqldb.Refused: a character set that lacks a
// character of the text, a server's packet limit), with the text in
// ASCII and cut to ErrorHistoryBytes; and when that is refused too, with
// a stub in place of the payload copy, which the job's own row held but
// failed_jobs would not take (a payload within a few bytes of MySQL's
// max_allowed_packet, a narrower column than Laravel's). Each is written
// at most once: the job is failed with what can be said of it, rather
// than left reserved to come back, run again and meet the same refusal
// for ever.
type failureTries struct {
	job   *Job
	first dialect.Failure
	cause error
	tried []dialect.Failure
}

// next is the failure to try after the refusal refused, or false when
// none is left.
func (t *failureTries) next(refused error) (dialect.Failure, bool) {
	f := t.first
	switch len(t.tried) {
	case 0:
	case 1:
		f.Exception = plainFailure(t.first.Exception, refused, "")
	case 2:
		f.Exception = plainFailure(t.first.Exception, refused, fmt.Sprintf(
			"the job's payload (%d bytes) was refused too, and is not kept: this row names the job but cannot run it if retried", len(t.job.RawPayload)))
		f.Payload = lostPayload(t.job)
	default:
		return f, false
	}
	t.tried = append(t.tried, f)
	return f, true
}

// writeFailure writes the failures of t in turn with write, while the
// database refuses their data (see failureTries).
func writeFailure(t *failureTries, write func(dialect.Failure) error) error {
	var err error
	for {
		f, ok := t.next(err)
		if !ok {
			return err
		}
		if err = write(f); !sqldb.IsRefused(err) {
			return err
		}
	}
}

// plainFailure is a failure's text for a database that refused it: what
// the refusal said and the text itself, as Go quotes strings in ASCII, cut
// to ErrorHistoryBytes, with more when not "".
func plainFailure(text string, refused error, more string) string {
	s := "dbqueue: the database refused this failure as written (" + strconv.QuoteToASCII(dialect.StorableText(refused.Error(), 512)) + ")"
	if more != "" {
		s += "; " + more
	}
	s += "; the failure's text, in ASCII: " + strconv.QuoteToASCII(dialect.StorableText(text, ErrorHistoryBytes))
	return dialect.StorableText(s, ErrorHistoryBytes)
}

// lostPayloadKey is the key of the stub that stands in failed_jobs for a
// payload the database refused to copy there. The stub has no "job", so
// retrying it fails at once as a malformed payload instead of running a
// handler without its data.
const lostPayloadKey = "dbqueuePayloadLost"

// lostPayload is the stub for job's payload: its uuid and displayName
// (for listings), and what was lost.
func lostPayload(job *Job) []byte {
	stub, _ := json.Marshal(map[string]string{
		"uuid":         dialect.StorableText(job.Payload.UUID, maxUUIDBytes),
		"displayName":  dialect.StorableText(job.Name(), maxUUIDBytes),
		lostPayloadKey: fmt.Sprintf("the payload of job %d (%d bytes) could not be copied here: the database refused it", job.ID, len(job.RawPayload)),
	})
	return dialect.MarkFailed(stub, job.ID, job.token, job.Attempts)
}

// failedAlready reports whether a failure of job, one of those t tried
// or would try, is in failed_jobs with the row gone from jobs: a Fail
// retried after its reply was lost finds its own work done.
func (q *Queue) failedAlready(ctx context.Context, job *Job, t *failureTries) bool {
	tries := t.tried
	if len(tries) == 0 {
		tries = []dialect.Failure{t.first}
	}
	for _, f := range tries {
		if done, err := q.sql.FailedAlready(ctx, q.db, job.ID, f); err == nil && done {
			return true
		}
	}
	return false
}
