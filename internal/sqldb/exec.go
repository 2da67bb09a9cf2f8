package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
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

// ReadCommittedSQLDB adapts an owned database/sql pool whose every
// connection already runs in READ COMMITTED, so a transaction asking for
// it needs no SET TRANSACTION of its own (MySQL claims).
func ReadCommittedSQLDB(db *sql.DB) DB {
	return &stdDB{stdExec: stdExec{db}, db: db, owned: true, sessionRC: true}
}

// StdConn is the Conn of a caller's database/sql pool (nil stays nil, for
// dbqueue.New to refuse with a clear error).
func StdConn(db *sql.DB, dialect string) Conn {
	c := Conn{Dialect: dialect}
	if db != nil {
		c.DB = SQLDB(db, false)
	}
	return c
}

// Identity is the pool behind db, so that two adapters of one pool (two
// dbqmysql.New(db) of the same *sql.DB) compare equal: a DB that wraps a
// pool says which with an Identity method; any other DB is its own.
func Identity(db DB) any {
	if i, ok := db.(interface{ Identity() any }); ok {
		return i.Identity()
	}
	return db
}

// Identity is the *sql.DB behind s.
func (s *stdDB) Identity() any { return s.db }

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

// Conn is what a driver package hands dbqueue: a connection and the
// dialect it speaks ("postgres", "mysql" or "sqlite").
type Conn struct {
	DB      DB
	Dialect string
}

// Opener opens the DSNs of one driver package, which registers it from
// init so that dbqueue.Open and the migrations accept its DSNs.
type Opener struct {
	Dialect string
	// Import is the driver package's import path, for errors that say what
	// to import.
	Import string
	// Match reports whether dsn is one of this driver's.
	Match func(dsn string) bool
	// Parse returns the database/sql driver name and DSN for dsn.
	Parse func(dsn string) (driverName, conn string, err error)
	// Open connects to dsn with a pool that Close closes.
	Open func(ctx context.Context, dsn string) (DB, error)
	// Listener, where the database can LISTEN (PostgreSQL on pgx), checks
	// dsn and returns a Listener that opens a connection of its own to it
	// each time it listens (dbqueue.WithListenDSN). Nil elsewhere.
	Listener func(dsn string) (Listener, error)
}

var openers struct {
	sync.RWMutex
	list []Opener
}

// RegisterOpener makes a driver's DSNs known. Every error its Parse, Open
// and Listener return has the DSN's secrets hidden (RedactError): a
// driver's parse errors quote the DSN, or a piece of it.
func RegisterOpener(o Opener) {
	if parse := o.Parse; parse != nil {
		o.Parse = func(dsn string) (string, string, error) {
			driver, conn, err := parse(dsn)
			return driver, conn, RedactError(dsn, err)
		}
	}
	if open := o.Open; open != nil {
		o.Open = func(ctx context.Context, dsn string) (DB, error) {
			db, err := open(ctx, dsn)
			return db, RedactError(dsn, err)
		}
	}
	if listener := o.Listener; listener != nil {
		o.Listener = func(dsn string) (Listener, error) {
			l, err := listener(dsn)
			return l, RedactError(dsn, err)
		}
	}
	openers.Lock()
	defer openers.Unlock()
	openers.list = append(openers.list, o)
}

// OpenerFor finds the registered driver for dsn.
func OpenerFor(dsn string) (Opener, bool) {
	openers.RLock()
	defer openers.RUnlock()
	for _, o := range openers.list {
		if o.Match(dsn) {
			return o, true
		}
	}
	return Opener{}, false
}

// ListenerFor returns the Listener of the registered driver of dialect for
// dsn (dbqueue.WithListenDSN), or an error that says which driver package
// to import. Its errors are for the caller to prefix with the option's name.
func ListenerFor(dialect, dsn string) (Listener, error) {
	openers.RLock()
	defer openers.RUnlock()
	for _, o := range openers.list {
		if o.Dialect == dialect && o.Listener != nil {
			return o.Listener(dsn)
		}
	}
	return nil, fmt.Errorf("no driver that can LISTEN on %s is registered: import github.com/dbqueue/dbqueue/driver/dbqpgx", dialect)
}

// Pipeliner is a DB that can run a statement and then a query in one round
// trip and one transaction (pgx: a batch, which the server runs up to its
// one Sync as a single transaction). PostgreSQL's claims use it to set
// their planner for their own transaction without a round trip more.
type Pipeliner interface {
	QueryAfter(ctx context.Context, first, query string, args ...any) (Rows, error)
}

// Listener is a DB that can hold a connection of its own to LISTEN
// (PostgreSQL on pgx): Listen blocks, calling fn with each notification's
// payload (and once with "" when it starts listening), until ctx ends or
// the connection fails.
type Listener interface {
	Listen(ctx context.Context, channel string, fn func(payload string)) error
}
