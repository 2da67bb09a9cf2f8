// Package dbqpgx runs dbqueue on PostgreSQL through pgx v5, the pool most
// Go services on PostgreSQL already have. It is the only driver package
// that brings LISTEN/NOTIFY wake-ups (workers start a pushed job within
// milliseconds instead of a poll interval).
//
// Importing it registers postgres:// and postgresql:// DSNs with
// dbqueue.Open and the migrations:
//
//	import _ "github.com/dbqueue/dbqueue/driver/dbqpgx"
//
// or hand dbqueue the pool you have:
//
//	q, err := dbqueue.New(ctx, dbqpgx.New(pool))
//
// Behind PgBouncer in transaction pooling mode, add
// default_query_exec_mode=exec to the DSN (pgx's default statement cache
// needs a session of its own) and LISTEN on a direct connection with
// dbqueue.WithListenDSN, or not at all with dbqueue.WithoutListen; see the
// PgBouncer section of docs/scaling.md.
package dbqpgx

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/queueside"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// pgHint is what a bad PostgreSQL DSN's error says to do.
const pgHint = "write it as postgres://user:pass@host:5432/db?param=value, with special characters of the password URL-escaped (%40 for @)"

func init() {
	sqldb.RegisterOpener(sqldb.Opener{
		Dialect: "postgres",
		Import:  "github.com/dbqueue/dbqueue/driver/dbqpgx",
		Match: func(dsn string) bool {
			scheme, _, _ := strings.Cut(dsn, ":")
			scheme = strings.ToLower(scheme)
			return scheme == "postgres" || scheme == "postgresql"
		},
		Parse: func(dsn string) (string, string, error) {
			if _, err := url.Parse(dsn); err != nil {
				return "", "", fmt.Errorf("dbqueue: bad PostgreSQL DSN %s: %w: %s", sqldb.Redact(dsn), sqldb.URLError(err), pgHint)
			}
			// pgx's database/sql driver parses the DSN only when it first
			// connects, where its error would skip the redaction: parse now.
			if _, err := pgx.ParseConfig(dsn); err != nil {
				return "", "", fmt.Errorf("dbqueue: bad PostgreSQL DSN %s: %w: %s", sqldb.Redact(dsn), err, pgHint)
			}
			return "pgx", dsn, nil
		},
		Open: func(ctx context.Context, dsn string) (sqldb.DB, error) {
			pool, err := pgxpool.New(ctx, dsn)
			if err != nil {
				return nil, fmt.Errorf("dbqueue: open %s: %w: %s", sqldb.Redact(dsn), err, pgHint)
			}
			return &poolDB{pgxExec: pgxExec{pool}, pool: pool, owned: true}, nil
		},
		Listener: func(dsn string) (sqldb.Listener, error) {
			cfg, err := pgx.ParseConfig(dsn)
			if err != nil {
				// pgx's error shows the DSN, its password hidden.
				return nil, fmt.Errorf("bad PostgreSQL DSN: %w", err)
			}
			return directListener{cfg}, nil
		},
	})
	sqldb.RegisterClassifier(classify)
}

// classify reads pgx's connection errors, for failover: while a primary is
// down and its replica not yet promoted, a pool configured with both
// hosts and target_session_attrs=read-write fails to connect (the old
// primary refuses, the standby is read-only). Nothing ran on such a
// connection, so the work is retried until the replica is promoted; the
// same holds for an error pgconn marks safe to retry (nothing was sent).
// Refusals that no failover cures (a wrong password, a missing database)
// reach the caller at once, and a closed pool is Closed: nothing can
// succeed on it.
func classify(err error) sqldb.Class {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		var pe *pgconn.PgError
		// invalid_authorization_specification (28…), invalid_catalog_name (3D…)
		if errors.As(err, &pe) && (strings.HasPrefix(pe.Code, "28") || strings.HasPrefix(pe.Code, "3D")) {
			return sqldb.Other
		}
		return sqldb.Retryable
	}
	if pgconn.SafeToRetry(err) {
		return sqldb.Retryable
	}
	// pgxpool's Acquire on a closed pool returns puddle's ErrClosedPool,
	// "closed pool" (puddle is pgxpool's own dependency, not dbqueue's).
	if strings.Contains(err.Error(), "closed pool") {
		return sqldb.Closed
	}
	return sqldb.Other
}

// Driver is a pgx pool, or a database/sql pool opened with pgx's stdlib,
// as a dbqueue.Driver.
type Driver struct{ conn sqldb.Conn }

// New returns the driver for a pgx pool the caller owns: the queue's Close
// leaves it open. Only a pool gives LISTEN/NOTIFY wake-ups.
func New(pool *pgxpool.Pool) *Driver {
	var db sqldb.DB
	if pool != nil {
		db = &poolDB{pgxExec: pgxExec{pool}, pool: pool}
	}
	return &Driver{conn: sqldb.Conn{DB: db, Dialect: "postgres"}}
}

// NewSQL returns the driver for a database/sql pool opened with pgx's
// stdlib ("pgx" driver name). Workers on it poll instead of listening,
// unless the queue is given dbqueue.WithListenDSN.
func NewSQL(db *sql.DB) *Driver {
	return &Driver{conn: sqldb.StdConn(db, "postgres")}
}

// Conn is for dbqueue's own use.
func (d *Driver) Conn() sqldb.Conn { return d.conn }

// PushTx adds jobs to q inside the caller's pgx transaction: they exist
// only if it commits, and listeners wake when it does. A pgx.Tx is checked
// at compile time; for a *sql.Tx use q.PushTx. Jobs with Unique take
// their locks in tx, as PushUniqueTx does.
func PushTx(ctx context.Context, q *dbqueue.Queue, tx pgx.Tx, jobs ...dbqueue.NewJob) ([]int64, error) {
	p, stx, err := pusherFor("PushTx", q, tx)
	if err != nil {
		return nil, err
	}
	return p.PushIn(ctx, stx, jobs)
}

// PushUniqueTx is dbqueue.Queue.PushUnique inside the caller's pgx
// transaction: the job and its lock exist only if tx commits, and a
// rollback takes both away. A concurrent push of the same key, in any
// transaction or none, waits for tx to end, then finds the job or takes
// the lock. It returns the id of the job pushed or, with duplicate true,
// of the job holding the key. For a *sql.Tx use q.PushUniqueTx.
func PushUniqueTx(ctx context.Context, q *dbqueue.Queue, tx pgx.Tx, job dbqueue.NewJob, u dbqueue.Unique) (id int64, duplicate bool, err error) {
	p, stx, err := pusherFor("PushUniqueTx", q, tx)
	if err != nil {
		return 0, false, err
	}
	job.Unique = &u
	return p.PushUniqueIn(ctx, stx, job)
}

// PushArgsUniqueTx is dbqueue.PushArgsUnique inside the caller's pgx
// transaction: a typed job pushed under its options' Unique (the type's
// JobOptions overridden by opts), or unique by kind and args when they set
// none.
func PushArgsUniqueTx(ctx context.Context, q *dbqueue.Queue, tx pgx.Tx, args dbqueue.JobArgs, opts ...dbqueue.JobOptions) (id int64, duplicate bool, err error) {
	p, stx, err := pusherFor("PushArgsUniqueTx", q, tx)
	if err != nil {
		return 0, false, err
	}
	if args == nil {
		return 0, false, errors.New("dbqueue: dbqpgx.PushArgsUniqueTx: args is nil: pass a value of a JobArgs type")
	}
	job := dbqueue.JobFor(args, opts...)
	if job.Name == "" {
		return 0, false, fmt.Errorf("dbqueue: dbqpgx.PushArgsUniqueTx: %T.Kind() returned an empty kind: return the name its handler is registered under", args)
	}
	if job.Unique == nil {
		job.Unique = &dbqueue.Unique{} // unique by kind and args
	}
	return p.PushUniqueIn(ctx, stx, job)
}

// pusherFor checks the arguments every push in a pgx transaction shares
// and returns the queue's pusher and tx adapted.
func pusherFor(op string, q *dbqueue.Queue, tx pgx.Tx) (queueside.WorkerSide, sqldb.Execer, error) {
	switch {
	case tx == nil:
		return nil, nil, fmt.Errorf("dbqueue: dbqpgx.%s: nil pgx.Tx", op)
	case q == nil:
		return nil, nil, fmt.Errorf("dbqueue: dbqpgx.%s: nil queue", op)
	case q.Dialect() != dbqueue.Postgres:
		return nil, nil, fmt.Errorf("dbqueue: dbqpgx.%s on a %s queue: a pgx transaction is a PostgreSQL one", op, q.Dialect())
	}
	return queueside.Of(q), pgxTx{pgxExec: pgxExec{tx}, tx: tx}, nil
}

// PushArgsTx is PushTx for typed jobs (see dbqueue.JobArgs): each args
// becomes dbqueue.JobFor(args), its kind routing it and its type's
// JobOptions applied, a Unique among them. For per-push options, use
// dbqueue.JobFor with PushTx.
func PushArgsTx(ctx context.Context, q *dbqueue.Queue, tx pgx.Tx, args ...dbqueue.JobArgs) ([]int64, error) {
	jobs := make([]dbqueue.NewJob, len(args))
	for i, a := range args {
		if a == nil {
			return nil, fmt.Errorf("dbqueue: dbqpgx.PushArgsTx: args[%d] is nil: pass a value of a JobArgs type", i)
		}
		jobs[i] = dbqueue.JobFor(a)
		if jobs[i].Name == "" {
			return nil, fmt.Errorf("dbqueue: dbqpgx.PushArgsTx: %T.Kind() returned an empty kind: return the name its handler is registered under", a)
		}
	}
	return PushTx(ctx, q, tx, jobs...)
}

// OpenDB returns a database/sql pool over pool, for the migrations:
//
//	db := dbqpgx.OpenDB(pool)
//	defer db.Close()
//	err := migrations.Up(ctx, db, dbqueue.Postgres)
func OpenDB(pool *pgxpool.Pool) *sql.DB { return stdlib.OpenDBFromPool(pool) }

type pgxExecer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

type pgxExec struct{ e pgxExecer }

func (p pgxExec) Exec(ctx context.Context, q string, args ...any) (sqldb.Result, error) {
	tag, err := p.e.Exec(ctx, q, args...)
	if err != nil {
		return sqldb.Result{}, err
	}
	return sqldb.Result{RowsAffected: tag.RowsAffected()}, nil
}

func (p pgxExec) Query(ctx context.Context, q string, args ...any) (sqldb.Rows, error) {
	rows, err := p.e.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return rows, nil
}

func (p pgxExec) QueryRow(ctx context.Context, q string, args ...any) sqldb.Row {
	return p.e.QueryRow(ctx, q, args...)
}

type poolDB struct {
	pgxExec
	pool  *pgxpool.Pool
	owned bool
	// sqlDB is a database/sql pool over pool, made for the first handler
	// that asks for a *sql.Tx (BeginNative).
	sqlOnce sync.Once
	sqlDB   *sql.DB
}

func (p *poolDB) Begin(ctx context.Context, opts sqldb.TxOptions) (sqldb.Tx, error) {
	txo := pgx.TxOptions{}
	if opts.ReadCommitted {
		txo.IsoLevel = pgx.ReadCommitted
	}
	tx, err := p.pool.BeginTx(ctx, txo)
	if err != nil {
		return nil, err
	}
	return pgxTx{pgxExec: pgxExec{tx}, tx: tx}, nil
}

func (p *poolDB) Close() error {
	p.sqlOnce.Do(func() {}) // no database/sql pool is made after Close
	if p.sqlDB != nil {
		_ = p.sqlDB.Close() // leaves pool open
	}
	if p.owned {
		p.pool.Close()
	}
	return nil
}

// QueryAfter sends first and query as one batch: one round trip, and one
// transaction on the server (a pipeline up to its one Sync), so settings
// that first makes for its transaction hold for query. The batch ends
// (its transaction commits) when the rows are read or closed; an error
// from its end is the rows' Err.
func (p *poolDB) QueryAfter(ctx context.Context, first, query string, args ...any) (sqldb.Rows, error) {
	b := &pgx.Batch{}
	b.Queue(first)
	b.Queue(query, args...)
	br := p.pool.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, batch: br}, nil
}

// batchRows are the rows of a batch's last query: the batch ends when
// they do, and its error (the commit's) is theirs.
type batchRows struct {
	pgx.Rows
	batch  pgx.BatchResults
	closed bool
	err    error
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

func (r *batchRows) Close() {
	if r.closed {
		return
	}
	r.closed = true
	r.Rows.Close()
	r.err = r.batch.Close()
}

// Identity is the pool behind p, so queues on one pool share wake-ups.
func (p *poolDB) Identity() any { return p.pool }

// Listen holds one pool connection with LISTEN until ctx ends or the
// connection fails. A LISTENing connection must not go back to the pool,
// so it is taken out of it.
func (p *poolDB) Listen(ctx context.Context, channel string, fn func(string)) error {
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	pc := conn.Hijack()
	defer pc.Close(context.Background())
	return listenOn(ctx, pc, channel, fn)
}

// directListener LISTENs on a connection of its own, opened for each
// Listen, to a server the pool may not reach directly
// (dbqueue.WithListenDSN: the pool goes through a transaction pooler).
type directListener struct{ cfg *pgx.ConnConfig }

func (d directListener) Listen(ctx context.Context, channel string, fn func(string)) error {
	conn, err := pgx.ConnectConfig(ctx, d.cfg.Copy())
	if err != nil {
		return fmt.Errorf("dbqueue: connect to LISTEN: %w", err)
	}
	defer conn.Close(context.Background())
	return listenOn(ctx, conn, channel, fn)
}

// listenOn LISTENs on conn and calls fn with each notification's payload
// (and once with "" when it starts) until ctx ends or conn fails.
func listenOn(ctx context.Context, conn *pgx.Conn, channel string, fn func(string)) error {
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return err
	}
	fn("") // jobs may have arrived while nobody listened
	for {
		note, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		fn(note.Payload)
	}
}

type pgxTx struct {
	pgxExec
	tx pgx.Tx
}

func (t pgxTx) Commit(ctx context.Context) error   { return t.tx.Commit(ctx) }
func (t pgxTx) Rollback(ctx context.Context) error { return t.tx.Rollback(ctx) }
