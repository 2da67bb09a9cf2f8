package dbqueue

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// Error history: when an attempt of a job fails and the job is released
// for another try, the attempt's error is kept beside the job (the
// dbqueue_job_errors table, migration 00010), so an operator reading a job
// that keeps coming back sees why it failed before, not only that it did.
// When the job finally fails, its history moves with it to failed_jobs
// (package failed's Job.Errors), and retrying it from there brings the
// history back with the failure's own error (failed_jobs' exception) as
// its newest: every attempt's error stays in view across the retry.
//
// A job keeps its newest ErrorHistoryKeep errors, each cut to ErrorHistoryBytes.
// The error is written in the release's own statement (PostgreSQL) or
// transaction (MySQL, SQLite), and only for a release that finds its
// reservation still held: a worker whose job was reclaimed writes nothing
// into the new holder's history. A job that never failed costs nothing
// more to finish; one with history takes it along when it succeeds (in
// the delete's statement on PostgreSQL, its transaction on SQLite and
// MySQL 8, one more statement on MariaDB) and moves it when it fails (in
// the fail's transaction).
const (
	// ErrorHistoryKeep is how many errors a job keeps: the newest.
	ErrorHistoryKeep = dialect.ErrorHistoryKeep
	// ErrorHistoryBytes bounds the text of one error (longer ones are
	// cut at a character boundary and say how long they were; bytes
	// that are not UTF-8 and NUL are escaped, see FailureTextBytes).
	ErrorHistoryBytes = dialect.ErrorHistoryBytes
)

// AttemptError is the error of one earlier attempt of a job.
type AttemptError struct {
	// Attempt is the attempt's number (the job's Attempts when it ran).
	Attempt int
	// Error is the error's text, at most ErrorHistoryBytes.
	Error string
	// Worker is the host and process id that ran the attempt; empty for
	// the error of a failure a retry from failed_jobs brought back
	// (failed_jobs does not say which process failed the job).
	Worker string
	// At is when the error was written, by the database's clock.
	At time.Time
}

func attemptErrors(rows []dialect.AttemptError) []AttemptError {
	if len(rows) == 0 {
		return nil
	}
	out := make([]AttemptError, len(rows))
	for i, r := range rows {
		out[i] = AttemptError{Attempt: r.Attempt, Error: r.Error, Worker: r.Worker, At: time.Unix(r.At, 0)}
	}
	return out
}

// thisWorker names this process in the error history: host:pid.
var thisWorker = func() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return dialect.StorableText(host, 200) + ":" + strconv.Itoa(os.Getpid())
}()

// releaseError is what a release with cause writes to the history: its
// text as dialect.StorableText makes it (bytes that are not UTF-8 and NUL
// escaped, as PostgreSQL's text holds neither and a release that could
// not be written would fail the job), cut to ErrorHistoryBytes.
func releaseError(cause error) *dialect.ReleaseError {
	if cause == nil {
		return nil
	}
	return &dialect.ReleaseError{Error: dialect.StorableText(cause.Error(), ErrorHistoryBytes), Worker: thisWorker}
}

func (q *Queue) errorHistory() dialect.ErrorHistory { return q.sql }

// ReleaseAfterError is Release for an attempt that failed with cause: the
// job is put back after delay and cause is added to its error history
// (see JobInfo.Errors), in the same statement or transaction. A worker
// releases the jobs whose handlers return an error this way.
func (q *Queue) ReleaseAfterError(ctx context.Context, job *Job, delay time.Duration, cause error) error {
	lost, err := q.releaseMany(ctx, []Releasing{{Job: job, Delay: delay, Cause: cause}})
	if err != nil {
		return err
	}
	if len(lost) > 0 {
		return notHeld(job)
	}
	return nil
}

// PruneErrorHistory deletes up to limit errors of the error history whose job
// is in neither jobs nor failed_jobs, and returns how many went. dbqueue
// deletes a job's history with the job; what is left over comes from a
// process that died between the two, or from a job that Laravel's own
// worker (which knows nothing of the history) finished. Run it now and
// then, as `dbqueue failed prune` does.
func (q *Queue) PruneErrorHistory(ctx context.Context, limit int) (int64, error) {
	if limit <= 0 {
		return 0, fmt.Errorf("dbqueue: PruneErrorHistory: limit %d: must be at least 1", limit)
	}
	var n int64
	err := sqldb.Retry(ctx, func() (err error) {
		n, err = q.errorHistory().PruneErrors(ctx, q.db, limit)
		return err
	})
	if err != nil {
		return 0, sqldb.Wrap("prune error history", err)
	}
	return n, nil
}
