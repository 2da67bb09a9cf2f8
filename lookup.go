package dbqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// ErrJobNotFound is returned by Job, Cancel and RunNow when no job has the
// id: it was never pushed, or it already finished (succeeded, failed into
// failed_jobs, or was cancelled).
var ErrJobNotFound = errors.New("dbqueue: no such job (never pushed, or already finished or cancelled)")

// ErrJobReserved is returned by Cancel and RunNow for a job a worker holds:
// the worker is running it, and deleting or moving the row under it would
// let the job run to the end with nothing left to finish. Wait for it to
// finish, or, for a job that keeps coming back, let it fail. (A job whose
// worker died stays reserved until retry_after, when it is claimed again.)
var ErrJobReserved = errors.New("dbqueue: the job is reserved by a worker (running, or its worker died and it returns after retry_after); it can only be cancelled or moved while it waits")

// JobState is where a job is in its life; the three states of Size.
type JobState string

// The states of a job in the jobs table.
const (
	// JobPending jobs are due and wait for a worker.
	JobPending JobState = dialect.StatePending
	// JobDelayed jobs wait for their available time (a delay or backoff).
	JobDelayed JobState = dialect.StateDelayed
	// JobReserved jobs are held by a worker, or by one that died.
	JobReserved JobState = dialect.StateReserved
)

// JobInfo is a job as it stands in the jobs table: what Job and Jobs read.
// It is not a reservation (a *Job is), so it cannot be deleted, released
// or failed; Cancel and RunNow act on waiting jobs by id instead.
type JobInfo struct {
	ID    int64
	Queue string
	State JobState
	// Attempts counts the reservations so far.
	Attempts int
	// ReservedAt is zero unless the job is reserved.
	ReservedAt  time.Time
	AvailableAt time.Time
	CreatedAt   time.Time
	// Payload is the decoded envelope; as much of it as decodes when
	// PayloadErr is set.
	Payload    Payload
	PayloadErr error
	// RawPayload is the payload column as stored, passed through the
	// queue's Redactor (WithRedactor) when it has one.
	RawPayload []byte
	// ExpiresAt is when a reserved job's reservation runs out (ReservedAt
	// plus the queue's retry_after) and another worker may take it over;
	// zero unless the job is reserved.
	ExpiresAt time.Time
	// Token is the reservation token of the job's last claim: with ID it
	// names the reservation that holds a reserved job.
	Token int64
	// Errors are the errors of its earlier attempts, oldest first (see
	// ErrorHistoryKeep). Job reads them; Jobs and SearchJobs leave them nil.
	Errors []AttemptError
}

// Name is the name the job's handler is registered under.
func (j *JobInfo) Name() string { return j.Payload.Name() }

// newJobInfo makes a JobInfo of a row, its payload passed through the
// queue's Redactor.
func (q *Queue) newJobInfo(r dialect.StatedRow) JobInfo {
	j := JobInfo{
		ID: r.ID, Queue: r.Queue, State: JobState(r.State), Attempts: r.Attempts,
		AvailableAt: time.Unix(r.AvailableAt, 0), CreatedAt: time.Unix(r.CreatedAt, 0),
		Token: r.Token &^ dialect.ErrorHistoryMark,
	}
	if r.Reserved {
		j.ReservedAt = time.Unix(r.ReservedAt, 0)
		j.ExpiresAt = j.ReservedAt.Add(q.RetryAfter())
	}
	j.Payload, j.PayloadErr = DecodePayload(r.Payload)
	if q.redact != nil {
		j.RawPayload = q.Redact(j.Name(), r.Payload)
		j.Payload, j.PayloadErr = DecodePayload(j.RawPayload)
	} else {
		j.RawPayload = r.Payload
	}
	return j
}

// JobFilter selects jobs for Jobs. The zero value lists the first page of
// every job of every queue.
type JobFilter struct {
	// Queue limits the list to one queue; empty lists all queues.
	Queue string
	// State limits the list to one state; empty lists all.
	State JobState
	// AfterID pages: pass the last ID of the previous page. Pages are
	// keyset pages on the primary key, so a deep page costs what the first
	// does and no job is skipped or repeated when jobs come and go.
	AfterID int64
	// Limit bounds the page: default 100, at most 1,000.
	Limit int
}

// Job default and maximum page sizes.
const (
	defaultJobsPage = 100
	maxJobsPage     = 1000
)

func (q *Queue) lookup() dialect.Lookup { return q.sql }

// Job reads one job by id with its state, for dashboards and for code
// that pushed it and wants to know where it is. A job no longer in the
// jobs table gives ErrJobNotFound (look in failed_jobs with package failed
// for one that failed).
func (q *Queue) Job(ctx context.Context, id int64) (*JobInfo, error) {
	row, found, err := q.lookup().FindJob(ctx, q.db, id)
	if err != nil {
		return nil, sqldb.Wrap(fmt.Sprintf("job %d", id), err)
	}
	if !found {
		return nil, fmt.Errorf("job %d: %w", id, ErrJobNotFound)
	}
	info := q.newJobInfo(row)
	hist, err := q.errorHistory().JobErrors(ctx, q.db, id)
	if err != nil {
		return nil, sqldb.Wrap(fmt.Sprintf("job %d: error history", id), err)
	}
	info.Errors = attemptErrors(hist)
	return &info, nil
}

// Jobs lists jobs in id order, one page at a time (see JobFilter.AfterID).
// Each page is one statement: a job's state is as of that statement.
func (q *Queue) Jobs(ctx context.Context, f JobFilter) ([]JobInfo, error) {
	switch f.State {
	case "", JobPending, JobDelayed, JobReserved:
	default:
		return nil, fmt.Errorf("dbqueue: Jobs: unknown state %q: use JobPending, JobDelayed, JobReserved or none", f.State)
	}
	switch {
	case f.Limit == 0:
		f.Limit = defaultJobsPage
	case f.Limit < 0 || f.Limit > maxJobsPage:
		return nil, fmt.Errorf("dbqueue: Jobs: Limit %d: must be from 1 to %d (0: %d)", f.Limit, maxJobsPage, defaultJobsPage)
	}
	rows, err := q.lookup().ListJobs(ctx, q.db, dialect.JobFilter{Queue: f.Queue, State: string(f.State), AfterID: f.AfterID, Limit: f.Limit})
	if err != nil {
		return nil, sqldb.Wrap("list jobs", err)
	}
	out := make([]JobInfo, len(rows))
	for i, r := range rows {
		out[i] = q.newJobInfo(r)
	}
	return out, nil
}

// Cancel deletes a job that waits (pending or delayed), so it never runs.
// A job a worker holds is left alone and gives ErrJobReserved: the worker
// would finish it anyway. A cancelled chain link takes the rest of its
// chain with it (they ride in its payload). A cancelled batch job counts
// as processed in its batch, as a job a cancelled batch discards does, so
// the batch can still finish; to stop a whole batch use CancelBatch.
func (q *Queue) Cancel(ctx context.Context, id int64) error {
	var state string
	err := sqldb.Retry(ctx, func() error {
		return sqldb.InTx(ctx, q.db, sqldb.TxOptions{}, func(tx sqldb.Tx) (err error) {
			var payload []byte
			state, payload, err = q.lookup().CancelJob(ctx, tx, id)
			if err != nil || payload == nil {
				return err
			}
			return q.batchDiscarded(ctx, tx, payload)
		})
	})
	if err != nil {
		return sqldb.Wrap(fmt.Sprintf("cancel job %d", id), err)
	}
	switch state {
	case dialect.StateGone:
		return fmt.Errorf("cancel job %d: %w", id, ErrJobNotFound)
	case dialect.StateReserved:
		return fmt.Errorf("cancel job %d: %w", id, ErrJobReserved)
	}
	return nil
}

// RunNow makes a delayed job (a delay, a backoff or RunAt still ahead)
// available at once; workers take it on their next claim (on PostgreSQL
// they are woken). A job already pending is left as it is and gives nil.
// A reserved job gives ErrJobReserved.
func (q *Queue) RunNow(ctx context.Context, id int64) error {
	var state, queue string
	err := sqldb.Retry(ctx, func() (err error) {
		state, queue, err = q.lookup().RunNow(ctx, q.db, id)
		return err
	})
	if err != nil {
		return sqldb.Wrap(fmt.Sprintf("run job %d now", id), err)
	}
	switch state {
	case dialect.StateGone:
		return fmt.Errorf("run job %d now: %w", id, ErrJobNotFound)
	case dialect.StateReserved:
		return fmt.Errorf("run job %d now: %w", id, ErrJobReserved)
	case dialect.StateDelayed:
		if queue != "" {
			q.wake.wakeLocal(queue, false)
		}
	}
	return nil
}

// ChainNext lists the handler names of the jobs that follow this one in
// its chain (Queue.PushChain), in order; nil for a job in no chain. A
// link that does not decode is listed as "?".
func (p Payload) ChainNext() []string {
	if len(p.Chained) == 0 {
		return nil
	}
	var links []ChainLink
	if json.Unmarshal(p.Chained, &links) != nil {
		return []string{"?"}
	}
	names := make([]string, len(links))
	for i, l := range links {
		names[i] = "?"
		if lp, err := DecodePayload(l.Payload); err == nil || lp.Name() != "" {
			names[i] = lp.Name()
		}
	}
	return names
}
