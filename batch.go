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

// ErrBatchNotFound is returned by FindBatch and CancelBatch when no batch
// has the id: it was never created, or PruneBatches removed it.
var ErrBatchNotFound = errors.New("dbqueue: no such batch (never created, or pruned)")

// BatchOptions configure a batch (Laravel's Bus::batch()->name()->allowFailures()).
type BatchOptions struct {
	// Name is the batch's name. Workers find the callbacks to fire by it
	// (worker.OnBatch), so name every batch whose end should do something.
	Name string
	// AllowFailures keeps the batch going when a job fails. Without it the
	// first failure cancels the batch, as in Laravel: its jobs still
	// waiting are discarded when a worker takes them.
	AllowFailures bool
}

// Batch is a batch's progress, a row of job_batches (Laravel's table), as
// Laravel's Bus::findBatch reads it.
type Batch struct {
	ID   string
	Name string
	// TotalJobs were pushed with the batch. PendingJobs have not yet
	// succeeded: a failed job stays pending (it may be retried from
	// failed_jobs) and is counted in FailedJobs too, as Laravel counts,
	// but once however often it is retried and fails again, so Done
	// cannot turn true while jobs of the batch have not run.
	TotalJobs, PendingJobs, FailedJobs int
	// FailedJobIDs are the payload uuids of the jobs that failed (and
	// were not retried with success since).
	FailedJobIDs  []string
	AllowFailures bool
	CreatedAt     time.Time
	// CancelledAt and FinishedAt are zero while the batch is not
	// cancelled, or not finished. A cancelled batch is finished at once,
	// as in Laravel; otherwise a batch finishes when its last job succeeds.
	CancelledAt, FinishedAt time.Time
}

// ProcessedJobs is how many jobs succeeded (or were discarded).
func (b *Batch) ProcessedJobs() int { return b.TotalJobs - b.PendingJobs }

// Progress is ProcessedJobs as a whole percentage of TotalJobs.
func (b *Batch) Progress() int {
	if b.TotalJobs <= 0 {
		return 0
	}
	return (b.ProcessedJobs()*100 + b.TotalJobs/2) / b.TotalJobs
}

// Finished reports whether every job succeeded, or the batch was cancelled.
func (b *Batch) Finished() bool { return !b.FinishedAt.IsZero() }

// Cancelled reports whether CancelBatch, or a failure without
// AllowFailures, cancelled the batch.
func (b *Batch) Cancelled() bool { return !b.CancelledAt.IsZero() }

// HasFailures reports whether a job of the batch failed.
func (b *Batch) HasFailures() bool { return b.FailedJobs > 0 }

// Done reports whether every job has run once, with success or not: the
// moment Laravel's finally callbacks fire.
func (b *Batch) Done() bool { return b.PendingJobs-b.FailedJobs == 0 }

func newBatch(r dialect.BatchRow) *Batch {
	b := &Batch{
		ID: r.ID, Name: r.Name, TotalJobs: r.TotalJobs, PendingJobs: r.PendingJobs, FailedJobs: r.FailedJobs,
		FailedJobIDs: r.FailedJobIDs, AllowFailures: dialect.AllowsFailures(r.Options), CreatedAt: time.Unix(r.CreatedAt, 0),
	}
	if r.CancelledAt != nil {
		b.CancelledAt = time.Unix(*r.CancelledAt, 0)
	}
	if r.FinishedAt != nil {
		b.FinishedAt = time.Unix(*r.FinishedAt, 0)
	}
	return b
}

func (q *Queue) batches() dialect.Batches { return q.sql }

// maxBatchName is the width of job_batches.name.
const maxBatchName = 255

// Batch pushes jobs as one batch (Laravel's Bus::batch): the batch's row
// in job_batches and every job, each carrying the batch's id in its
// payload ("batchId"), in one transaction. Workers count each job as it
// succeeds or fails, in the transaction that finishes it, and fire the
// callbacks registered for the batch's name (worker.OnBatch) exactly once.
func (q *Queue) Batch(ctx context.Context, opts BatchOptions, jobs ...NewJob) (*Batch, error) {
	switch {
	case len(jobs) == 0:
		return nil, errors.New("dbqueue: Batch: no jobs: a batch needs at least one")
	case len(opts.Name) > maxBatchName:
		return nil, fmt.Errorf("dbqueue: Batch: name of %d bytes is longer than the %d job_batches.name holds", len(opts.Name), maxBatchName)
	}
	if err := refuseUnique("Batch", "a batch takes no unique locks; push unique jobs on their own", jobs); err != nil {
		return nil, err
	}
	if err := q.declareFlows(ctx, jobs); err != nil {
		return nil, err
	}
	id := newUUID()
	rows := make([]dialect.PushRow, len(jobs))
	for i, j := range jobs {
		row, err := q.row(j, func(p *Payload) { p.BatchID = id })
		if err != nil {
			return nil, err
		}
		rows[i] = row
	}
	notify := q.wake.shouldNotify(rows)
	var b dialect.BatchRow
	err := sqldb.Retry(ctx, func() error {
		return sqldb.InTx(ctx, q.db, sqldb.TxOptions{}, func(tx sqldb.Tx) error {
			err := q.batches().InsertBatch(ctx, tx, dialect.BatchRow{
				ID: id, Name: opts.Name, TotalJobs: len(jobs), PendingJobs: len(jobs),
				Options: dialect.BatchOptions(opts.AllowFailures),
			})
			if err != nil {
				return err
			}
			if _, err := q.insert(ctx, tx, rows, notify); err != nil {
				return err
			}
			b, _, err = q.batches().FindBatch(ctx, tx, id)
			return err
		})
	})
	if err != nil {
		return nil, sqldb.Wrap("push batch", err)
	}
	return newBatch(b), nil
}

// FindBatch reads a batch's progress (Laravel's Bus::findBatch).
func (q *Queue) FindBatch(ctx context.Context, id string) (*Batch, error) {
	b, found, err := q.batches().FindBatch(ctx, q.db, id)
	if err != nil {
		return nil, sqldb.Wrap("find batch", err)
	}
	if !found {
		return nil, fmt.Errorf("batch %s: %w", id, ErrBatchNotFound)
	}
	return newBatch(b), nil
}

// CancelBatch cancels a batch (Laravel's $batch->cancel()): its jobs still
// waiting are discarded when a worker takes them (counted as processed,
// without running), and jobs already running finish. Cancelling a
// cancelled batch does nothing.
func (q *Queue) CancelBatch(ctx context.Context, id string) error {
	var found bool
	err := sqldb.Retry(ctx, func() (err error) {
		found, err = q.batches().CancelBatch(ctx, q.db, id)
		return err
	})
	if err != nil {
		return sqldb.Wrap("cancel batch", err)
	}
	if !found {
		return fmt.Errorf("cancel batch %s: %w", id, ErrBatchNotFound)
	}
	return nil
}

// PruneBatches deletes batches that finished (or were cancelled) more
// than olderThan ago by the database's clock, as `php artisan
// queue:prune-batches --hours=N` does, and returns how many went. Batches
// still under way are kept whatever their age.
func (q *Queue) PruneBatches(ctx context.Context, olderThan time.Duration) (int64, error) {
	if olderThan < 0 || olderThan > MaxDelay {
		return 0, fmt.Errorf("dbqueue: PruneBatches(%v): olderThan must be from 0 to %v", olderThan, MaxDelay)
	}
	var n int64
	err := sqldb.Retry(ctx, func() (err error) {
		n, err = q.batches().PruneBatches(ctx, q.db, wholeSeconds(olderThan))
		return err
	})
	if err != nil {
		return 0, sqldb.Wrap("prune batches", err)
	}
	return n, nil
}

// batchDiscarded counts a job deleted without running (Queue.Cancel) as
// processed in its batch, inside tx, so the batch can still finish.
func (q *Queue) batchDiscarded(ctx context.Context, tx sqldb.Tx, payload []byte) error {
	p, err := DecodePayload(payload)
	if err != nil || p.BatchID == "" {
		return nil
	}
	_, err = q.batches().CountInBatch(ctx, tx, p.BatchID, p.UUID, false)
	return err
}

// ChainLink is one job waiting in a chain: an element of the "chained"
// list in the payload of the chain's running job.
type ChainLink struct {
	// Queue is the queue the link is pushed to.
	Queue string `json:"queue"`
	// Delay (seconds after the previous link succeeds) or RunAt (Unix
	// seconds) delays the link; zero for neither.
	Delay int64 `json:"delay,omitempty"`
	RunAt int64 `json:"runAt,omitempty"`
	// Payload is the link's own envelope, without "chained".
	Payload json.RawMessage `json:"payload"`
}

// PushChain pushes jobs to run one after another (Laravel's Bus::chain):
// the first is pushed now, and the rest ride in its payload, under
// "chained", as a list of ChainLink. When a link succeeds, the worker
// deletes it and pushes the next in one transaction, so a crash can never
// lose the rest of the chain nor run a link twice for one success. A link
// that fails stops the chain: the rest stay in its payload in failed_jobs,
// and retrying it (package failed) resumes the chain. It returns the
// first job's id.
func (q *Queue) PushChain(ctx context.Context, jobs ...NewJob) (int64, error) {
	if len(jobs) == 0 {
		return 0, errors.New("dbqueue: PushChain: no jobs: a chain needs at least one")
	}
	for i, j := range jobs {
		if j.Concurrency != nil {
			return 0, fmt.Errorf("dbqueue: PushChain: job %d (%q) sets Concurrency: a chain's later jobs would run outside the limit; push limited jobs on their own", i, j.Name)
		}
	}
	if err := refuseUnique("PushChain", "a chain takes no unique locks; push unique jobs on their own", jobs); err != nil {
		return 0, err
	}
	links := make([]ChainLink, 0, len(jobs)-1)
	for _, j := range jobs[1:] {
		row, err := q.row(j, nil)
		if err != nil {
			return 0, err
		}
		link := ChainLink{Queue: row.Queue, Payload: row.Payload}
		if row.Absolute {
			link.RunAt = row.At
		} else {
			link.Delay = row.At
		}
		links = append(links, link)
	}
	first, err := q.row(jobs[0], func(p *Payload) {
		if len(links) > 0 {
			p.Chained, _ = json.Marshal(links)
		}
	})
	if err != nil {
		return 0, err
	}
	ids, err := q.pushRows(ctx, []dialect.PushRow{first})
	if err != nil {
		return 0, err
	}
	return ids[0], nil
}

// chainNext is the row that follows job in its chain, if any.
func chainNext(job *Job) ([]dialect.PushRow, error) {
	c := job.Payload.Chained
	if len(c) == 0 || c[0] != '[' {
		return nil, nil
	}
	var links []ChainLink
	if err := json.Unmarshal(c, &links); err != nil {
		return nil, fmt.Errorf("dbqueue: job %d: its chain does not decode: %w", job.ID, err)
	}
	if len(links) == 0 {
		return nil, nil
	}
	next := links[0]
	payload := []byte(next.Payload)
	if len(links) > 1 {
		var err error
		if payload, err = withKey(payload, "chained", links[1:]); err != nil {
			return nil, fmt.Errorf("dbqueue: job %d: the next link of its chain: %w", job.ID, err)
		}
	}
	if err := checkQueueName(next.Queue); err != nil {
		return nil, fmt.Errorf("dbqueue: job %d: the next link of its chain: %w", job.ID, err)
	}
	// Refused here rather than pushed: a link that is no job would only
	// fail when claimed, its chain lost; a delay past any time would fail
	// the push on every try.
	if _, err := DecodePayload(payload); err != nil {
		return nil, fmt.Errorf("dbqueue: job %d: the next link of its chain carries no job payload: %w", job.ID, err)
	}
	if err := checkLinkTime(next); err != nil {
		return nil, fmt.Errorf("dbqueue: job %d: the next link of its chain: %w", job.ID, err)
	}
	row := dialect.PushRow{Queue: next.Queue, Payload: payload, At: next.Delay}
	if next.RunAt != 0 {
		row.Absolute, row.At = true, next.RunAt
	}
	return []dialect.PushRow{row}, nil
}

// linked reports whether a job's end must be written by finishLinked:
// its payload chains a next job or names a batch. Other jobs are deleted
// in batches, and pay nothing for chains and batches.
func (j *Job) linked() bool {
	return j.Payload.BatchID != "" || len(j.Payload.Chained) > 0 && j.Payload.Chained[0] == '['
}

// finishLinked ends a held linked job in one transaction: deleted with
// its chain's next job pushed (cause nil), or moved to failed_jobs (the
// chain stops there), and counted in its batch. It returns the batch
// before and after the count, nil when the job has no batch or the batch
// is gone.
func (q *Queue) finishLinked(ctx context.Context, job *Job, cause error) (before, after *Batch, err error) {
	f := dialect.Finish{BatchID: job.Payload.BatchID, JobUUID: job.Payload.UUID}
	var res dialect.FinishResult
	finish := func(f dialect.Finish) error {
		return sqldb.Retry(ctx, func() (err error) {
			res, err = q.batches().FinishLinked(ctx, q.db, job.held(), f)
			return err
		})
	}
	var fails *failureTries
	if cause == nil {
		if f.Next, err = chainNext(job); err != nil {
			return nil, nil, markUnwritable(err) // no retry pushes this link
		}
		f.Notify = len(f.Next) > 0 && q.wake.shouldNotify(f.Next)
		err = finish(f)
	} else {
		fails = q.failures(job, cause)
		err = writeFailure(fails, func(fail dialect.Failure) error {
			f.Fail = &fail
			return finish(f)
		})
	}
	if err != nil {
		return nil, nil, sqldb.Wrap("finish", err)
	}
	if !res.Held {
		if cause != nil && q.failedAlready(ctx, job, fails) {
			return nil, nil, nil // our own fail, its reply lost
		}
		return nil, nil, notHeld(job)
	}
	if res.Batch == nil {
		return nil, nil, nil
	}
	return newBatch(res.Batch.Before), newBatch(res.Batch.After), nil
}
