package dbqueue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "modernc.org/sqlite" // the embedded default needs no cgo and no server

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// Defaults, as in Laravel's config/queue.php database connection.
const (
	DefaultConnection = "database"
	DefaultQueue      = "default"
	DefaultRetryAfter = 90 * time.Second
	// MaxRetryAfter bounds WithRetryAfter: a year is longer than any job
	// should hold a reservation, and far from the limits of time.Duration
	// and of the database's Unix-second arithmetic.
	MaxRetryAfter = 365 * 24 * time.Hour
)

// Queue is a handle on the jobs and failed_jobs tables of one database. It
// is safe for concurrent use; make one per database and share it.
type Queue struct {
	db         sqldb.DB
	dialect    Dialect
	connection string
	queue      string
	retryAfter int64 // seconds
	mariaDB    bool
	stmts      statements
	wake       *notifier
}

// Option configures a Queue.
type Option func(*Queue) error

// WithConnectionName sets the name stored in failed_jobs.connection, the
// name of the connection in Laravel's config/queue.php ("database").
func WithConnectionName(name string) Option {
	return func(q *Queue) error {
		if name == "" {
			return errors.New("dbqueue: WithConnectionName: empty name")
		}
		q.connection = name
		return nil
	}
}

// WithDefaultQueue sets the queue jobs go to and are reserved from when the
// caller names none ("default").
func WithDefaultQueue(name string) Option {
	return func(q *Queue) error {
		if err := checkQueueName(name); err != nil {
			return fmt.Errorf("WithDefaultQueue: %w", err)
		}
		q.queue = name
		return nil
	}
}

// WithRetryAfter sets how long a reservation lasts before another worker
// may take the job over (90s, Laravel's retry_after). Keep it several
// seconds longer than the longest job timeout, or a slow job runs twice.
// Laravel counts it in whole seconds, and so does dbqueue.
func WithRetryAfter(d time.Duration) Option {
	return func(q *Queue) error {
		if d < time.Second {
			return fmt.Errorf("dbqueue: WithRetryAfter(%v): retry_after must be at least 1s (and longer than your longest job timeout)", d)
		}
		if d > MaxRetryAfter {
			return fmt.Errorf("dbqueue: WithRetryAfter(%v): retry_after may be at most %v; a reservation that never expires would keep a dead worker's jobs forever", d, MaxRetryAfter)
		}
		q.retryAfter = wholeSeconds(d)
		return nil
	}
}

// Open connects to the database a DSN names (see ParseDSN) and returns a
// queue that owns the connection: Close closes it. It fails if the tables
// are missing, saying to run `migrate up`.
func Open(ctx context.Context, dsn string, opts ...Option) (*Queue, error) {
	parsed, err := ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	var db sqldb.DB
	if parsed.Dialect == Postgres {
		pool, err := pgxpool.New(ctx, parsed.Conn)
		if err != nil {
			return nil, fmt.Errorf("dbqueue: open %s: %w", redact(dsn), err)
		}
		db = sqldb.PgxPool(pool, true)
	} else if parsed.Dialect == MySQL {
		// The queue's own pool runs every session in READ COMMITTED, the
		// isolation its claims need, so they skip a SET TRANSACTION each.
		connector, err := (&mysql.MySQLDriver{}).OpenConnector(parsed.Conn)
		if err != nil {
			return nil, fmt.Errorf("dbqueue: open %s: %w", redact(dsn), err)
		}
		db = sqldb.ReadCommittedSessions(connector)
	} else {
		sdb, err := sql.Open(parsed.Driver, parsed.Conn)
		if err != nil {
			return nil, fmt.Errorf("dbqueue: open %s: %w", redact(dsn), err)
		}
		if strings.Contains(parsed.Conn, ":memory:") {
			sdb.SetMaxOpenConns(1) // each connection would be its own database
		}
		db = sqldb.SQLDB(sdb, true)
	}
	q, err := newQueue(ctx, db, parsed.Dialect, opts)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return q, nil
}

// NewPgx returns a queue on a pgx pool the caller already has. Close does
// not close the pool.
func NewPgx(ctx context.Context, pool *pgxpool.Pool, opts ...Option) (*Queue, error) {
	if pool == nil {
		return nil, errors.New("dbqueue: NewPgx: nil pool")
	}
	return newQueue(ctx, sqldb.PgxPool(pool, false), Postgres, opts)
}

// NewSQL returns a queue on a database/sql pool the caller already has,
// opened with a driver for dialect (pgx's stdlib, go-sql-driver/mysql or
// modernc.org/sqlite). Close does not close the pool.
func NewSQL(ctx context.Context, db *sql.DB, dialect Dialect, opts ...Option) (*Queue, error) {
	if db == nil {
		return nil, errors.New("dbqueue: NewSQL: nil *sql.DB")
	}
	if !dialect.Valid() {
		return nil, fmt.Errorf("dbqueue: NewSQL: unknown dialect %q: use dbqueue.Postgres, dbqueue.MySQL or dbqueue.SQLite", dialect)
	}
	return newQueue(ctx, sqldb.SQLDB(db, false), dialect, opts)
}

func newQueue(ctx context.Context, db sqldb.DB, dialect Dialect, opts []Option) (*Queue, error) {
	q := &Queue{
		db:         db,
		dialect:    dialect,
		connection: DefaultConnection,
		queue:      DefaultQueue,
		retryAfter: int64(DefaultRetryAfter / time.Second),
	}
	for _, opt := range opts {
		if err := opt(q); err != nil {
			return nil, err
		}
	}
	if dialect == MySQL {
		var version string
		if err := db.QueryRow(ctx, "SELECT VERSION()").Scan(&version); err != nil {
			return nil, fmt.Errorf("dbqueue: connect: %w", err)
		}
		q.mariaDB = strings.Contains(strings.ToLower(version), "mariadb")
	}
	q.stmts = newStatements(dialect, q.mariaDB)
	if dialect == MySQL && !q.mariaDB {
		// MySQL 8 reports only the first id of a multi-row INSERT; the rest
		// follow auto_increment_increment apart (Galera and Group
		// Replication multi-primary set it above 1).
		if err := db.QueryRow(ctx, "SELECT @@auto_increment_increment").Scan(&q.stmts.idStep); err != nil {
			return nil, fmt.Errorf("dbqueue: connect: %w", err)
		}
	}
	q.wake = newNotifier(db)
	if err := q.checkTables(ctx); err != nil {
		return nil, err
	}
	return q, nil
}

// checkTables fails early, and says what to do, when the tables are missing.
func (q *Queue) checkTables(ctx context.Context) error {
	for _, query := range []string{"SELECT id, reservation_token FROM jobs WHERE 1 = 0", "SELECT id FROM failed_jobs WHERE 1 = 0"} {
		rows, err := q.db.Query(ctx, query)
		if err != nil {
			return sqldb.Wrap("check tables", err)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return sqldb.Wrap("check tables", err)
		}
	}
	return nil
}

// Close closes the connection if the queue opened it (Open); a pool passed
// to NewPgx or NewSQL stays open.
func (q *Queue) Close() error {
	q.wake.close()
	return q.db.Close()
}

// Dialect reports the queue's SQL dialect.
func (q *Queue) Dialect() Dialect { return q.dialect }

// ConnectionName is the name stored in failed_jobs.connection.
func (q *Queue) ConnectionName() string { return q.connection }

// DefaultQueue is the queue used when a caller names none.
func (q *Queue) DefaultQueue() string { return q.queue }

// RetryAfter is how long a reservation lasts before the job may be taken
// again.
func (q *Queue) RetryAfter() time.Duration { return time.Duration(q.retryAfter) * time.Second }

func init() {
	sqldb.HandleOf = func(v any) sqldb.Handle {
		q := v.(*Queue)
		return sqldb.Handle{DB: q.db, Dialect: q.dialect, Connection: q.connection, Queue: q.queue, RetryAfter: q.retryAfter}
	}
}
