package sqldb

import (
	"context"
	"database/sql"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Rows is the part of pgx.Rows and *sql.Rows the queue uses.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// Row is a single-row result.
type Row interface {
	Scan(dest ...any) error
}

// Execer runs statements. Queries are written with '?' placeholders and
// rebound for the dialect by the caller (see Rebind).
type Execer interface {
	Exec(ctx context.Context, query string, args ...any) (Result, error)
	Query(ctx context.Context, query string, args ...any) (Rows, error)
	QueryRow(ctx context.Context, query string, args ...any) Row
}

// Result is what a statement changed.
type Result struct {
	RowsAffected int64
	// LastInsertID is the id of the last row inserted, where the driver
	// reports it (MySQL and SQLite; 0 for PostgreSQL, which uses RETURNING).
	LastInsertID int64
}

// Tx is a transaction.
type Tx interface {
	Execer
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
}

// TxOptions says how to begin a transaction.
type TxOptions struct {
	// ReadCommitted asks for READ COMMITTED isolation (MySQL claims use it
	// to avoid gap locks).
	ReadCommitted bool
}

// DB is a connection pool that can begin transactions.
type DB interface {
	Execer
	Begin(ctx context.Context, opts TxOptions) (Tx, error)
	// Close releases the pool when the queue owns it.
	Close() error
}

// ---- pgx ----

type pgxExecer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

type pgxExec struct{ e pgxExecer }

func (p pgxExec) Exec(ctx context.Context, q string, args ...any) (Result, error) {
	tag, err := p.e.Exec(ctx, q, args...)
	if err != nil {
		return Result{}, err
	}
	return Result{RowsAffected: tag.RowsAffected()}, nil
}

func (p pgxExec) Query(ctx context.Context, q string, args ...any) (Rows, error) {
	rows, err := p.e.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return rows, nil
}

func (p pgxExec) QueryRow(ctx context.Context, q string, args ...any) Row {
	return p.e.QueryRow(ctx, q, args...)
}

// PgxPool adapts a pgx pool. Close closes the pool only when owned is true.
func PgxPool(pool *pgxpool.Pool, owned bool) DB {
	return &pgxPoolDB{pgxExec: pgxExec{pool}, pool: pool, owned: owned}
}

type pgxPoolDB struct {
	pgxExec
	pool  *pgxpool.Pool
	owned bool
}

func (p *pgxPoolDB) Begin(ctx context.Context, opts TxOptions) (Tx, error) {
	txo := pgx.TxOptions{}
	if opts.ReadCommitted {
		txo.IsoLevel = pgx.ReadCommitted
	}
	tx, err := p.pool.BeginTx(ctx, txo)
	if err != nil {
		return nil, err
	}
	return PgxTx(tx), nil
}

func (p *pgxPoolDB) Close() error {
	if p.owned {
		p.pool.Close()
	}
	return nil
}

// PgxTx adapts a caller's pgx transaction.
func PgxTx(tx pgx.Tx) Tx { return pgxTx{pgxExec: pgxExec{tx}, tx: tx} }

type pgxTx struct {
	pgxExec
	tx pgx.Tx
}

func (t pgxTx) Commit(ctx context.Context) error   { return t.tx.Commit(ctx) }
func (t pgxTx) Rollback(ctx context.Context) error { return t.tx.Rollback(ctx) }

// ---- database/sql ----

type stdExecer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

type stdExec struct{ e stdExecer }

func (s stdExec) Exec(ctx context.Context, q string, args ...any) (Result, error) {
	res, err := s.e.ExecContext(ctx, q, args...)
	if err != nil {
		return Result{}, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return Result{}, err
	}
	id, _ := res.LastInsertId() // not every driver reports it
	return Result{RowsAffected: n, LastInsertID: id}, nil
}

func (s stdExec) Query(ctx context.Context, q string, args ...any) (Rows, error) {
	rows, err := s.e.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return stdRows{rows}, nil
}

func (s stdExec) QueryRow(ctx context.Context, q string, args ...any) Row {
	return s.e.QueryRowContext(ctx, q, args...)
}

type stdRows struct{ *sql.Rows }

func (r stdRows) Close() { _ = r.Rows.Close() }

// SQLDB adapts a database/sql pool. Close closes it only when owned is true.
func SQLDB(db *sql.DB, owned bool) DB {
	return &stdDB{stdExec: stdExec{db}, db: db, owned: owned}
}

type stdDB struct {
	stdExec
	db    *sql.DB
	owned bool
	// sessionRC: every connection already runs in READ COMMITTED
	// (ReadCommittedSessions), so a READ COMMITTED transaction needs no
	// SET TRANSACTION of its own.
	sessionRC bool
}

func (s *stdDB) Begin(ctx context.Context, opts TxOptions) (Tx, error) {
	var txo *sql.TxOptions
	if opts.ReadCommitted && !s.sessionRC {
		txo = &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	}
	tx, err := s.db.BeginTx(ctx, txo)
	if err != nil {
		return nil, err
	}
	return SQLTx(tx), nil
}

func (s *stdDB) Close() error {
	if s.owned {
		return s.db.Close()
	}
	return nil
}

// SQLTx adapts a caller's database/sql transaction.
func SQLTx(tx *sql.Tx) Tx { return stdTx{stdExec: stdExec{tx}, tx: tx} }

type stdTx struct {
	stdExec
	tx *sql.Tx
}

func (t stdTx) Commit(context.Context) error { return t.tx.Commit() }
func (t stdTx) Rollback(context.Context) error {
	err := t.tx.Rollback()
	if errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	return err
}

// InTx runs fn in a transaction on db, committing when fn returns nil and
// rolling back otherwise.
func InTx(ctx context.Context, db DB, opts TxOptions, fn func(tx Tx) error) error {
	tx, err := db.Begin(ctx, opts)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return err
	}
	return tx.Commit(ctx)
}

// PgxPoolOf returns the pgx pool behind db, if it is one: PostgreSQL
// features that need a connection of their own (LISTEN) use it.
func PgxPoolOf(db DB) (*pgxpool.Pool, bool) {
	p, ok := db.(*pgxPoolDB)
	if !ok {
		return nil, false
	}
	return p.pool, true
}
