package dbqueue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// pushChunk bounds the rows of one INSERT transaction step; PushMany of
// more goes in one transaction.
const pushChunk = 1000

func (q *Queue) rows(jobs []NewJob) ([]dialect.PushRow, error) {
	rows := make([]dialect.PushRow, len(jobs))
	for i, j := range jobs {
		row, err := q.row(j, nil)
		if err != nil {
			return nil, err
		}
		rows[i] = row
	}
	return rows, nil
}

// row validates j and builds its row; edit, when set, changes the payload
// before it is encoded (a batch's id, a chain's rest).
func (q *Queue) row(j NewJob, edit func(*Payload)) (dialect.PushRow, error) {
	p, err := j.envelope()
	if err != nil {
		return dialect.PushRow{}, err
	}
	if edit != nil {
		edit(&p)
	}
	// Laravel's key order, and the nulls PHP expects.
	payload := marshalPayload(&p)
	queue := j.Queue
	if queue == "" {
		queue = q.queue
	}
	if err := checkQueueName(queue); err != nil {
		return dialect.PushRow{}, err
	}
	row := dialect.PushRow{Queue: queue, Payload: payload, At: wholeSeconds(j.Delay)}
	if c := j.Concurrency; c != nil {
		if err := c.check(); err != nil {
			return dialect.PushRow{}, fmt.Errorf("dbqueue: job %q: %w", j.Name, err)
		}
		row.Flow, row.FlowKey = c.Limit, c.Key
	}
	if !j.RunAt.IsZero() {
		row.Absolute, row.At = true, j.RunAt.Unix()
	}
	return row, nil
}

// Push adds one job and returns its id. It is visible to workers at once
// (or after its delay).
func (q *Queue) Push(ctx context.Context, job NewJob) (int64, error) {
	ids, err := q.PushMany(ctx, []NewJob{job})
	if err != nil {
		return 0, err
	}
	return ids[0], nil
}

// PushMany adds jobs with multi-row INSERTs in one transaction and returns
// their ids in order: all are pushed or none. There is no COPY path: on
// PostgreSQL the array INSERT writes 10,000 to 1,000,000 jobs faster than
// COPY did (BenchmarkPushMany; docs/measurements/choices.md).
//
// A job with Unique set is pushed as PushUnique pushes it, in the same
// transaction: when a live lock holds its key it is not queued, and its id
// is that of the job holding the key (PushUnique says which it was).
func (q *Queue) PushMany(ctx context.Context, jobs []NewJob) ([]int64, error) {
	ids, _, err := q.push(ctx, nil, jobs)
	return ids, err
}

// push writes jobs through the queue's push middleware, inside ex (a
// caller's transaction) or, when ex is nil, in a transaction of its own,
// retried on conflicts. dup, when not nil, tells for each id whether its
// job was a unique job's duplicate, as the innermost push reported it.
func (q *Queue) push(ctx context.Context, ex sqldb.Execer, jobs []NewJob) (ids []int64, dup []bool, err error) {
	if len(q.pushMiddleware) == 0 || len(jobs) == 0 {
		return q.write(ctx, ex, jobs)
	}
	ids, err = q.throughMiddleware(ctx, jobs, func(ctx context.Context, jobs []NewJob) ([]int64, error) {
		var ids []int64
		var err error
		ids, dup, err = q.write(ctx, ex, jobs)
		return ids, err
	})
	if err != nil {
		return nil, nil, err
	}
	if len(dup) != len(ids) {
		dup = nil // a middleware pushed other jobs than it was given
	}
	return ids, dup, nil
}

// write is push after the middleware.
func (q *Queue) write(ctx context.Context, ex sqldb.Execer, jobs []NewJob) ([]int64, []bool, error) {
	rows, err := q.rows(jobs)
	if err != nil || len(rows) == 0 {
		return nil, nil, err
	}
	locks, err := uniqueLocks(jobs, rows)
	if err != nil {
		return nil, nil, err
	}
	if err := q.declareFlows(ctx, jobs); err != nil {
		return nil, nil, err
	}
	if locks == nil && ex == nil {
		ids, err := q.pushRows(ctx, rows)
		return ids, nil, err
	}
	notify := q.wake.shouldNotify(rows)
	switch {
	case locks == nil:
		ids, err := q.insert(ctx, ex, rows, notify)
		if err != nil {
			return nil, nil, sqldb.Wrap("push", err)
		}
		return ids, nil, nil
	case ex != nil:
		ids, dup, err := q.insertLocked(ctx, ex, rows, locks, notify)
		if err != nil {
			return nil, nil, sqldb.Wrap("push unique", err)
		}
		return ids, dup, nil
	}
	var (
		ids []int64
		dup []bool
	)
	err = sqldb.Retry(ctx, func() error {
		return sqldb.InTx(ctx, q.db, sqldb.TxOptions{ReadCommitted: true}, func(tx sqldb.Tx) (err error) {
			ids, dup, err = q.insertLocked(ctx, tx, rows, locks, notify)
			return err
		})
	})
	if err != nil {
		return nil, nil, sqldb.Wrap("push unique", err)
	}
	pushed := make([]dialect.PushRow, 0, len(rows))
	for i, r := range rows {
		if !dup[i] {
			pushed = append(pushed, r)
		}
	}
	q.wake.pushed(pushed)
	return ids, dup, nil
}

// pushRows is PushMany after the rows are built.
func (q *Queue) pushRows(ctx context.Context, rows []dialect.PushRow) ([]int64, error) {
	var err error
	notify := q.wake.shouldNotify(rows)
	var ids []int64
	err = sqldb.Retry(ctx, func() error {
		if len(rows) <= pushChunk {
			ids, err = q.insert(ctx, q.db, rows, notify)
			return err
		}
		return sqldb.InTx(ctx, q.db, sqldb.TxOptions{}, func(tx sqldb.Tx) error {
			ids, err = q.insert(ctx, tx, rows, notify)
			return err
		})
	})
	if err != nil {
		return nil, sqldb.Wrap("push", err)
	}
	q.wake.pushed(rows)
	return ids, nil
}

// PushTx adds jobs inside the caller's database/sql transaction: they exist
// only if that transaction commits. Conflicts are not retried here (the
// transaction is the caller's); the error reaches the caller. Jobs with
// Unique take their locks in tx, as PushUniqueTx does. For a pgx
// transaction use dbqpgx.PushTx.
func (q *Queue) PushTx(ctx context.Context, tx *sql.Tx, jobs ...NewJob) ([]int64, error) {
	if tx == nil {
		return nil, errors.New("dbqueue: PushTx: nil *sql.Tx")
	}
	ids, _, err := q.push(ctx, sqldb.SQLTx(tx), jobs)
	return ids, err
}
