// Package failed manages the failed_jobs table: the jobs that ran out of
// tries, timed out or could not be decoded, kept with the error that ended
// them so an operator can read why, fix the cause, and put them back.
//
// It is Laravel's queue:failed, queue:retry, queue:forget, queue:flush and
// queue:prune-failed as a Go API, on the same table, so rows written by a
// PHP worker and by a Go worker are handled alike. Where Laravel's commands
// do one job at a time, a retry here moves its jobs back into jobs in one
// transaction: a crash never leaves a job in both tables or in neither.
package failed

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dbqueue/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// ErrNotFound is wrapped by the errors of Find and Retry when a uuid names
// no failed job: it was retried or forgotten already, or never existed.
var ErrNotFound = errors.New("dbqueue: no failed job with that uuid")

// ErrOtherConnection is wrapped by Retry's error when a failed job was
// recorded by another queue connection (failed_jobs is shared by all of an
// application's connections, as in Laravel). Retrying it here would move it
// into this database's jobs table, away from the workers that serve it.
var ErrOtherConnection = errors.New("dbqueue: failed job belongs to another queue connection")

// Store reads and acts on the failed_jobs table of a queue's database. It
// is safe for concurrent use.
type Store struct {
	db         sqldb.DB
	dialect    sqldb.Dialect
	connection string // failed_jobs.connection of jobs this queue failed
	queue      string // the queue's default queue

	// zoneless caches whether PostgreSQL's failed_at is a timestamp
	// without time zone (Laravel's table) rather than a timestamptz
	// (dbqueue's migration), looked up on first need.
	zoneless struct {
		sync.Mutex
		known, yes bool
	}
}

// New returns a Store on the database of q. It shares q's connection pool,
// so it stays usable until q is closed.
func New(q *dbqueue.Queue) *Store {
	h := sqldb.HandleOf(q)
	return &Store{db: h.DB, dialect: h.Dialect, connection: h.Connection, queue: h.Queue}
}

// Job is a row of failed_jobs.
type Job struct {
	ID   int64
	UUID string
	// Connection is the queue connection that failed the job (Laravel's
	// config/queue.php name, "database" by default).
	Connection string
	Queue      string
	// Payload is the job's envelope as stored. It may be malformed: a row
	// whose payload did not decode is failed rather than left to block its
	// queue.
	Payload []byte
	// Exception is the error text that failed the job.
	Exception string
	// FailedAt is when it failed, by the database's clock; zero if the
	// stored value could not be read as a time. A failed_at column without
	// a time zone (Laravel's PostgreSQL timestamp(0), MySQL timestamp and
	// datetime as the session shows them) holds UTC wall time, as PHP
	// writes it, whatever the session's time zone.
	FailedAt time.Time
}

// Name is the name the job's handler is registered under (see
// dbqueue.Payload.Name), or "" when the payload names none.
func (j Job) Name() string {
	p, err := dbqueue.DecodePayload(j.Payload)
	if err == nil || p.Job != "" {
		return p.Name()
	}
	// A payload with one ill-typed field still says who it was for.
	var names struct {
		Job         string `json:"job"`
		DisplayName string `json:"displayName"`
	}
	_ = json.Unmarshal(j.Payload, &names)
	p = dbqueue.Payload{Job: names.Job, DisplayName: names.DisplayName}
	return p.Name()
}

// Listing bounds.
const (
	DefaultLimit = 50
	MaxLimit     = 1000
)

// Filter selects a page of failed jobs for List.
type Filter struct {
	// Queue keeps only the jobs of this queue; "" keeps every queue.
	Queue string
	// Limit is the page size: DefaultLimit when 0, at most MaxLimit.
	Limit int
	// BeforeID keeps jobs with a smaller id: pass the ID of the last job of
	// a page to get the next one. 0 starts from the newest. Paging by id
	// rather than offset stays fast and skips nothing while failures arrive.
	BeforeID int64
}

// List returns failed jobs newest first (by id, the order they failed in).
func (s *Store) List(ctx context.Context, f Filter) ([]Job, error) {
	switch {
	case f.Limit == 0:
		f.Limit = DefaultLimit
	case f.Limit < 0 || f.Limit > MaxLimit:
		return nil, fmt.Errorf("dbqueue: list failed jobs: Limit %d must be between 1 and %d (page with BeforeID)", f.Limit, MaxLimit)
	}
	query := s.selectJobs() + " WHERE 1 = 1"
	var args []any
	if f.Queue != "" {
		query += " AND queue = ?"
		args = append(args, f.Queue)
	}
	if f.BeforeID > 0 {
		query += " AND id < ?"
		args = append(args, f.BeforeID)
	}
	query += " ORDER BY id DESC LIMIT ?"
	args = append(args, f.Limit)
	jobs, err := scanJobs(s.db.Query(ctx, s.dialect.Rebind(query), args...))
	if err != nil {
		return nil, sqldb.Wrap("list failed jobs", err)
	}
	return jobs, nil
}

// Find returns the failed job with this uuid, or an error wrapping
// ErrNotFound.
func (s *Store) Find(ctx context.Context, uuid string) (Job, error) {
	jobs, err := scanJobs(s.db.Query(ctx, s.dialect.Rebind(s.selectJobs()+" WHERE uuid = ?"), uuid))
	if err != nil {
		return Job{}, sqldb.Wrap("find failed job", err)
	}
	if len(jobs) == 0 {
		return Job{}, fmt.Errorf("%w: %q", ErrNotFound, uuid)
	}
	return jobs[0], nil
}

// Forget deletes the failed job with this uuid without retrying it, and
// reports whether there was one.
func (s *Store) Forget(ctx context.Context, uuid string) (bool, error) {
	n, err := s.delete(ctx, "forget failed job", "uuid = ?", uuid)
	return n > 0, err
}

// Flush deletes the failed jobs that failed more than olderThan ago, by the
// database's clock, or every failed job when olderThan is 0. It returns how
// many went. Whole seconds count, as failed_at keeps no fraction.
func (s *Store) Flush(ctx context.Context, olderThan time.Duration) (int64, error) {
	switch {
	case olderThan < 0:
		return 0, fmt.Errorf("dbqueue: flush failed jobs: negative age %v", olderThan)
	case olderThan == 0:
		return s.delete(ctx, "flush failed jobs", "1 = 1")
	}
	where, err := s.failedBefore(ctx, s.dialect.Now()+" - ?")
	if err != nil {
		return 0, sqldb.Wrap("flush failed jobs", err)
	}
	return s.delete(ctx, "flush failed jobs", where, int64(olderThan/time.Second))
}

// Prune deletes the failed jobs that failed before the given time and
// returns how many went: a retention policy for a cron job.
func (s *Store) Prune(ctx context.Context, before time.Time) (int64, error) {
	// failed_at holds whole seconds: "before 10.5" is "before 11".
	sec := before.Unix()
	if before.Nanosecond() > 0 {
		sec++
	}
	where, err := s.failedBefore(ctx, "?")
	if err != nil {
		return 0, sqldb.Wrap("prune failed jobs", err)
	}
	return s.delete(ctx, "prune failed jobs", where, sec)
}

// failedBefore is the predicate "failed_at is earlier than the Unix time
// expr", reading a failed_at without time zone as UTC (see failedAtEpoch).
// PostgreSQL and MySQL compare the column itself so the failed_at index
// serves it; SQLite keeps times as text whose format depends on the
// writer, so there the column is converted to seconds first.
func (s *Store) failedBefore(ctx context.Context, expr string) (string, error) {
	switch s.dialect {
	case sqldb.Postgres:
		zoneless, err := s.zonelessFailedAt(ctx)
		if err != nil {
			return "", err
		}
		if zoneless {
			// The UTC wall time of the instant, as a timestamp: compared
			// with the column as it is, not through the session's zone.
			return "failed_at < (to_timestamp(" + expr + ") AT TIME ZONE 'UTC')", nil
		}
		return "failed_at < to_timestamp(" + expr + ")", nil
	case sqldb.MySQL:
		// A datetime value: MySQL compares a timestamp column with it in
		// the session's zone, that is as the wall time the session shows,
		// and a datetime column as stored.
		return "failed_at < TIMESTAMPADD(SECOND, " + expr + ", '1970-01-01 00:00:00')", nil
	}
	return s.dialect.Epoch("failed_at") + " < " + expr, nil
}

// zonelessFailedAt reports whether failed_at is a PostgreSQL timestamp
// without time zone, asking once per Store. A missing table is reported as
// not zoneless and not remembered: the statement that follows says it is
// missing.
func (s *Store) zonelessFailedAt(ctx context.Context) (bool, error) {
	z := &s.zoneless
	z.Lock()
	defer z.Unlock()
	if z.known {
		return z.yes, nil
	}
	var yes bool
	err := s.db.QueryRow(ctx, `SELECT atttypid = 'timestamp without time zone'::regtype FROM pg_attribute
WHERE attrelid = to_regclass('failed_jobs') AND attname = 'failed_at' AND NOT attisdropped`).Scan(&yes)
	switch {
	case errors.Is(err, sql.ErrNoRows) || errors.Is(err, pgx.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read the type of failed_jobs.failed_at: %w", err)
	}
	z.known, z.yes = true, yes
	return yes, nil
}

func (s *Store) delete(ctx context.Context, op, where string, args ...any) (int64, error) {
	var res sqldb.Result
	err := sqldb.Retry(ctx, func() (err error) {
		res, err = s.db.Exec(ctx, s.dialect.Rebind("DELETE FROM failed_jobs WHERE "+where), args...)
		return err
	})
	if err != nil {
		return 0, sqldb.Wrap(op, err)
	}
	return res.RowsAffected, nil
}

// selectJobs reads failed_at as Unix seconds (see failedAtEpoch), without
// relying on driver time parsing.
func (s *Store) selectJobs() string {
	return "SELECT id, uuid, connection, queue, payload, exception, " + s.failedAtEpoch() + " FROM failed_jobs"
}

// failedAtEpoch is failed_at in Unix seconds, a value without time zone
// read as UTC wall time, as PHP writes it (Laravel's failed job providers
// insert Date::now(), the app's time zone, UTC by default), whatever the
// session's time zone:
//
//   - PostgreSQL: EXTRACT(EPOCH FROM …) of a timestamp without time zone
//     counts its wall time as UTC, and of a timestamptz (dbqueue's
//     migration) gives the instant itself. A cast to timestamptz would
//     read Laravel's column in the session's TimeZone instead.
//   - MySQL: TIMESTAMPDIFF from the epoch counts the wall time a timestamp
//     column shows in the session, or a datetime column holds, as UTC.
//     UNIX_TIMESTAMP would read a datetime in the session's time_zone,
//     and a timestamp as the instant the session's zone made of PHP's UTC
//     string.
//   - SQLite has no session zone: CURRENT_TIMESTAMP and PHP both write UTC.
func (s *Store) failedAtEpoch() string {
	switch s.dialect {
	case sqldb.Postgres:
		return "CAST(floor(EXTRACT(EPOCH FROM failed_at)) AS bigint)"
	case sqldb.MySQL:
		return "TIMESTAMPDIFF(SECOND, '1970-01-01 00:00:00', failed_at)"
	}
	return s.dialect.Epoch("failed_at")
}

func scanJobs(rows sqldb.Rows, err error) ([]Job, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var jobs []Job
	for rows.Next() {
		var (
			j        Job
			failedAt sql.NullInt64
		)
		if err := rows.Scan(&j.ID, &j.UUID, &j.Connection, &j.Queue, &j.Payload, &j.Exception, &failedAt); err != nil {
			return nil, err
		}
		if failedAt.Valid {
			j.FailedAt = time.Unix(failedAt.Int64, 0)
		}
		jobs = append(jobs, j)
	}
	return jobs, rows.Err()
}
