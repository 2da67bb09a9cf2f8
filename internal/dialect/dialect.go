// Package dialect is dbqueue's one seam between the queue and the SQL of
// each database: every statement dbqueue runs is written here, in one file
// per database (postgres.go, mysql.go, sqlite.go, and their postgres_*.go,
// mysql_*.go files) over the SQL they share (common.go and the files named
// for a feature). A shared file never asks which database it writes for:
// where the databases differ inside a shared statement, each database's
// constructor says how it writes that part (its spelling), and where a
// whole statement differs, the database's own method replaces the shared
// one. No other package of the module branches on the database or writes
// its own SQL; they call a Dialect.
package dialect

import (
	"context"
	"fmt"
	"regexp"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// Dialect is what dbqueue asks of a database. Methods that take an Execer
// run inside the caller's transaction or on a pool; those that take a DB
// may open transactions of their own. None retries: callers wrap them in
// sqldb.Retry where a retry is safe. The SQL of each feature beside the
// jobs table is an interface of its own, which every dialect implements.
type Dialect interface {
	Uniquer
	TickLocker
	Limits
	Batches
	Lookup
	TxFinisher
	ErrorHistory
	Searcher
	Bounded
	Operator
	ScheduleBook
	FlowControl

	// Name is "postgres", "mysql" or "sqlite".
	Name() string
	// Tables are the tables this dialect was built for.
	Tables() Tables
	// Now is the SQL expression for the database clock in Unix seconds.
	Now() string
	// Rebind rewrites '?' placeholders for the database.
	Rebind(query string) string

	// Claim reserves up to n due or expired rows of queue: each gets
	// reserved_at now, attempts + 1 (never past MaxAttempts) and a new
	// reservation token.
	Claim(ctx context.Context, db sqldb.DB, queue string, retryAfter int64, n int) ([]JobRow, error)
	// ClaimQueues is Claim over queues in one statement: up to n rows,
	// taken queue by queue in the order given, until n are held, each
	// queue's rows as Claim takes them (a database may take the expired
	// reservations of all the queues first). The rows come back in that
	// order, each with its queue. A worker serving thousands of queues
	// holding a few jobs each claims with it (claim_queues.go); it keeps
	// no cursor. A name must be valid UTF-8.
	ClaimQueues(ctx context.Context, db sqldb.DB, queues []string, retryAfter int64, n int) ([]JobRow, error)
	// ReadyQueues returns those of queues (in the order the database
	// lists them) that hold a row Claim would take with retryAfter: one
	// statement of index probes, one per name and arm, never a read of a
	// queue's backlog (ready.go). A worker serving many queues asks it
	// instead of running a claim per empty queue.
	ReadyQueues(ctx context.Context, ex sqldb.Execer, queues []string, retryAfter int64) ([]string, error)
	// DeleteHeld deletes the rows still held by the reservations given,
	// and returns those it deleted; the error history of those whose
	// tokens are Marked goes with them, in the same statement or
	// transaction where the database allows (see history.go).
	DeleteHeld(ctx context.Context, db sqldb.DB, held []Held) ([]Key, error)
	// ReleaseHeld puts held rows back, each after its delay (seconds) and
	// with its new payload when not nil, and returns those it released.
	ReleaseHeld(ctx context.Context, db sqldb.DB, rs []Release) (map[Key]bool, error)
	// GiveBack makes a held row available at once, taking its attempt back
	// and drawing a new token, and reports whether it was held.
	GiveBack(ctx context.Context, db sqldb.DB, h Held) (bool, error)
	// FailMove deletes a held row and writes it to failed_jobs in one
	// transaction, and reports whether it was held.
	FailMove(ctx context.Context, db sqldb.DB, h Held, f Failure) (bool, error)
	// FailedAlready reports whether row id has left jobs and failed_jobs
	// holds f's uuid with its exception and payload: what a committed
	// FailMove of f leaves (the payload names the reservation that wrote
	// it, so another holder's failure with the same text does not match).
	FailedAlready(ctx context.Context, db sqldb.DB, id int64, f Failure) (bool, error)

	// Insert writes new rows and returns their ids in order. With notify,
	// PostgreSQL wakes listeners of the queues of due rows, inside ex.
	Insert(ctx context.Context, ex sqldb.Execer, rows []PushRow, notify bool) ([]int64, error)
	// Sizes counts a queue's pending, delayed and reserved rows, and reads
	// the oldest pending available_at and the database's now.
	Sizes(ctx context.Context, ex sqldb.Execer, queue string) (Sizes, error)
	// SizesByQueue is Sizes of every queue that has rows, in one grouped
	// read of the table, sorted by queue.
	SizesByQueue(ctx context.Context, ex sqldb.Execer) ([]QueueSizes, error)
	// Clear deletes every row of a queue.
	Clear(ctx context.Context, ex sqldb.Execer, queue string) (int64, error)
	// Queues lists the names of the queues that have rows, sorted.
	Queues(ctx context.Context, ex sqldb.Execer) ([]string, error)
	// Payloads lists the payloads of a queue's rows in id order.
	Payloads(ctx context.Context, ex sqldb.Execer, queue string) ([][]byte, error)

	// ListFailed reads failed jobs newest first.
	ListFailed(ctx context.Context, ex sqldb.Execer, f FailedFilter) ([]FailedRow, error)
	// DeleteFailed deletes the failed jobs a filter names.
	DeleteFailed(ctx context.Context, ex sqldb.Execer, f FailedFilter) (int64, error)
	// MaxFailedID is the newest failed job's id (0 when there is none).
	MaxFailedID(ctx context.Context, ex sqldb.Execer) (int64, error)
	// LockFailed reads failed jobs in id order and locks them until tx ends.
	LockFailed(ctx context.Context, tx sqldb.Tx, f FailedFilter) ([]FailedRow, error)
	// RetryFromFailed moves locked failed rows into jobs, due now, and
	// deletes them from failed_jobs, inside tx; PostgreSQL wakes listeners.
	RetryFromFailed(ctx context.Context, tx sqldb.Tx, rows []FailedRow) error
	// FailedTxOptions are the options of a transaction that locks failed
	// rows (MySQL: READ COMMITTED, so it locks no gaps).
	FailedTxOptions() sqldb.TxOptions

	// SetSignal upserts a signal to value, or bumps it when value is nil:
	// sets it to a value it never had (see bumpScale).
	SetSignal(ctx context.Context, ex sqldb.Execer, name string, value *int64) error
	// DeleteSignal removes a signal.
	DeleteSignal(ctx context.Context, ex sqldb.Execer, name string) error
	// Signals reads the values of the named signals that are set.
	Signals(ctx context.Context, ex sqldb.Execer, names []string) (map[string]int64, error)

	// NotifyChannel is the PostgreSQL channel pushes notify ("" elsewhere).
	NotifyChannel() string
	// CheckTables fails with a missing-table error when the tables, or a
	// column a migration adds, are missing.
	CheckTables(ctx context.Context, ex sqldb.Execer) error
	// CheckServer fails when ex is not connected to this database.
	CheckServer(ctx context.Context, ex sqldb.Execer) error
}

// MaxAttempts is the most attempts a row can count: the largest value of
// the attempts column (integer) that migrate up leaves on every database.
const MaxAttempts = 1<<31 - 1

// Held names one reservation: the row, the token its claim drew, and the
// attempts the claim counted (which tells a PHP worker's claim apart).
type Held struct {
	ID, Token int64
	Attempts  int
}

// Key identifies a reservation in the results of the batch finishes.
type Key struct{ ID, Token int64 }

// Key is h's key.
func (h Held) Key() Key { return Key{h.ID, h.Token} }

// Release is one held row to put back.
type Release struct {
	Held
	Delay   int64  // seconds after now
	Payload []byte // nil keeps the stored payload
	// Error, when not nil, is the attempt's error, written to the row's
	// error history if (and only if) the release finds the row held.
	Error *ReleaseError
}

// ReleaseError is the error a release writes to the row's history (the
// attempt is the Held's).
type ReleaseError struct {
	Error  string // at most ErrorHistoryBytes
	Worker string
}

// JobRow is a claimed row of jobs.
type JobRow struct {
	ID                     int64
	Queue                  string
	Payload                []byte
	Attempts               int
	ReservedAt             int64
	Reserved               bool // ReservedAt is not NULL
	AvailableAt, CreatedAt int64
	Token                  int64
	// Limited: the row runs under a concurrency limit (ClaimFlow took it).
	Limited bool
}

// PushRow is one new row of jobs.
type PushRow struct {
	Queue    string
	Payload  []byte
	Absolute bool  // At is a Unix time, not a delay
	At       int64 // delay in seconds, or Unix time
	// Flow and FlowKey are the limit the job runs under and its key
	// there (FlowControl); Flow is empty for a job under no limit.
	Flow, FlowKey string
}

// Due reports whether the row is due at once.
func (r PushRow) Due() bool { return !r.Absolute && r.At <= 0 }

// Failure is what FailMove writes to failed_jobs.
type Failure struct {
	UUID, Connection, Queue string
	Payload                 []byte
	Exception               string
}

// Sizes is one reading of a queue's counts.
type Sizes struct {
	Pending, Delayed, Reserved int64
	OldestPending              *int64 // available_at of the oldest pending row
	Now                        int64
}

// QueueSizes is Sizes of a named queue.
type QueueSizes struct {
	Queue string
	Sizes
}

// FailedRow is a row of failed_jobs.
type FailedRow struct {
	ID                      int64
	UUID, Connection, Queue string
	Payload                 []byte
	Exception               string
	FailedAt                *int64 // Unix seconds, UTC
	// Attempt is the attempt that failed, from the payload's mark (see
	// FailedAttempt); 0 when unknown.
	Attempt int
}

// FailedFilter selects failed jobs. Zero fields select all.
type FailedFilter struct {
	UUIDs      []string
	Queue      string
	Connection string
	AfterID    int64 // id > AfterID
	UpToID     int64 // id <= UpToID, when not 0
	BeforeID   int64 // id < BeforeID, when not 0
	// OlderThan selects failures more than this many seconds old by the
	// database's clock; FailedBefore those before a Unix time.
	OlderThan    int64
	FailedBefore *int64
	Limit        int
}

// Tables names the tables a queue uses: Laravel's jobs and failed_jobs by
// default, with dbqueue's signals table beside them.
type Tables struct {
	// Jobs and Failed are the table names; Schema, when set, the
	// PostgreSQL schema (or MySQL database) that holds them.
	Jobs, Failed, Schema string
}

// DefaultTables are Laravel's names.
var DefaultTables = Tables{Jobs: "jobs", Failed: "failed_jobs"}

var identifier = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// Check validates the names: plain identifiers, the tables' of at most 48
// bytes (room for the index names derived from them within every
// database's limit), the schema's of at most 63 (PostgreSQL's identifier
// limit, as the migrations allow: no name is derived from it).
func (t Tables) Check() error {
	for _, n := range []struct {
		what, name string
		max        int
	}{{"jobs table", t.Jobs, 48}, {"failed jobs table", t.Failed, 48}, {"schema", t.Schema, 63}} {
		if n.name == "" && n.what == "schema" {
			continue
		}
		if !identifier.MatchString(n.name) || len(n.name) > n.max {
			return fmt.Errorf("dbqueue: %s name %q: use lower-case letters, digits and underscores, not starting with a digit, at most %d bytes", n.what, n.name, n.max)
		}
	}
	if t.Jobs == t.Failed {
		return fmt.Errorf("dbqueue: the jobs and failed jobs tables are both named %q: give them different names", t.Jobs)
	}
	return nil
}

func (t Tables) qualify(name string) string {
	if t.Schema == "" {
		return name
	}
	return t.Schema + "." + name
}

// JobsTable, FailedTable and SignalsTable are the names to write in SQL,
// qualified by the schema when one is set.
func (t Tables) JobsTable() string   { return t.qualify(t.Jobs) }
func (t Tables) FailedTable() string { return t.qualify(t.Failed) }
func (t Tables) SignalsTable() string {
	return t.qualify(t.SignalsName())
}

// SignalsName is dbqueue_signals beside Laravel's tables, and
// <jobs>_signals beside tables of other names, so two queues with their
// own tables in one database keep their own signals (as migrations names
// them).
func (t Tables) SignalsName() string {
	if t.Jobs == DefaultTables.Jobs && t.Failed == DefaultTables.Failed {
		return "dbqueue_signals"
	}
	return t.Jobs + "_signals"
}

// ClaimIndex is the MySQL index the claim reads: (queue, available_at).
func (t Tables) ClaimIndex() string { return t.Jobs + "_queue_available_idx" }

// Open returns the dialect of name over tables t for the server ex is
// connected to, after asking the server who it is: a connection that is
// not of that database fails here, with an error that says so.
func Open(ctx context.Context, name string, ex sqldb.Execer, t Tables) (Dialect, error) {
	d, err := open(ctx, name, ex, t)
	if err != nil {
		return nil, err
	}
	return d, probeHistory(ctx, ex, d)
}

func open(ctx context.Context, name string, ex sqldb.Execer, t Tables) (database, error) {
	d, err := build(name, t, MySQLServer{})
	if err != nil {
		return nil, err
	}
	if err := d.CheckServer(ctx, ex); err != nil {
		return nil, err
	}
	return d.forServer(ctx, ex)
}

// MySQLServer is what the MySQL dialect needs to know of its server.
type MySQLServer struct {
	// MariaDB has DELETE … RETURNING and INSERT … RETURNING.
	MariaDB bool
	// IDStep is auto_increment_increment: how far apart the ids of a
	// multi-row INSERT are (1 when 0).
	IDStep int64
	// ConsecutiveIDs: innodb_autoinc_lock_mode is 0 or 1, so a multi-row
	// INSERT draws its ids IDStep apart from the first one it reports,
	// and MariaDB needs no RETURNING to know them.
	ConsecutiveIDs bool
}

// For returns the dialect of name ("postgres", "mysql", "sqlite") over
// tables t; srv matters to MySQL only.
func For(name string, t Tables, srv MySQLServer) (Dialect, error) {
	d, err := build(name, t, srv)
	if err != nil {
		return nil, err
	}
	return d, nil
}

// database is a dialect as this package builds it: a Dialect, and what
// Open reads of its server before a queue uses it. Each database's file
// checks that its dialect is one.
type database interface {
	Dialect
	// forServer returns the dialect for the server ex is connected to,
	// after reading what this database's statements depend on.
	forServer(ctx context.Context, ex sqldb.Execer) (database, error)
	// base is the common the dialect is built on.
	base() *common
}

// databases builds the dialect of each name For takes.
var databases = map[string]func(t Tables, srv MySQLServer) database{
	"postgres": func(t Tables, _ MySQLServer) database { return newPostgres(t, false) },
	"mysql":    func(t Tables, srv MySQLServer) database { return newMySQL(t, srv) },
	"sqlite":   func(t Tables, _ MySQLServer) database { return newSQLite(t) },
}

func build(name string, t Tables, srv MySQLServer) (database, error) {
	if err := t.Check(); err != nil {
		return nil, err
	}
	if newDialect, ok := databases[name]; ok {
		return newDialect(t, srv), nil
	}
	return nil, fmt.Errorf("dbqueue: unknown dialect %q: use postgres, mysql or sqlite", name)
}

// PostgresHeldText is the SQL of PostgreSQL's batched statements that end
// held rows (delete with one reservation or many, release), for a test
// that checks their generic plans.
func PostgresHeldText() []string {
	p := newPostgres(DefaultTables, false)
	return []string{p.deleteOne, p.deleteA, p.releaseA}
}

// PostgresClaims are PostgreSQL's full claim (expired reservations, then
// ready rows from the head) and its claim from the cursor, for tests that
// EXPLAIN them under PostgresClaimPlanner.
func PostgresClaims() (full, fromCursor string) {
	p := newPostgres(DefaultTables, false)
	return p.claim, p.claimFrom
}

// ClaimText is the SQL of d's claim, for tests that EXPLAIN its parts.
func ClaimText(d Dialect) string {
	switch d := d.(type) {
	case *postgres:
		return d.claim + "\n" + d.claimFrom
	case *sqlite:
		return d.claim
	case *mysql:
		return d.fromCursor + "\n" + fmt.Sprintf(d.fromStart, "")
	}
	return ""
}
