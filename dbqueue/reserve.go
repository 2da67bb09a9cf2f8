package dbqueue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// maxReserve bounds one claim.
const maxReserve = 1000

// mysqlClaimRounds bounds how many sets of candidates one MySQL claim tries
// when other claimers hold the first ones.
const mysqlClaimRounds = 8

// ErrAttemptsExhausted is the cause a job is failed with when it has been
// reserved as often as the attempts column can count (2,147,483,647 times):
// a job that keeps coming back that often would otherwise overflow the
// column and stop its whole queue.
var ErrAttemptsExhausted = errors.New("dbqueue: the job was reserved as many times as the attempts column can count; it is failed so the queue keeps working (check what keeps giving it back)")

// Reserve claims up to n available jobs, taking from the queues in the
// order given (the default queue when none is named) until n are held. A
// job is available when it is due and unreserved, or when its reservation
// is older than retry_after (its holder died). Each claim adds one to the
// job's attempts.
//
// A row whose payload does not decode is moved to failed_jobs with the
// decode error instead of being returned, so it never blocks the queue.
func (q *Queue) Reserve(ctx context.Context, n int, queues ...string) ([]*Job, error) {
	if n < 1 || n > maxReserve {
		return nil, fmt.Errorf("dbqueue: Reserve(%d): n must be between 1 and %d", n, maxReserve)
	}
	if len(queues) == 0 {
		queues = []string{q.queue}
	}
	var jobs []*Job
	for _, name := range queues {
		if err := checkQueueName(name); err != nil {
			return jobs, err
		}
		got, err := q.reserveFrom(ctx, name, n-len(jobs))
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

func (q *Queue) reserveFrom(ctx context.Context, queue string, n int) ([]*Job, error) {
	var rows []jobRow
	// Taken before the claim, so the local deadline is never late.
	expires := time.Now().Add(q.RetryAfter())
	err := sqldb.Retry(ctx, func() error {
		var err error
		if q.dialect == MySQL {
			rows, err = q.claimInTx(ctx, queue, n)
		} else {
			rows, err = collectJobs(q.db.Query(ctx, q.stmts.reserve, queue, q.retryAfter, n, queue, n, n))
		}
		return err
	})
	if err != nil {
		return nil, sqldb.Wrap("reserve", err)
	}
	slices.SortFunc(rows, func(a, b jobRow) int { return compareJobs(&a.job, &b.job) })
	jobs := make([]*Job, 0, len(rows))
	var failErr error
	for i := range rows {
		rows[i].job.expires = expires
	}
	for _, r := range rows {
		if r.badErr == nil && r.job.Attempts >= maxAttempts {
			r.badErr = fmt.Errorf("job %d, attempt %d: %w", r.job.ID, r.job.Attempts, ErrAttemptsExhausted)
		}
		if r.badErr != nil {
			job := r.job
			failErr = errors.Join(failErr, q.Fail(ctx, &job, r.badErr))
			continue
		}
		job := r.job
		jobs = append(jobs, &job)
	}
	if failErr != nil {
		// The bad rows stay reserved and come back after retry_after.
		return jobs, fmt.Errorf("dbqueue: move malformed payloads to failed_jobs: %w", failErr)
	}
	return jobs, nil
}

// claimInTx is MySQL's claim, in a READ COMMITTED transaction: list
// candidates (expired reservations, then ready rows, in claim order), lock
// those still due by primary key with SKIP LOCKED, then mark them reserved
// (MySQL has no UPDATE … RETURNING).
func (q *Queue) claimInTx(ctx context.Context, queue string, n int) ([]jobRow, error) {
	var rows []jobRow
	err := sqldb.InTx(ctx, q.db, sqldb.TxOptions{ReadCommitted: true}, func(tx sqldb.Tx) error {
		rows = rows[:0]
		var now int64
		scan := func(query string, args ...any) error {
			rs, err := tx.Query(ctx, query, args...)
			if err != nil {
				return err
			}
			defer rs.Close()
			for rs.Next() {
				r, err := scanJob(rs, &now)
				if err != nil {
					return err
				}
				rows = append(rows, r)
			}
			return rs.Err()
		}
		// Twice as many candidates as wanted: other claimers may hold some.
		// When they hold so many that the lock step comes back short, look
		// further, past the candidates already tried, before reporting the
		// queue empty: an empty claim makes StopWhenEmpty workers exit and
		// pollers back off while jobs wait.
		m := min(2*n, 2*maxReserve)
		var tried []int64
		for round := 0; round < mysqlClaimRounds && len(rows) < n; round++ {
			skip := ""
			if len(tried) > 0 {
				skip = "id NOT IN (" + sqldb.Ints(tried) + ") AND "
			}
			ids, err := scanIDs(tx.Query(ctx, q.stmts.reserveCandidates(skip), queue, q.retryAfter, m, queue, m, m))
			if err != nil || len(ids) == 0 {
				return err
			}
			lock := "SELECT " + jobColumns + ", " + q.dialect.Now() + " FROM jobs WHERE id IN (" + sqldb.Ints(ids) +
				") AND " + q.stmts.reserveDue + " LIMIT ? FOR UPDATE SKIP LOCKED"
			if err := scan(lock, q.retryAfter, n-len(rows)); err != nil {
				return err
			}
			if len(ids) < m {
				break // every candidate was read: there are no others
			}
			tried = append(tried, ids...)
		}
		if len(rows) == 0 {
			return nil
		}
		ids := make([]int64, 0, len(rows))
		for _, r := range rows {
			ids = append(ids, r.job.ID)
		}
		query := "UPDATE jobs SET reserved_at = ?, " + claimSet + " WHERE id IN (" + sqldb.Ints(ids) + ")"
		if _, err := tx.Exec(ctx, query, now); err != nil {
			return err
		}
		for i := range rows {
			if rows[i].job.Attempts < maxAttempts {
				rows[i].job.Attempts++
			}
			rows[i].job.token++
			rows[i].job.ReservedAt = time.Unix(now, 0)
		}
		return nil
	})
	return rows, err
}
func collectJobs(rs sqldb.Rows, err error) ([]jobRow, error) {
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var rows []jobRow
	for rs.Next() {
		r, err := scanJob(rs)
		if err != nil {
			return nil, err
		}
		rows = append(rows, r)
	}
	return rows, rs.Err()
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
