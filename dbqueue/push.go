package dbqueue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// pushChunk bounds the rows of one INSERT (PostgreSQL allows 65,535
// parameters; each row takes three).
const pushChunk = 1000

type pushRow struct {
	queue    string
	payload  []byte
	absolute bool  // at is a Unix time, not a delay
	at       int64 // delay in seconds, or Unix time
}

func (q *Queue) rows(jobs []NewJob) ([]pushRow, error) {
	rows := make([]pushRow, len(jobs))
	for i, j := range jobs {
		payload, err := j.encode()
		if err != nil {
			return nil, err
		}
		queue := j.Queue
		if queue == "" {
			queue = q.queue
		}
		if err := checkQueueName(queue); err != nil {
			return nil, err
		}
		row := pushRow{queue: queue, payload: payload, at: wholeSeconds(j.Delay)}
		if !j.RunAt.IsZero() {
			row.absolute, row.at = true, j.RunAt.Unix()
		}
		rows[i] = row
	}
	return rows, nil
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
// their ids in order: all are pushed or none. On a pgx pool, 10,000 jobs or
// more go by COPY instead, which writes them about 1.5 times as fast.
func (q *Queue) PushMany(ctx context.Context, jobs []NewJob) ([]int64, error) {
	rows, err := q.rows(jobs)
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	var ids []int64
	err = sqldb.Retry(ctx, func() error {
		if pool, ok := sqldb.PgxPoolOf(q.db); ok && len(rows) >= copyThreshold {
			ids, err = q.copyIn(ctx, pool, rows)
			return err
		}
		if len(rows) <= pushChunk {
			ids, err = q.insert(ctx, q.db, rows)
			return err
		}
		return sqldb.InTx(ctx, q.db, sqldb.TxOptions{}, func(tx sqldb.Tx) error {
			ids, err = q.insert(ctx, tx, rows)
			return err
		})
	})
	if err != nil {
		return nil, sqldb.Wrap("push", err)
	}
	return ids, nil
}

// PushTx adds jobs inside the caller's database/sql transaction: they exist
// only if that transaction commits. Conflicts are not retried here (the
// transaction is the caller's); the error reaches the caller.
func (q *Queue) PushTx(ctx context.Context, tx *sql.Tx, jobs ...NewJob) ([]int64, error) {
	if tx == nil {
		return nil, errors.New("dbqueue: PushTx: nil *sql.Tx")
	}
	return q.pushIn(ctx, sqldb.SQLTx(tx), jobs)
}

// PushPgxTx adds jobs inside the caller's pgx transaction: they exist only
// if that transaction commits.
func (q *Queue) PushPgxTx(ctx context.Context, tx pgx.Tx, jobs ...NewJob) ([]int64, error) {
	if tx == nil {
		return nil, errors.New("dbqueue: PushPgxTx: nil pgx.Tx")
	}
	if q.dialect != Postgres {
		return nil, fmt.Errorf("dbqueue: PushPgxTx on a %s queue: a pgx transaction is a PostgreSQL one; use PushTx with a *sql.Tx", q.dialect)
	}
	return q.pushIn(ctx, sqldb.PgxTx(tx), jobs)
}

func (q *Queue) pushIn(ctx context.Context, ex sqldb.Execer, jobs []NewJob) ([]int64, error) {
	rows, err := q.rows(jobs)
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	ids, err := q.insert(ctx, ex, rows)
	if err != nil {
		return nil, sqldb.Wrap("push", err)
	}
	return ids, nil
}

// insert writes rows in chunks and returns their ids in order.
func (q *Queue) insert(ctx context.Context, ex sqldb.Execer, rows []pushRow) ([]int64, error) {
	ids := make([]int64, 0, len(rows))
	for chunk := range slices.Chunk(rows, pushChunk) {
		args := make([]any, 0, 3*len(chunk))
		for _, r := range chunk {
			args = append(args, r.queue, string(r.payload), r.at)
		}
		notify := q.dialect == Postgres && q.wake.shouldNotify(chunk)
		query := q.stmts.insert(chunk, notify)
		if q.stmts.insertReturnsID {
			got, err := scanIDs(ex.Query(ctx, query, args...))
			if err != nil {
				return nil, err
			}
			if len(got) != len(chunk) {
				return nil, fmt.Errorf("insert returned %d ids for %d rows", len(got), len(chunk))
			}
			slices.Sort(got) // a sequence hands out increasing ids in VALUES order
			ids = append(ids, got...)
			continue
		}
		res, err := ex.Exec(ctx, query, args...)
		if err != nil {
			return nil, err
		}
		// MySQL 8 reports the first id of a multi-row insert, the others
		// following auto_increment_increment apart; SQLite the last, with
		// the ids of one statement consecutive.
		first, step := res.LastInsertID, max(q.stmts.idStep, 1)
		if q.dialect == SQLite {
			first = res.LastInsertID - int64(len(chunk)) + 1
		}
		for i := range chunk {
			ids = append(ids, first+int64(i)*step)
		}
	}
	return ids, nil
}

func scanIDs(rows sqldb.Rows, err error) ([]int64, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}
