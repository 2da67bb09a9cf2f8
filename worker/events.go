package worker

import (
	"context"
	"time"

	"github.com/dbqueue/dbqueue"
)

// Events are hooks called as jobs move through the worker, named after
// Laravel's queue events. Job hooks are called from the goroutine running
// the job, so several run at once; keep them quick and safe for concurrent
// use. Every field is optional.
type Events struct {
	// JobProcessing: a reserved job is about to run.
	JobProcessing func(ctx context.Context, job *dbqueue.Job)
	// JobProcessed: the handler succeeded (or discarded the job).
	JobProcessed func(ctx context.Context, job *dbqueue.Job, took time.Duration)
	// JobExceptionOccurred: the handler returned an error or panicked.
	JobExceptionOccurred func(ctx context.Context, job *dbqueue.Job, err error)
	// JobReleasedAfterException: after an error, the job will run again
	// after delay.
	JobReleasedAfterException func(ctx context.Context, job *dbqueue.Job, delay time.Duration)
	// JobReleased: the handler asked for a release (ReleaseAfter), no
	// handler for the job's name is registered here (UnknownKindBackoff,
	// the attempt given back),
	// or — only while JobGivenBack is nil — the job was given back, with a
	// zero delay.
	JobReleased func(ctx context.Context, job *dbqueue.Job, delay time.Duration)
	// JobGivenBack: the job went back to the queue at once without its
	// attempt counting, because the worker stopped before it started or
	// while it ran, or its reservation had run too short to start it. It
	// is not the job's doing, so metrics and alerts count it apart from
	// releases: when this hook is set, a given-back job is reported here
	// and not to JobReleased (which builds before v0.1.0 called with a zero
	// delay, as they still do when this hook is nil).
	JobGivenBack func(ctx context.Context, job *dbqueue.Job)
	// JobFailed: the job was moved to failed_jobs. That includes jobs
	// failed as they were claimed, without running (JobProcessing is not
	// called for them): a payload that does not decode — the Job then
	// carries its row's ID, Queue, Attempts and RawPayload, and as much of
	// Payload as decoded, so its Name may be empty — and a job reserved as
	// often as its attempts column counts (dbqueue.ErrAttemptsExhausted).
	// The handler's OnFailure runs for them too when the payload names it.
	JobFailed func(ctx context.Context, job *dbqueue.Job, err error)
	// JobTimedOut: the job ran past its timeout.
	JobTimedOut func(ctx context.Context, job *dbqueue.Job)
	// Looping: the worker is about to look for jobs.
	Looping func(ctx context.Context)
	// WorkerStopping: Run is returning, with why and the error if any.
	WorkerStopping func(reason StopReason, err error)
}

// StopReason says why Run returned.
type StopReason string

// The reasons Run returns.
const (
	StopCancelled StopReason = "cancelled" // the context passed to Run ended
	StopEmpty     StopReason = "empty"     // StopWhenEmpty and no job was ready
	StopMaxJobs   StopReason = "max-jobs"  // MaxJobs jobs were processed
	StopMaxTime   StopReason = "max-time"  // MaxTime passed
	StopMemory    StopReason = "memory"    // MemoryLimitMB was exceeded
	StopRestart   StopReason = "restart"   // a restart was broadcast (worker.Restart)
	StopWedged    StopReason = "wedged"    // every goroutine is stuck in a handler that ignores its context
	StopError     StopReason = "error"     // the queue cannot be worked (tables missing)
)
