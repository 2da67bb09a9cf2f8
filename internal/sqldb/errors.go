package sqldb

import (
	"database/sql"
	"database/sql/driver"
	"errors"
	"strings"
	"sync"
)

// ErrNoTables is wrapped by errors that come from dbqueue's tables missing:
// jobs and failed_jobs, or a table or column a later migration adds (the
// metrics, workers, history and error-history tables). The error's text
// carries the database's own message, which names the table.
var ErrNoTables = errors.New("dbqueue: a table or column dbqueue needs (jobs, failed_jobs, or one a later migration adds) is missing: the schema is " + MigrateAdvice)

// MigrateAdvice is ErrNoTables' advice to a Go program, kept whole in one
// constant so that a command can swap it for its own (cmd/dbqueue says to
// run `dbqueue migrate up` with its flags).
const MigrateAdvice = "older than this dbqueue: run `go run github.com/dbqueue/dbqueue/cmd/migrate@latest up -dsn <your DSN>` (or `migrate up` if installed), or call migrations.Up"

// Class is what an error means to dbqueue.
type Class int

// The classes of errors.
const (
	// Other errors reach the caller.
	Other Class = iota
	// Retryable errors are transient conflicts the same work can be
	// retried after: deadlocks, serialization failures, lock waits that
	// timed out, SQLite's busy and locked states. They also include the
	// failures of a database that is down or failing over, where the work
	// certainly did not happen: no connection could be opened, the server
	// is starting up or shutting down (57P03), or the connection reached a
	// standby that refused the write (25006). Retrying these is safe even
	// for a push. A connection lost after a statement was sent is not
	// here: whether it committed is unknown, so retrying a push could add
	// the job twice.
	Retryable
	// Missing errors say a table or column is missing: the cure is to
	// migrate.
	Missing
	// Refused errors say the database refused the data a statement
	// carries, not the statement's timing: a text it cannot store (bytes
	// that are not UTF-8, a NUL, a character its column's character set
	// lacks), a value too long for its column, a statement or value over
	// the server's packet limit (MySQL's max_allowed_packet). The same
	// write meets the same refusal every time, so it is never retried as
	// is; a caller that can write something smaller or plainer does that
	// instead (a failure falls back to an ASCII text, then to a stub
	// payload: see dbqueue.FailureTextBytes).
	Refused
	// Closed errors say the handle itself is closed: the application
	// closed the pool or the queue (a pgx pool's "closed pool",
	// database/sql's "sql: database is closed" and sql.ErrConnDone). No
	// retry can succeed, so work stops at once instead of backing off.
	Closed
)

var classifiers struct {
	sync.RWMutex
	list []func(error) Class
}

// RegisterClassifier adds a driver's reading of its own errors: it returns
// Other for errors it does not know. The driver packages call it from init,
// as database/sql drivers register themselves.
func RegisterClassifier(fn func(error) Class) {
	classifiers.Lock()
	defer classifiers.Unlock()
	classifiers.list = append(classifiers.list, fn)
}

// Classify tells what err means, asking the registered drivers, then the
// interfaces that need no driver: PostgreSQL's SQLSTATE (pgconn.PgError
// has SQLState()) and SQLite's result codes (Code() int).
func Classify(err error) Class {
	if err == nil {
		return Other
	}
	classifiers.RLock()
	list := classifiers.list
	classifiers.RUnlock()
	for _, fn := range list {
		if c := fn(err); c != Other {
			return c
		}
	}
	var state interface{ SQLState() string }
	if errors.As(err, &state) {
		switch state.SQLState() {
		case "40001", "40P01", "55P03": // serialization_failure, deadlock_detected, lock_not_available
			return Retryable
		case "57P03", "25006": // cannot_connect_now, read_only_sql_transaction (a standby, before promotion)
			return Retryable
		case "42P01", "42703": // undefined_table, undefined_column
			return Missing
		}
		switch state.SQLState()[:min(2, len(state.SQLState()))] {
		case "22", "54": // data_exception (22021 bad bytes, 22P05 untranslatable, 22001 too long), program_limit_exceeded
			return Refused
		}
		return Other
	}
	if errors.Is(err, sql.ErrConnDone) {
		return Closed
	}
	// database/sql returns driver.ErrBadConn once its own retries on fresh
	// connections are spent; a driver reports it only before the
	// statement was sent (pgx's stdlib, when pgconn.SafeToRetry).
	if errors.Is(err, driver.ErrBadConn) {
		return Retryable
	}
	var coded interface{ Code() int }
	if errors.As(err, &coded) {
		switch coded.Code() & 0xff { // SQLite primary result code
		case 5, 6: // SQLITE_BUSY, SQLITE_LOCKED
			return Retryable
		case 18: // SQLITE_TOOBIG: a text or blob over SQLITE_MAX_LENGTH
			return Refused
		}
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "database is locked") || strings.Contains(msg, "SQLITE_BUSY"):
		return Retryable
	case strings.Contains(msg, "no such table") || strings.Contains(msg, "no such column"):
		return Missing
	case strings.Contains(msg, "sql: database is closed"): // database/sql's unexported errDBClosed
		return Closed
	}
	return Other
}

// IsRetryable reports whether err is a transient conflict.
func IsRetryable(err error) bool { return Classify(err) == Retryable }

// IsRefused reports whether err says the database refused the data a
// write carried (see Refused): writing the same again cannot help.
func IsRefused(err error) bool { return Classify(err) == Refused }

// IsClosed reports whether err says the pool or connection it came from
// is closed, so retrying it cannot succeed.
func IsClosed(err error) bool { return Classify(err) == Closed }

// MissingTable reports whether err says a table, or a column a migration
// adds, does not exist: either way the cure is to migrate.
func MissingTable(err error) bool { return Classify(err) == Missing }

// Wrap turns a missing-table error into one that says to migrate, and adds
// context to the rest.
func Wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if MissingTable(err) {
		return &opError{op: op, err: ErrNoTables, detail: err.Error(), cause: err}
	}
	if LostPreparedStatement(err) {
		return &opError{op: op, err: err, detail: PoolerHint}
	}
	return &opError{op: op, err: err}
}

// opError is an error of dbqueue's operation op. Its text carries the
// "dbqueue: " prefix once, however deep the errors it wraps nest their
// own ("dbqueue: check tables: the jobs … are missing", not "dbqueue:
// check tables: dbqueue: the jobs …"), while errors.Is and errors.As still
// see every error in the chain.
type opError struct {
	op     string
	err    error
	detail string
	cause  error // a second error in the chain, for errors.Is/As
}

func (e *opError) Error() string {
	s := "dbqueue: " + e.op + ": " + strings.TrimPrefix(e.err.Error(), "dbqueue: ")
	if e.detail != "" {
		s += " (" + e.detail + ")"
	}
	return s
}

func (e *opError) Unwrap() []error {
	if e.cause != nil {
		return []error{e.err, e.cause}
	}
	return []error{e.err}
}

// PoolerHint says what to do when pgx's statement cache meets a
// transaction pooler.
const PoolerHint = "is the pool behind PgBouncer in transaction pooling mode? Add default_query_exec_mode=exec to its DSN, or set pgx.ConnConfig.DefaultQueryExecMode; see PgBouncer in docs/scaling.md"

// LostPreparedStatement reports whether err is PostgreSQL saying a prepared
// statement does not exist (26000) or already exists (42P05). dbqueue
// prepares no statement by name itself, so these come from pgx's statement
// cache (its default exec mode) on a connection that a transaction pooler
// such as PgBouncer swapped for another server connection under it.
func LostPreparedStatement(err error) bool {
	var state interface{ SQLState() string }
	if !errors.As(err, &state) {
		return false
	}
	switch state.SQLState() {
	case "26000", "42P05": // invalid_sql_statement_name, duplicate_prepared_statement
		return true
	}
	return false
}
