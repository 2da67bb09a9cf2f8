package dbqueue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// JobArgs is a job's argument type that names its kind, so that a job is
// pushed and handled by its Go type instead of by a name repeated at every
// Push and Handle, where a typo routes a job to no handler. The kind is
// the job's name in the payload (NewJob.Name): it routes the job to the
// handler worker.Register registered for the type, and a Laravel worker
// can run it when it names a PHP class and method
// (`App\Jobs\SendMail@handle`).
//
// Kind is called on the type's zero value by worker.Register, so it must
// return a constant and must not read the receiver's fields.
type JobArgs interface {
	Kind() string
}

// JobArgsWithOptions is a JobArgs whose type also says how its jobs are
// pushed by default (queue, tries, backoff...), once, instead of at every
// push. Options given to PushArgs override these field by field.
type JobArgsWithOptions interface {
	JobArgs
	JobOptions() JobOptions
}

// JobOptions are NewJob's options without Name and Data, for typed jobs:
// the defaults a JobArgs type declares, and the overrides of one push. A
// zero field leaves the choice to the next level (the type's options, then
// the worker's), so a push cannot set a field back to zero.
//
// There is no priority: run urgent kinds on a queue of their own (Queue)
// and list it first in the worker's Options.Queues, which are read in
// order, as Laravel's --queue=high,default.
type JobOptions struct {
	// Queue is the queue to push to; empty takes the Queue's default.
	Queue string
	// Delay makes the job available this long after the database's now.
	Delay time.Duration
	// RunAt makes the job available at this time. Delay and RunAt are one
	// choice: a level that sets either replaces both.
	RunAt time.Time
	// MaxTries is how many attempts the job gets.
	MaxTries int
	// MaxExceptions fails the job after this many handler errors.
	MaxExceptions int
	// Backoff lists retry delays; the last repeats.
	Backoff []time.Duration
	// Timeout is how long one attempt may run.
	Timeout time.Duration
	// RetryUntil fails the job once this time has passed.
	RetryUntil time.Time
	// FailOnTimeout fails the job, instead of releasing it, when it times
	// out. A level can turn it on, not off.
	FailOnTimeout bool
	// Unique makes every push of the type unique (see PushUnique): a
	// duplicate is not queued. A push's Unique replaces the type's whole;
	// to push one job of a unique type without a lock, clear the NewJob's
	// Unique that JobFor returns and push that.
	Unique *Unique
	// Concurrency runs the type's jobs under a limit (see Concurrency). A
	// push's Concurrency replaces the type's whole; a job whose args have
	// a ConcurrencyKey method gets its Key from it when Key is empty.
	Concurrency *Concurrency
}

// merge returns o with the non-zero fields of over laid on top.
func (o JobOptions) merge(over JobOptions) JobOptions {
	if over.Queue != "" {
		o.Queue = over.Queue
	}
	if over.Delay != 0 || !over.RunAt.IsZero() {
		o.Delay, o.RunAt = over.Delay, over.RunAt
	}
	if over.MaxTries != 0 {
		o.MaxTries = over.MaxTries
	}
	if over.MaxExceptions != 0 {
		o.MaxExceptions = over.MaxExceptions
	}
	if over.Backoff != nil {
		o.Backoff = over.Backoff
	}
	if over.Timeout != 0 {
		o.Timeout = over.Timeout
	}
	if !over.RetryUntil.IsZero() {
		o.RetryUntil = over.RetryUntil
	}
	o.FailOnTimeout = o.FailOnTimeout || over.FailOnTimeout
	if over.Unique != nil {
		o.Unique = over.Unique
	}
	if over.Concurrency != nil {
		o.Concurrency = over.Concurrency
	}
	return o
}

// JobFor turns typed args into the NewJob they push: Name is args.Kind(),
// Data is args (encoded as JSON), and the options are the type's
// JobOptions, if it has them, overridden by opts in order, Unique
// included. Use it to mix typed jobs with others in PushMany or PushTx.
func JobFor(args JobArgs, opts ...JobOptions) NewJob {
	if args == nil {
		return NewJob{}
	}
	var o JobOptions
	if d, ok := args.(JobArgsWithOptions); ok {
		o = d.JobOptions()
	}
	for _, over := range opts {
		o = o.merge(over)
	}
	j := NewJob{
		Name: args.Kind(), Data: args,
		Queue: o.Queue, Delay: o.Delay, RunAt: o.RunAt,
		MaxTries: o.MaxTries, MaxExceptions: o.MaxExceptions,
		Backoff: o.Backoff, Timeout: o.Timeout,
		RetryUntil: o.RetryUntil, FailOnTimeout: o.FailOnTimeout,
	}
	if o.Unique != nil {
		u := *o.Unique // the job's own copy: a middleware may edit it
		j.Unique = &u
	}
	if o.Concurrency != nil {
		c := *o.Concurrency
		if k, ok := args.(ConcurrencyKeyer); ok && c.Key == "" {
			c.Key = k.ConcurrencyKey()
		}
		j.Concurrency = &c
	}
	return j
}

// jobsFor is JobFor over a list, refusing nil args and empty kinds with
// errors that name the culprit (NewJob's own would only say "Name is
// empty").
func jobsFor[T JobArgs](fn string, args []T, opts []JobOptions) ([]NewJob, error) {
	jobs := make([]NewJob, len(args))
	for i, a := range args {
		if any(a) == nil {
			return nil, fmt.Errorf("dbqueue: %s: args[%d] is nil: pass a value of a JobArgs type", fn, i)
		}
		jobs[i] = JobFor(a, opts...)
		if jobs[i].Name == "" {
			return nil, fmt.Errorf("dbqueue: %s: %T.Kind() returned an empty kind: return the name its handler is registered under", fn, a)
		}
	}
	return jobs, nil
}

// PushArgs pushes one typed job: args.Kind() routes it, args is its data,
// and opts override the type's JobOptions. It returns the job's id: when
// the options make it unique and a live lock holds its key, the id of the
// job holding it (PushArgsUnique says which it was).
func PushArgs(ctx context.Context, q *Queue, args JobArgs, opts ...JobOptions) (int64, error) {
	if q == nil {
		return 0, errors.New("dbqueue: PushArgs: nil queue")
	}
	jobs, err := jobsFor("PushArgs", []JobArgs{args}, opts)
	if err != nil {
		return 0, err
	}
	return q.Push(ctx, jobs[0])
}

// PushArgsMany pushes typed jobs in one transaction, as PushMany does, and
// returns their ids in order; opts apply to every one. T may be one args
// type, or JobArgs itself for a mix of kinds.
func PushArgsMany[T JobArgs](ctx context.Context, q *Queue, args []T, opts ...JobOptions) ([]int64, error) {
	if q == nil {
		return nil, errors.New("dbqueue: PushArgsMany: nil queue")
	}
	jobs, err := jobsFor("PushArgsMany", args, opts)
	if err != nil {
		return nil, err
	}
	return q.PushMany(ctx, jobs)
}

// PushArgsTx pushes typed jobs inside the caller's database/sql
// transaction, as Queue.PushTx does: they exist only if it commits, and a
// type's Unique takes its lock in tx. For per-push options, use JobFor
// with q.PushTx; for a pgx transaction, dbqpgx.PushArgsTx.
func PushArgsTx(ctx context.Context, q *Queue, tx *sql.Tx, args ...JobArgs) ([]int64, error) {
	if q == nil {
		return nil, errors.New("dbqueue: PushArgsTx: nil queue")
	}
	jobs, err := jobsFor("PushArgsTx", args, nil)
	if err != nil {
		return nil, err
	}
	return q.PushTx(ctx, tx, jobs...)
}

// PushArgsUnique pushes one typed job as PushUnique does and says whether
// it was a duplicate. The lock is the options' Unique (the type's
// JobOptions, overridden by opts), or, when neither sets one, a
// Unique{}: unique by kind and args until the job finishes.
func PushArgsUnique(ctx context.Context, q *Queue, args JobArgs, opts ...JobOptions) (id int64, duplicate bool, err error) {
	if q == nil {
		return 0, false, errors.New("dbqueue: PushArgsUnique: nil queue")
	}
	j, u, err := uniqueJobFor("PushArgsUnique", args, opts...)
	if err != nil {
		return 0, false, err
	}
	return q.PushUnique(ctx, j, u)
}

// PushArgsUniqueTx is PushArgsUnique inside the caller's database/sql
// transaction, as PushUniqueTx: the job and its lock exist only if it
// commits. For a pgx transaction, dbqpgx.PushArgsUniqueTx.
func PushArgsUniqueTx(ctx context.Context, q *Queue, tx *sql.Tx, args JobArgs, opts ...JobOptions) (id int64, duplicate bool, err error) {
	if q == nil {
		return 0, false, errors.New("dbqueue: PushArgsUniqueTx: nil queue")
	}
	j, u, err := uniqueJobFor("PushArgsUniqueTx", args, opts...)
	if err != nil {
		return 0, false, err
	}
	return q.PushUniqueTx(ctx, tx, j, u)
}

// uniqueJobFor is JobFor for the unique typed pushes (PushArgsUnique and
// its transactional forms): the job and the lock it is pushed under, the
// options' Unique or a Unique{}. fn names the caller in its errors.
func uniqueJobFor(fn string, args JobArgs, opts ...JobOptions) (NewJob, Unique, error) {
	jobs, err := jobsFor(fn, []JobArgs{args}, opts)
	if err != nil {
		return NewJob{}, Unique{}, err
	}
	var u Unique
	if jobs[0].Unique != nil {
		u = *jobs[0].Unique
	}
	return jobs[0], u, nil
}
