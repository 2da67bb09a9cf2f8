package dbqueue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dbqueue/dbqueue/internal/core"
	"github.com/dbqueue/dbqueue/internal/dialect"
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

// handle is embedded so that this module's other packages (worker, failed,
// the drivers) reach the queue's connection through internal/core, and
// nothing else can.
type handle = core.Handle[workerSide]

// workerSide is core.WorkerSide over this package's types: the worker side a
// Queue carries (workerOps), as the packages that use it name it.
type workerSide = core.WorkerSide[*Job, Releasing, *Batch, NewJob, Search, SearchResult[struct{}], ScheduleInfo]

// Queue is a handle on the jobs and failed_jobs tables of one database. It
// is safe for concurrent use; make one per database and share it.
type Queue struct {
	handle
	db         sqldb.DB
	dialect    Dialect
	sql        dialect.Dialect
	tables     Tables
	connection string
	queue      string
	retryAfter int64 // seconds
	flows      flows // the concurrency limits it knows (concurrency.go)
	wake       *notifier
	// listenDSN and noListen: WithListenDSN, WithoutListen.
	listenDSN string
	noListen  bool
	// pushMiddleware run around every push (WithPushMiddleware).
	pushMiddleware []PushMiddleware
	// redact rewrites payloads read for showing (WithRedactor).
	redact Redactor
}

// Tables names the tables a queue uses. The zero value, and any empty
// field, means Laravel's: jobs and failed_jobs, in the connection's own
// schema. Give other names to run dbqueue beside an application that
// already has a jobs table, or two queues in one database; migrate them
// with migrations.WithTables.
type Tables struct {
	// Jobs and Failed are the table names: letters, digits and
	// underscores, at most 48 bytes.
	Jobs, Failed string
	// Schema is the PostgreSQL schema (or MySQL database) that holds them;
	// empty for the connection's own.
	Schema string
}

func (t Tables) internal() dialect.Tables {
	out := dialect.Tables{Jobs: t.Jobs, Failed: t.Failed, Schema: t.Schema}
	if out.Jobs == "" {
		out.Jobs = dialect.DefaultTables.Jobs
	}
	if out.Failed == "" {
		out.Failed = dialect.DefaultTables.Failed
	}
	return out
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

// WithTables sets the table names (Laravel's jobs and failed_jobs by
// default); see Tables.
func WithTables(t Tables) Option {
	return func(q *Queue) error {
		if err := t.internal().Check(); err != nil {
			return fmt.Errorf("WithTables: %w", err)
		}
		q.tables = t
		return nil
	}
}

// WithListenDSN makes the queue LISTEN for wake-ups on a connection of its
// own to dsn, a PostgreSQL DSN that reaches the server directly, while every
// other statement goes through the queue's pool. Use it when that pool goes
// through PgBouncer in transaction pooling mode (or any transaction
// pooler): a LISTEN sent through it lands on whichever server connection
// the pooler lends for that one statement, so notifications never come
// back and workers silently fall back to polling. The NOTIFY each push
// sends inside its own transaction passes through a pooler unharmed. The
// queue holds one such connection per Queue, only while a worker waits for
// jobs, and reconnects with backoff when it drops (workers poll meanwhile).
// It also gives wake-ups to a queue on a database/sql pool (dbqpgx.NewSQL),
// which otherwise polls. PostgreSQL only; the program must import
// driver/dbqpgx.
func WithListenDSN(dsn string) Option {
	return func(q *Queue) error {
		if dsn == "" {
			return errors.New("dbqueue: WithListenDSN: empty DSN: name a PostgreSQL server directly, not through a transaction pooler, or use WithoutListen")
		}
		q.listenDSN = dsn
		return nil
	}
}

// WithoutListen stops the queue from LISTENing: workers find jobs by
// polling (10ms after work, backing off to worker.Options.Sleep when idle)
// and wake at once only for jobs pushed in this process through a Queue on
// the same database that does not LISTEN either. Use it
// when the pool goes through a transaction pooler such as PgBouncer and no
// direct connection is allowed; a LISTEN through the pooler would only
// look like it works. Pushes still NOTIFY, for listeners elsewhere.
func WithoutListen() Option {
	return func(q *Queue) error {
		q.noListen = true
		return nil
	}
}

// Driver is the database client a Queue runs on. Get one from a driver
// package: dbqpgx.New(pool) for a pgx pool, dbqmysql.New(db) or
// dbqsqlite.New(db) for a *sql.DB. Its method is for dbqueue's own use.
type Driver interface {
	Conn() sqldb.Conn
}

// Open connects to the database a DSN names (see ParseDSN) through the
// driver package the program imports for it, and returns a queue that owns
// the connection: Close closes it. It fails if the tables are missing,
// saying to run `migrate up`.
func Open(ctx context.Context, dsn string, opts ...Option) (*Queue, error) {
	o, err := opener(dsn)
	if err != nil {
		return nil, err
	}
	db, err := o.Open(ctx, dsn)
	if err != nil {
		return nil, err
	}
	q, err := newQueue(ctx, sqldb.Conn{DB: db, Dialect: o.Dialect}, strings.TrimSpace(dsn), opts)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return q, nil
}

// New returns a queue on a connection the caller already has, handed over
// by a driver package (dbqpgx.New(pool), dbqmysql.New(db),
// dbqsqlite.New(db)). Close leaves that connection open. The connection
// must be of the driver's database: one that is not fails here.
func New(ctx context.Context, drv Driver, opts ...Option) (*Queue, error) {
	if drv == nil {
		return nil, errors.New("dbqueue: New: nil driver: pass dbqpgx.New(pool), dbqmysql.New(db) or dbqsqlite.New(db)")
	}
	conn := drv.Conn()
	if conn.DB == nil {
		return nil, fmt.Errorf("dbqueue: New: the %s driver was given a nil pool", conn.Dialect)
	}
	return newQueue(ctx, conn, "", opts)
}

// newQueue opens a queue on conn; dsn is what Open was given ("" for New),
// which says which other queues of the process share its database.
func newQueue(ctx context.Context, conn sqldb.Conn, dsn string, opts []Option) (*Queue, error) {
	q := &Queue{
		db:         conn.DB,
		dialect:    Dialect(conn.Dialect),
		connection: DefaultConnection,
		queue:      DefaultQueue,
		retryAfter: int64(DefaultRetryAfter / time.Second),
	}
	for _, opt := range opts {
		if err := opt(q); err != nil {
			return nil, err
		}
	}
	d, err := dialect.Open(ctx, conn.Dialect, q.db, q.tables.internal())
	if err != nil {
		return nil, err
	}
	q.sql = d
	listener, err := q.listener()
	if err != nil {
		return nil, err
	}
	q.wake = newNotifier(listener, d.NotifyChannel())
	if err := d.CheckTables(ctx, q.db); err != nil {
		return nil, sqldb.Wrap("check tables", err)
	}
	if key, ok := keyFor(conn, dsn, q.tables.internal()); ok {
		q.wake.join(key)
	}
	q.handle = core.NewHandle(&core.Queue{
		DB: q.db, Dialect: d, Connection: q.connection, DefaultQueue: q.queue,
		RetryAfter: q.retryAfter, Redact: q.Redact,
	}, workerSide(workerOps{q}))
	return q, nil
}

// listener returns what the queue LISTENs with: the direct connection of
// WithListenDSN, none with WithoutListen, or else the pool itself where it
// can (pgx).
func (q *Queue) listener() (sqldb.Listener, error) {
	switch {
	case q.noListen && q.listenDSN != "":
		return nil, errors.New("dbqueue: WithListenDSN and WithoutListen together: choose one")
	case q.noListen:
		return nil, nil
	case q.listenDSN != "":
		if q.dialect != Postgres {
			return nil, fmt.Errorf("dbqueue: WithListenDSN on a %s queue: only PostgreSQL has LISTEN/NOTIFY", q.dialect)
		}
		l, err := sqldb.ListenerFor(string(q.dialect), q.listenDSN)
		if err != nil {
			return nil, fmt.Errorf("dbqueue: WithListenDSN: %w", err)
		}
		return l, nil
	}
	l, _ := q.db.(sqldb.Listener)
	return l, nil
}

// Close closes the connection if the queue opened it (Open); a pool handed
// over through New stays open.
func (q *Queue) Close() error {
	q.wake.close()
	return q.db.Close()
}

// Dialect reports the queue's SQL dialect.
func (q *Queue) Dialect() Dialect { return q.dialect }

// Tables reports the queue's table names, defaults filled in.
func (q *Queue) Tables() Tables {
	t := q.tables.internal()
	return Tables{Jobs: t.Jobs, Failed: t.Failed, Schema: t.Schema}
}

// ConnectionName is the name stored in failed_jobs.connection.
func (q *Queue) ConnectionName() string { return q.connection }

// DefaultQueue is the queue used when a caller names none.
func (q *Queue) DefaultQueue() string { return q.queue }

// RetryAfter is how long a reservation lasts before the job may be taken
// again.
func (q *Queue) RetryAfter() time.Duration { return time.Duration(q.retryAfter) * time.Second }
