package sqldb

import (
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrNoTables is wrapped by errors that come from dbqueue's tables missing.
var ErrNoTables = errors.New("dbqueue: the jobs and failed_jobs tables are missing or older than this dbqueue: run `go run ./cmd/migrate up -dsn <your DSN>` or call migrations.Up")

// MissingTable reports whether err says a table, or a column a migration
// adds, does not exist: either way the cure is to migrate.
func MissingTable(err error) bool {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return pg.Code == "42P01" || pg.Code == "42703" // undefined_table, undefined_column
	}
	var my *mysql.MySQLError
	if errors.As(err, &my) {
		return my.Number == 1146 || my.Number == 1054 // ER_NO_SUCH_TABLE, ER_BAD_FIELD_ERROR
	}
	msg := err.Error()
	return strings.Contains(msg, "no such table") || strings.Contains(msg, "no such column")
}

// Retryable reports whether err is a transient conflict that the same work
// can be retried after: deadlocks, serialization failures, lock waits that
// timed out, and SQLite's busy and locked states.
func Retryable(err error) bool {
	if err == nil {
		return false
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		switch pg.Code {
		case "40001", "40P01", "55P03": // serialization_failure, deadlock_detected, lock_not_available
			return true
		}
		return false
	}
	var my *mysql.MySQLError
	if errors.As(err, &my) {
		switch my.Number {
		case 1213, 1205: // ER_LOCK_DEADLOCK, ER_LOCK_WAIT_TIMEOUT
			return true
		}
		return false
	}
	var coded interface{ Code() int }
	if errors.As(err, &coded) {
		switch coded.Code() & 0xff { // SQLite primary result code
		case 5, 6: // SQLITE_BUSY, SQLITE_LOCKED
			return true
		}
	}
	msg := err.Error()
	return strings.Contains(msg, "database is locked") || strings.Contains(msg, "SQLITE_BUSY")
}

// Wrap turns a missing-table error into one that says to migrate, and adds
// context to the rest.
func Wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if MissingTable(err) {
		return fmt.Errorf("dbqueue: %s: %w (%v)", op, ErrNoTables, err)
	}
	return fmt.Errorf("dbqueue: %s: %w", op, err)
}
