package worker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/dbqueue/dbqueue"
)

// Outcome says what a worker did with a job (see RunOnce).
type Outcome string

// The outcomes RunOnce reports.
const (
	// OutcomeDone: the handler succeeded and the job was deleted.
	OutcomeDone Outcome = "done"
	// OutcomeDiscarded: the handler returned Discard; the job was deleted.
	OutcomeDiscarded Outcome = "discarded"
	// OutcomeReleased: the job will run again after Result.Delay: the
	// handler returned ReleaseAfter, or an error or a timeout with tries
	// left, or no handler is registered for its name (UnknownKindBackoff;
	// its attempt given back).
	OutcomeReleased Outcome = "released"
	// OutcomeFailed: the job was moved to failed_jobs, Result.Err saying why.
	OutcomeFailed Outcome = "failed"
	// OutcomeGivenBack: the job went back without counting its attempt
	// (its reservation was too short to run it, or the context ended).
	OutcomeGivenBack Outcome = "given back"
	// OutcomeLeftReserved: the handler ignored its context past its
	// timeout, or the commit of a transactional handler (HandleTx) failed
	// and its outcome could not be found out; the job comes back after
	// retry_after.
	OutcomeLeftReserved Outcome = "left reserved"
	// OutcomeSnoozed: the handler returned Snooze; the job runs again
	// after Result.Delay, its attempt given back.
	OutcomeSnoozed Outcome = "snoozed"
	// OutcomeCancelled: the handler returned Cancel; the job is in
	// failed_jobs, Result.Err wrapping dbqueue.ErrCancelled.
	OutcomeCancelled Outcome = "cancelled"
	// OutcomeNotHeld: a transactional handler's job was no longer held
	// when its end was written (its reservation expired and another
	// worker took it): the transaction rolled back, nothing was applied.
	OutcomeNotHeld Outcome = "not held"
)

// Result is what RunOnce did with one job.
type Result struct {
	// Job is the job as it was reserved (its Attempts count this run).
	Job *dbqueue.Job
	// Outcome is what was done with it.
	Outcome Outcome
	// Err is the handler's error or why the job failed, joined with any
	// error writing the outcome; nil when the job succeeded.
	Err error
	// Delay is how long a released job waits before it runs again.
	Delay time.Duration
}

// runOnceBatch is how many jobs one of RunOnce's claims takes.
const runOnceBatch = 1000

// RunOnce claims every job ready now on the worker's queues (skipping
// paused ones), runs each once through its handler, Concurrency at a
// time, writes their outcomes exactly as Run does (deletes, releases with
// backoff, failures, hooks), and returns what it did, in the order the
// jobs were claimed. A job released during the call is not run again by
// it. Laravel's `queue:work --once` works one job; RunOnce works what is
// ready: for tests (dbqueuetest.Work), cron-driven or serverless workers.
//
// Jobs the claims failed without running — a payload that does not
// decode, dbqueue.ErrAttemptsExhausted — are logged and reach the failure
// hooks as in Run, and come first in the results, as OutcomeFailed.
//
// It waits for every handler to return. It returns an error, with the
// results so far, only when no job could be claimed for a database error
// or when no handler is registered.
func (w *Worker) RunOnce(ctx context.Context) ([]Result, error) {
	if len(w.handlerMap()) == 0 {
		return nil, errors.New("worker: RunOnce: no handlers registered: call Handle or Register first")
	}
	sig, err := readSignals(ctx, w.ops, w.opts.Queues)
	if err != nil {
		return nil, fmt.Errorf("worker: RunOnce: read the pause signals: %w", err)
	}
	var queues []string
	for _, q := range w.opts.Queues {
		if !sig.paused[q] {
			queues = append(queues, q)
		}
	}
	if len(queues) == 0 {
		return nil, nil
	}

	// Claim everything first, so a job released with no delay is not
	// claimed again.
	var (
		jobs []*dbqueue.Job
		// Jobs the claims failed without running, reported once the run
		// below can log them and fire their hooks.
		claimFailed []*Result
	)
	for {
		got, err := w.ops.Reserve(ctx, runOnceBatch, runOnceBatch, queues, func(job *dbqueue.Job, cause error) {
			claimFailed = append(claimFailed, &Result{Job: job, Err: cause})
		}, nil)
		jobs = append(jobs, got...)
		if err != nil {
			if len(jobs) == 0 {
				return nil, fmt.Errorf("worker: RunOnce: %w", err)
			}
			w.log.Warn("RunOnce: cannot claim more jobs; working those claimed", "jobs", len(jobs), "error", err)
			break
		}
		if len(got) < runOnceBatch {
			break
		}
	}

	r := &run{w: w, started: time.Now(), freed: make(chan struct{}, 1)}
	r.wakeAt.Store(math.MaxInt64)
	r.jobCtx, r.cancelJobs = context.WithCancel(ctx)
	defer r.cancelJobs()
	// RunOnce's context ending cancels the handlers running.
	defer context.AfterFunc(ctx, r.cancelRunning)()
	r.paused.Store(&sig.paused)
	var mu sync.Mutex
	results := make(map[*dbqueue.Job]*Result, len(jobs))
	r.record = func(job *dbqueue.Job, outcome string, err error, extra []any) {
		res := outcomeOf(outcome, err, extra)
		res.Job = job
		mu.Lock()
		results[job] = &res
		mu.Unlock()
	}
	defer r.openWrites(ctx)()
	r.done = newCompleter(r)
	r.releases = newReleaser(w.q, func() (context.Context, context.CancelFunc) { return r.writeCtx(ctx) })
	for _, f := range claimFailed {
		r.claimFailed(f.Job, f.Err)
	}

	// Concurrency slots, each taken by one job's goroutine at a time.
	free := make(chan *slot, w.opts.Concurrency)
	for range w.opts.Concurrency {
		free <- r.newSlot()
	}
	var wg sync.WaitGroup
	for _, job := range jobs {
		runnerSlot := <-free
		wg.Add(1)
		go r.once(runnerSlot, job, func() {
			free <- runnerSlot
			wg.Done()
		})
	}
	wg.Wait()
	for range w.opts.Concurrency {
		(<-free).retire()
	}
	r.closeMu.Lock()
	r.closed = true
	r.closeMu.Unlock()
	r.done.close()
	r.releases.close()

	out := make([]Result, 0, len(claimFailed)+len(jobs))
	for _, f := range claimFailed {
		out = append(out, *results[f.Job])
	}
	for _, job := range jobs {
		if res := results[job]; res != nil {
			out = append(out, *res)
		} else {
			out = append(out, Result{Job: job, Outcome: OutcomeLeftReserved})
		}
	}
	return out, nil
}

// once runs one of RunOnce's jobs on runnerSlot, then calls done; a handler that
// ends the goroutine (runtime.Goexit) leaves the job to a new goroutine.
func (r *run) once(runnerSlot *slot, job *dbqueue.Job, done func()) {
	r.inFlight.Add(1)
	defer func() {
		if exited := runnerSlot.exited; exited != nil {
			runnerSlot.exited = nil
			go func() {
				defer func() { // deferred: a hook may end this goroutine too
					r.inFlight.Add(-1)
					done()
				}()
				r.afterCall(runnerSlot, exited.attempt, exited.result)
			}()
			return
		}
		r.inFlight.Add(-1)
		done()
	}()
	if r.jobCtx.Err() != nil {
		r.finish(job, func() { r.giveBack(job, "RunOnce's context ended before the job started") })
		return
	}
	r.process(runnerSlot, job)
}

// outcomeOf reads a job's log line (see run.logJob) as a Result.
func outcomeOf(outcome string, err error, extra []any) Result {
	var res Result
	var cause error
	for i := 0; i+1 < len(extra); i += 2 {
		switch extra[i] {
		case "delay":
			res.Delay, _ = extra[i+1].(time.Duration)
		case "cause":
			cause, _ = extra[i+1].(error)
		}
	}
	res.Err = errors.Join(cause, err)
	switch {
	case outcome == "done", outcome == "done late":
		res.Outcome = OutcomeDone
	case outcome == "deleted":
		res.Outcome = OutcomeDiscarded
	case strings.HasPrefix(outcome, "failed"):
		res.Outcome = OutcomeFailed
	case outcome == "given back":
		res.Outcome = OutcomeGivenBack
	case strings.Contains(outcome, "left reserved"):
		res.Outcome = OutcomeLeftReserved
	case strings.Contains(outcome, "released"):
		res.Outcome = OutcomeReleased
	default:
		res.Outcome = Outcome(outcome)
	}
	return res
}
