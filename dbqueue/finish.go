package dbqueue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// ErrNotHeld is returned by Delete, Release and Fail when the caller no
// longer holds the job's reservation: it was reclaimed after retry_after and
// is another worker's now, or it was already finished. Nothing was changed.
var ErrNotHeld = errors.New("dbqueue: job is no longer held by this reservation (reclaimed after retry_after, or already finished)")

// held names one reservation of a job: its row and the token the claim drew.
type held struct {
	id    int64
	token int64
}

func heldOf(job *Job) held { return held{job.ID, job.token} }

// heldColumns lays out the reservations of jobs as the columns the
// ownership checks compare: ids, tokens and attempts.
func heldColumns(jobs []*Job) (ids, tokens, attempts []int64) {
	ids, tokens, attempts = make([]int64, len(jobs)), make([]int64, len(jobs)), make([]int64, len(jobs))
	for i, j := range jobs {
		ids[i], tokens[i], attempts[i] = j.ID, j.token, int64(j.Attempts)
	}
	return ids, tokens, attempts
}

func notHeld(job *Job) error {
	return fmt.Errorf("job %d (attempt %d): %w", job.ID, job.Attempts, ErrNotHeld)
}

// Delete removes a job that succeeded.
func (q *Queue) Delete(ctx context.Context, job *Job) error {
	var res sqldb.Result
	err := sqldb.Retry(ctx, func() (err error) {
		res, err = q.db.Exec(ctx, q.stmts.deleteOne, job.ID, job.token, job.Attempts)
		return err
	})
	if err != nil {
		return sqldb.Wrap("delete", err)
	}
	if res.RowsAffected == 0 {
		return notHeld(job)
	}
	return nil
}

// DeleteMany removes jobs that succeeded in one statement, each checked
// against its own reservation, and returns those that were no longer held
// (and so were left alone).
func (q *Queue) DeleteMany(ctx context.Context, jobs []*Job) (lost []*Job, err error) {
	for chunk := range slices.Chunk(jobs, pushChunk) {
		deleted, err := q.deleteChunk(ctx, chunk)
		if err != nil {
			return lost, sqldb.Wrap("delete", err)
		}
		for _, j := range chunk {
			if !deleted[heldOf(j)] {
				lost = append(lost, j)
			}
		}
	}
	return lost, nil
}

func scanHeld(rows sqldb.Rows, err error) ([]held, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []held
	for rows.Next() {
		var h held
		if err := rows.Scan(&h.id, &h.token); err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, rows.Err()
}

func (q *Queue) deleteChunk(ctx context.Context, jobs []*Job) (map[held]bool, error) {
	ids, tokens, attempts := heldColumns(jobs)
	deleted := make(map[held]bool, len(jobs))
	err := sqldb.Retry(ctx, func() error {
		clear(deleted)
		if q.dialect == Postgres {
			// One statement text whatever the batch size, so pgx prepares it
			// once per connection.
			attempts32 := make([]int32, len(jobs))
			for i, j := range jobs {
				attempts32[i] = int32(j.Attempts)
			}
			gone, err := scanHeld(q.db.Query(ctx, q.stmts.deleteArrays, ids, tokens, attempts32))
			for _, h := range gone {
				deleted[h] = true
			}
			return err
		}
		if q.stmts.deleteReturning {
			gone, err := scanHeld(q.db.Query(ctx, q.stmts.deleteMany(ids, tokens, attempts, true)))
			for _, h := range gone {
				deleted[h] = true
			}
			return err
		}
		// MySQL 8 has no DELETE … RETURNING: lock what is still held,
		// delete it, and know exactly which rows went.
		return sqldb.InTx(ctx, q.db, sqldb.TxOptions{ReadCommitted: true}, func(tx sqldb.Tx) error {
			still, err := scanHeld(tx.Query(ctx, q.stmts.selectHeld(ids, tokens, attempts)))
			if err != nil || len(still) == 0 {
				return err
			}
			stillIDs := make([]int64, len(still))
			for i, h := range still {
				stillIDs[i] = h.id
			}
			if _, err := tx.Exec(ctx, "DELETE FROM jobs WHERE id IN ("+sqldb.Ints(stillIDs)+")"); err != nil {
				return err
			}
			for _, h := range still {
				deleted[h] = true
			}
			return nil
		})
	})
	return deleted, err
}

// Release puts a held job back, available again after delay. The row is
// updated in place and keeps its id and attempts (Laravel deletes and
// re-inserts it, which loses the job if the process dies in between).
func (q *Queue) Release(ctx context.Context, job *Job, delay time.Duration) error {
	if delay < 0 {
		return fmt.Errorf("dbqueue: Release job %d: negative delay %v", job.ID, delay)
	}
	return q.release(ctx, job, delay, nil)
}

// ReleaseWithPayload is Release that also replaces the payload, for workers
// that carry state from one attempt to the next (the exception count that
// maxExceptions needs). The job's Payload and RawPayload are updated.
func (q *Queue) ReleaseWithPayload(ctx context.Context, job *Job, delay time.Duration, payload []byte) error {
	if delay < 0 {
		return fmt.Errorf("dbqueue: Release job %d: negative delay %v", job.ID, delay)
	}
	decoded, err := DecodePayload(payload)
	if err != nil {
		return fmt.Errorf("dbqueue: ReleaseWithPayload job %d: %w", job.ID, err)
	}
	if err := q.release(ctx, job, delay, payload); err != nil {
		return err
	}
	job.Payload, job.RawPayload = decoded, payload
	return nil
}

func (q *Queue) release(ctx context.Context, job *Job, delay time.Duration, payload []byte) error {
	var res sqldb.Result
	err := sqldb.Retry(ctx, func() (err error) {
		if payload == nil {
			res, err = q.db.Exec(ctx, q.stmts.release, wholeSeconds(delay), job.ID, job.token, job.Attempts)
		} else {
			res, err = q.db.Exec(ctx, q.stmts.releasePayload, string(payload), wholeSeconds(delay), job.ID, job.token, job.Attempts)
		}
		return err
	})
	if err != nil {
		return sqldb.Wrap("release", err)
	}
	if res.RowsAffected == 0 {
		return notHeld(job)
	}
	return nil
}

// Unreserve gives back a held job that did not run, or was interrupted by
// its worker stopping, without counting the attempt: it is available again
// at once, with the attempts it had before it was reserved. A worker uses
// it for prefetched jobs it never started.
func (q *Queue) Unreserve(ctx context.Context, job *Job) error {
	var res sqldb.Result
	err := sqldb.Retry(ctx, func() (err error) {
		res, err = q.db.Exec(ctx, q.stmts.unreserve, job.ID, job.token, job.Attempts)
		return err
	})
	if err != nil {
		return sqldb.Wrap("unreserve", err)
	}
	if res.RowsAffected == 0 {
		return notHeld(job)
	}
	// The row now carries the next token: this reservation is over.
	job.token = -1
	return nil
}

// Fail moves a held job to failed_jobs with cause as its exception text. The
// row leaves jobs and enters failed_jobs in one transaction: never both,
// never neither. A uuid already in failed_jobs (the job failed before, was
// retried and failed again) is replaced by the new failure.
func (q *Queue) Fail(ctx context.Context, job *Job, cause error) error {
	text := "failed"
	if cause != nil {
		text = cause.Error()
	}
	uuid := job.Payload.UUID
	if uuid == "" {
		uuid = newUUID() // a malformed row carries none
	}
	err := sqldb.Retry(ctx, func() error {
		return sqldb.InTx(ctx, q.db, sqldb.TxOptions{}, func(tx sqldb.Tx) error {
			res, err := tx.Exec(ctx, q.stmts.failDelete, job.ID, job.token, job.Attempts)
			if err != nil {
				return err
			}
			if res.RowsAffected == 0 {
				return notHeld(job)
			}
			_, err = tx.Exec(ctx, q.stmts.failInsert, uuid, q.connection, job.Queue, string(job.RawPayload), text)
			return err
		})
	})
	if errors.Is(err, ErrNotHeld) {
		// A Fail retried after its reply was lost finds its own work done:
		// the row has left jobs, and failed_jobs holds it with this very
		// exception. That is a success, so the caller's failure hooks run.
		if done, cerr := q.failedAlready(ctx, job, uuid, text); cerr == nil && done {
			return nil
		}
		return err
	}
	return sqldb.Wrap("fail", err)
}

// failedAlready reports whether job's row has left jobs and failed_jobs
// holds uuid with exception text: what a committed Fail leaves.
func (q *Queue) failedAlready(ctx context.Context, job *Job, uuid, text string) (bool, error) {
	var n int64
	if err := q.db.QueryRow(ctx, q.stmts.countJob, job.ID).Scan(&n); err != nil || n > 0 {
		return false, err
	}
	err := q.db.QueryRow(ctx, q.stmts.countFailed, uuid, text).Scan(&n)
	return n > 0, err
}
