package dbqueue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// maxReserve bounds one claim.
const maxReserve = 1000

// ErrAttemptsExhausted is the cause a job is failed with when it has been
// reserved as often as the attempts column can count (2,147,483,647 times):
// a job that keeps coming back that often would otherwise overflow the
// column and stop its whole queue.
var ErrAttemptsExhausted = errors.New("dbqueue: the job was reserved as many times as the attempts column can count; it is failed so the queue keeps working (check what keeps giving it back)")

// Reserve claims up to n available jobs, taking from the queues in the
// order given (the default queue when none is named) until n are held. A
// job is available when it is due and unreserved, or when its reservation
// is older than retry_after (its holder died). Each claim adds one to the
// job's attempts and draws a reservation token no other claim of the row
// ever gets, so a holder whose reservation ran out can never finish
// another holder's run.
//
// A row whose payload does not decode is moved to failed_jobs with the
// decode error instead of being returned, so it never blocks the queue.
func (q *Queue) Reserve(ctx context.Context, n int, queues ...string) ([]*Job, error) {
	return q.reserve(ctx, n, n, nil, nil, queues)
}

// claimFailed hears a job Reserve moved to failed_jobs at claim time,
// with the cause written: a payload that does not decode (the Job then
// has its ID, Queue, Attempts and RawPayload, and as much of Payload as
// decoded) or ErrAttemptsExhausted. It is called only once the move
// committed.
type claimFailed func(job *Job, cause error)

// reserve is Reserve, telling failed (when not nil) of each job it
// failed at claim time, so a worker can log it and fire its hooks, and
// short (when not nil) of each queue whose claim took fewer rows than it
// asked for: a queue the claim found empty, or emptied.
func (q *Queue) reserve(ctx context.Context, n, limited int, failed claimFailed, short func(queue string), queues []string) ([]*Job, error) {
	if n < 1 || n > maxReserve {
		return nil, fmt.Errorf("dbqueue: Reserve(%d): n must be between 1 and %d", n, maxReserve)
	}
	if len(queues) == 0 {
		queues = []string{q.queue}
	}
	if len(queues) > manyQueues && allUTF8(queues) {
		return q.reserveMany(ctx, n, failed, short, queues)
	}
	var jobs []*Job
	for _, name := range queues {
		if err := checkQueueName(name); err != nil {
			return jobs, err
		}
		want := n - len(jobs)
		got, claimed, err := q.reserveFrom(ctx, name, want, limited, failed)
		for _, j := range got {
			if j.limited {
				limited--
			}
		}
		if afterClaim != nil {
			afterClaim(q, name)
		}
		if err == nil && claimed < want && short != nil {
			short(name)
		}
		if err != nil {
			// Jobs already claimed from earlier queues are returned with
			// the error so the caller can still finish them.
			return jobs, err
		}
		jobs = append(jobs, got...)
		if len(jobs) == n {
			break
		}
	}
	return jobs, nil
}

// manyQueues is the most queues a reserve claims one statement each.
// With more, it claims from them all in one statement per n queues
// (dialect.ClaimQueues): a worker serving 10,000 queues of 10 jobs each
// needed a hundred claim statements for a claim of 1,000. A claim of few
// queues keeps Claim's per-queue cursors, which spare a long queue's
// claims the walk past its dead index entries (postgres_claim.go).
const manyQueues = 16

// minChunk is the fewest queues one ClaimQueues statement lists: a claim
// of one job over queues a stale ready set says hold jobs still reads a
// hundred of them at once.
const minChunk = 100

// reserveMany is reserve over more than manyQueues queues: one
// ClaimQueues statement per n of them (minChunk at least), in order,
// until n jobs are held.
// A queue is short when the statement read it and took fewer rows than
// the claim still wanted: every queue before the last one it took a row
// from, and all of them when it came back short.
func (q *Queue) reserveMany(ctx context.Context, n int, failed claimFailed, short func(queue string), queues []string) ([]*Job, error) {
	for _, name := range queues {
		if err := checkQueueName(name); err != nil {
			return nil, err
		}
	}
	var jobs []*Job
	for chunk := range slices.Chunk(queues, max(n, minChunk)) {
		want := n - len(jobs)
		expires := time.Now().Add(q.RetryAfter() - time.Second)
		var rows []dialect.JobRow
		err := sqldb.Retry(ctx, func() (err error) {
			rows, err = q.sql.ClaimQueues(ctx, q.db, chunk, q.retryAfter, want)
			return err
		})
		if afterClaim != nil {
			afterClaim(q, chunk[0])
		}
		if err != nil {
			return jobs, sqldb.Wrap("reserve", err)
		}
		if short != nil {
			shortQueues(chunk, rows, want, short)
		}
		got, _, err := q.claimed(ctx, rows, expires, failed, false)
		jobs = append(jobs, got...)
		if err != nil {
			return jobs, err
		}
		if len(rows) == want {
			break
		}
	}
	return jobs, nil
}

// shortQueues calls short for each queue of a ClaimQueues statement that
// took fewer rows than the claim still wanted when it came to it: rows
// are in the queues' order.
func shortQueues(queues []string, rows []dialect.JobRow, want int, short func(queue string)) {
	got := make(map[string]int, len(rows))
	for _, r := range rows {
		got[r.Queue]++
	}
	for _, name := range queues {
		if want <= 0 {
			return
		}
		if got[name] < want {
			short(name)
		}
		want -= got[name]
		got[name] = 0 // a name listed twice was read once
	}
}

// allUTF8 reports whether every name is valid UTF-8: ClaimQueues lists
// the names in one parameter, which on SQLite and MySQL is JSON.
func allUTF8(names []string) bool {
	for _, n := range names {
		if !utf8.ValidString(n) {
			return false
		}
	}
	return true
}

// afterClaim, when a test sets it, hears every claim statement reserve
// runs, so a test can count them.
var afterClaim func(q *Queue, queue string)

// reserveFrom claims up to n jobs from queue; claimed counts the rows the
// claim took, jobs among them that failed at claim time included.
func (q *Queue) reserveFrom(ctx context.Context, queue string, n, limited int, failed claimFailed) (_ []*Job, claimed int, _ error) {
	var rows []dialect.JobRow
	// Taken before the claim, so the local deadline is never late, and a
	// second early: the database stamps reserved_at in whole seconds, so it
	// may count the reservation as up to a second older than we do.
	expires := time.Now().Add(q.RetryAfter() - time.Second)
	err := sqldb.Retry(ctx, func() (err error) {
		rows, err = q.claim(ctx, queue, n, limited)
		return err
	})
	if err != nil {
		return nil, 0, sqldb.Wrap("reserve", err)
	}
	return q.claimed(ctx, rows, expires, failed, true)
}

// claimed turns a claim's rows into jobs, failing those whose payload
// does not decode or whose attempts are exhausted; order puts them in
// claim order (a ClaimQueues result is in it already). claimed counts
// the rows, jobs failed at claim time included.
func (q *Queue) claimed(ctx context.Context, rows []dialect.JobRow, expires time.Time, failed claimFailed, order bool) (_ []*Job, claimed int, _ error) {
	claimed = len(rows)
	jobs := make([]*Job, 0, len(rows))
	var failErr error
	// One allocation for the claim's Jobs: the collector's work follows
	// the number of objects as well as their bytes, and one large object
	// costs it less than many small ones (see Job).
	slab := make([]Job, len(rows))
	for i, r := range rows {
		job := &slab[i]
		badErr := newJob(job, r, expires)
		if badErr == nil && job.Attempts >= dialect.MaxAttempts {
			badErr = fmt.Errorf("job %d, attempt %d: %w", job.ID, job.Attempts, ErrAttemptsExhausted)
		}
		if badErr != nil {
			err := q.Fail(ctx, job, badErr)
			if err == nil && failed != nil {
				failed(job, badErr)
			}
			failErr = errors.Join(failErr, err)
			continue
		}
		jobs = append(jobs, job)
	}
	dialect.RecycleRows(rows)
	if order {
		slices.SortFunc(jobs, compareJobs)
	}
	if failErr != nil {
		// The bad rows stay reserved and come back after retry_after.
		return jobs, claimed, fmt.Errorf("dbqueue: move malformed payloads to failed_jobs: %w", failErr)
	}
	return jobs, claimed, nil
}

// claim claims up to n rows of queue: first, up to limit of them, those
// waiting under a concurrency limit that the limits let start (when the
// database has limits), then plain ones. A worker sets limit to its free
// handlers: a limited job it claimed but could not start yet would hold a
// place of the limit that another process could use.
func (q *Queue) claim(ctx context.Context, queue string, n, limit int) ([]dialect.JobRow, error) {
	if limit <= 0 || !q.anyFlows(ctx) {
		return q.sql.Claim(ctx, q.db, queue, q.retryAfter, n)
	}
	limited, err := q.sql.ClaimFlow(ctx, q.db, queue, q.retryAfter, min(n, limit))
	if err != nil || len(limited) == n {
		return limited, err
	}
	rows, err := q.sql.Claim(ctx, q.db, queue, q.retryAfter, n-len(limited))
	if err != nil {
		if len(limited) > 0 {
			return limited, nil // claimed and committed: hand them out
		}
		return nil, err
	}
	return append(limited, rows...), nil
}

// compareJobs orders a claim as the queue does: by availability, then id.
func compareJobs(a, b *Job) int {
	if c := a.AvailableAt.Compare(b.AvailableAt); c != 0 {
		return c
	}
	switch {
	case a.ID < b.ID:
		return -1
	case a.ID > b.ID:
		return 1
	}
	return 0
}
