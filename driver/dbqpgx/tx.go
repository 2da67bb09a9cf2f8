package dbqpgx

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/queueside"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// txFinisher is what package dbqueue offers the driver packages to end a
// held job inside a caller's transaction.
type txFinisher interface {
	CompleteIn(ctx context.Context, tx sqldb.Tx, job *dbqueue.Job) (before, after *dbqueue.Batch, err error)
	ReleaseIn(ctx context.Context, tx sqldb.Tx, job *dbqueue.Job, delay time.Duration, giveBack bool) error
	FailIn(ctx context.Context, tx sqldb.Tx, job *dbqueue.Job, cause error) (before, after *dbqueue.Batch, err error)
}

// finisherFor checks the arguments every transactional end shares and
// returns the queue's finisher and tx adapted.
func finisherFor(op string, q *dbqueue.Queue, tx pgx.Tx, job *dbqueue.Job) (txFinisher, sqldb.Tx, error) {
	switch {
	case tx == nil:
		return nil, nil, fmt.Errorf("dbqueue: dbqpgx.%s: nil pgx.Tx: pass the transaction the job's writes are in", op)
	case q == nil:
		return nil, nil, fmt.Errorf("dbqueue: dbqpgx.%s: nil queue", op)
	case job == nil:
		return nil, nil, fmt.Errorf("dbqueue: dbqpgx.%s: nil job", op)
	case q.Dialect() != dbqueue.Postgres:
		return nil, nil, fmt.Errorf("dbqueue: dbqpgx.%s on a %s queue: a pgx transaction is a PostgreSQL one", op, q.Dialect())
	}
	return queueside.Of(q), pgxTx{pgxExec: pgxExec{tx}, tx: tx}, nil
}

// CompleteTx is dbqueue.Queue.CompleteTx for a pgx transaction: the held
// job ends (deleted, its chain's next link pushed, counted in its batch)
// only if tx commits, and ErrNotHeld says to roll tx back. When Commit
// fails, q.ResolveCommit finds out what happened.
func CompleteTx(ctx context.Context, q *dbqueue.Queue, tx pgx.Tx, job *dbqueue.Job) error {
	f, stx, err := finisherFor("CompleteTx", q, tx, job)
	if err != nil {
		return err
	}
	_, _, err = f.CompleteIn(ctx, stx, job)
	return err
}

// ReleaseTx is dbqueue.Queue.ReleaseTx for a pgx transaction.
func ReleaseTx(ctx context.Context, q *dbqueue.Queue, tx pgx.Tx, job *dbqueue.Job, delay time.Duration) error {
	f, stx, err := finisherFor("ReleaseTx", q, tx, job)
	if err != nil {
		return err
	}
	return f.ReleaseIn(ctx, stx, job, delay, false)
}

// SnoozeTx is dbqueue.Queue.SnoozeTx for a pgx transaction: the job runs
// again after d, its attempt taken back.
func SnoozeTx(ctx context.Context, q *dbqueue.Queue, tx pgx.Tx, job *dbqueue.Job, d time.Duration) error {
	f, stx, err := finisherFor("SnoozeTx", q, tx, job)
	if err != nil {
		return err
	}
	return f.ReleaseIn(ctx, stx, job, d, true)
}

// FailTx is dbqueue.Queue.FailTx for a pgx transaction.
func FailTx(ctx context.Context, q *dbqueue.Queue, tx pgx.Tx, job *dbqueue.Job, cause error) error {
	f, stx, err := finisherFor("FailTx", q, tx, job)
	if err != nil {
		return err
	}
	_, _, err = f.FailIn(ctx, stx, job, cause)
	return err
}

// CancelTx is dbqueue.Queue.CancelTx for a pgx transaction: the job goes
// to failed_jobs as cancelled by its handler, without a retry.
func CancelTx(ctx context.Context, q *dbqueue.Queue, tx pgx.Tx, job *dbqueue.Job, reason string) error {
	return FailTx(ctx, q, tx, job, dbqueue.Cancelled(reason))
}

// pgxTxType is the type of a pgx transaction.
var pgxTxType = reflect.TypeFor[pgx.Tx]()

// BeginNative begins a transaction on the pool for a transactional
// handler (worker.HandleTx): a pgx.Tx, or a *sql.Tx through a database/sql
// pool over the same pgx pool, for handlers written for database/sql.
func (p *poolDB) BeginNative(ctx context.Context, as reflect.Type) (any, sqldb.Tx, error) {
	switch as {
	case pgxTxType:
		tx, err := p.pool.Begin(ctx)
		if err != nil {
			return nil, nil, err
		}
		return tx, pgxTx{pgxExec: pgxExec{tx}, tx: tx}, nil
	case sqldb.SQLTxType:
		p.sqlOnce.Do(func() { p.sqlDB = stdlib.OpenDBFromPool(p.pool) })
		return sqldb.BeginSQL(ctx, p.sqlDB)
	}
	return nil, nil, fmt.Errorf("a pgx pool begins a pgx.Tx or a *sql.Tx, not a %v", as)
}

// NativeTx: a queue on a pgx pool gives its transactional handlers a
// pgx.Tx, or a *sql.Tx.
func (p *poolDB) NativeTx() []reflect.Type { return []reflect.Type{pgxTxType, sqldb.SQLTxType} }

var _ sqldb.NativeBeginner = (*poolDB)(nil)
