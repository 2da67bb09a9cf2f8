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
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/core"
	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/internal/queueside"
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
	sql        dialect.Dialect
	connection string // failed_jobs.connection of jobs this queue failed
	queue      string // the queue's default queue
	// redact is the queue's Redactor (dbqueue.WithRedactor), for payloads
	// read for showing.
	redact func(name string, payload []byte) []byte
	search searcher // package dbqueue's worker side
}

// New returns a Store on the database (and failed jobs table) of q. It
// shares q's connection pool, so it stays usable until q is closed.
func New(q *dbqueue.Queue) (*Store, error) {
	if q == nil {
		return nil, errors.New("dbqueue: failed.New: nil queue: open one with dbqueue.Open or dbqueue.New first")
	}
	c := core.Of(q)
	return &Store{db: c.DB, sql: c.Dialect, connection: c.Connection, queue: c.DefaultQueue, redact: c.Redact, search: queueside.Of(q)}, nil
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
	// stored value could not be read as a time.
	FailedAt time.Time
	// Errors are the errors of the attempts before the one that failed
	// it, oldest first, as the job's error history kept them (see
	// dbqueue.ErrorHistoryKeep), the exceptions of earlier failures it was
	// retried from among them: Find reads them, List and Search leave them
	// nil. A job Laravel's worker failed has none.
	Errors []dbqueue.AttemptError
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
	rows, err := s.sql.ListFailed(ctx, s.db, dialect.FailedFilter{Queue: f.Queue, BeforeID: f.BeforeID, Limit: f.Limit})
	if err != nil {
		return nil, sqldb.Wrap("list failed jobs", err)
	}
	return s.jobsOf(rows), nil
}

// Find returns the failed job with this uuid, or an error wrapping
// ErrNotFound.
func (s *Store) Find(ctx context.Context, uuid string) (Job, error) {
	rows, err := s.sql.ListFailed(ctx, s.db, dialect.FailedFilter{UUIDs: []string{uuid}, Limit: 1})
	if err != nil {
		return Job{}, sqldb.Wrap("find failed job", err)
	}
	if len(rows) == 0 {
		return Job{}, fmt.Errorf("%w: %q", ErrNotFound, uuid)
	}
	job := s.jobsOf(rows)[0]
	hist, err := s.sql.FailedErrors(ctx, s.db, job.UUID)
	if err != nil {
		return Job{}, sqldb.Wrap("find failed job: error history", err)
	}
	for _, h := range hist {
		job.Errors = append(job.Errors, dbqueue.AttemptError{Attempt: h.Attempt, Error: h.Error, Worker: h.Worker, At: time.Unix(h.At, 0)})
	}
	return job, nil
}

// Forget deletes the failed job with this uuid without retrying it, and
// reports whether there was one.
func (s *Store) Forget(ctx context.Context, uuid string) (bool, error) {
	n, err := s.delete(ctx, "forget failed job", dialect.FailedFilter{UUIDs: []string{uuid}})
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
		return s.delete(ctx, "flush failed jobs", dialect.FailedFilter{})
	}
	return s.delete(ctx, "flush failed jobs", dialect.FailedFilter{OlderThan: int64(olderThan / time.Second)})
}

// Prune deletes the failed jobs that failed before the given time and
// returns how many went: a retention policy for a cron job.
func (s *Store) Prune(ctx context.Context, before time.Time) (int64, error) {
	// failed_at holds whole seconds: "before 10.5" is "before 11".
	sec := before.Unix()
	if before.Nanosecond() > 0 {
		sec++
	}
	return s.delete(ctx, "prune failed jobs", dialect.FailedFilter{FailedBefore: &sec})
}

func (s *Store) delete(ctx context.Context, op string, f dialect.FailedFilter) (int64, error) {
	var n int64
	err := sqldb.Retry(ctx, func() (err error) {
		n, err = s.sql.DeleteFailed(ctx, s.db, f)
		return err
	})
	if err != nil {
		return 0, sqldb.Wrap(op, err)
	}
	return n, nil
}

// jobsOf makes Jobs of rows, their payloads passed through the queue's
// Redactor.
func (s *Store) jobsOf(rows []dialect.FailedRow) []Job {
	jobs := make([]Job, len(rows))
	for i, r := range rows {
		jobs[i] = Job{ID: r.ID, UUID: r.UUID, Connection: r.Connection, Queue: r.Queue, Payload: r.Payload, Exception: r.Exception}
		if s.redact != nil {
			jobs[i].Payload = s.redact(jobs[i].Name(), r.Payload)
		}
		if r.FailedAt != nil {
			jobs[i].FailedAt = time.Unix(*r.FailedAt, 0).UTC()
		}
	}
	return jobs
}

// searcher is the part of package dbqueue's worker side Search uses.
type searcher interface {
	SearchFailed(ctx context.Context, s dbqueue.Search) ([]dialect.FailedRow, dbqueue.SearchResult[struct{}], error)
}

// Search finds failed jobs by id, uuid (failed_jobs' own column), name,
// queue and text (in the payload, redacted as List shows it, or in the
// exception), reading at most s.Scan of the newest rows, as
// dbqueue.Queue.SearchJobs does in jobs. Errors are left nil (Find reads
// them).
func (s *Store) Search(ctx context.Context, search dbqueue.Search) (dbqueue.SearchResult[Job], error) {
	rows, res, err := s.search.SearchFailed(ctx, search)
	if err != nil {
		return dbqueue.SearchResult[Job]{}, err
	}
	return dbqueue.SearchResult[Job]{Matches: s.jobsOf(rows), Scanned: res.Scanned, Oldest: res.Oldest, Complete: res.Complete}, nil
}
