package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/dbqueue/dbqueue"
)

// The errors a worker records in failed_jobs for its own reasons.
var (
	// ErrMaxAttempts: the job was reserved again with its tries spent or
	// its retryUntil passed — its last try ended in a release (a
	// handler's ReleaseAfter, a middleware's, a transactional handler's
	// ReleaseTx), or its last holder died or timed out (Laravel's
	// MaxAttemptsExceededException). It is failed without running.
	ErrMaxAttempts = errors.New("has been attempted too many times or run too long; the job may have previously timed out")
	// ErrAbandoned: the job was reserved past its tries and
	// Options.AbandonedRetries: workers stopped while running it (killed,
	// crashed, out of memory) more often than that, so it may be what
	// stops them. The cause also wraps ErrMaxAttempts.
	ErrAbandoned = errors.New("it may be what kills them: find out why before retrying it (Options.AbandonedRetries allows more)")
	// ErrTimeout: the job ran past its timeout (Laravel's TimeoutExceededException).
	ErrTimeout = errors.New("has timed out")
	// ErrUnknownJob: no handler is registered for the job's name on the
	// worker that took it, and no worker with one took it within
	// Options.UnknownKindWait of its push (or before its retryUntil).
	ErrUnknownJob = errors.New("no handler is registered for this job name on this worker: register one with worker.Handle or worker.Register, or push it to a queue that a worker with one serves")
	// ErrPayloadLimit: the payload's timeout or backoff is negative or
	// longer than MaxDelay; the job is failed without running.
	ErrPayloadLimit = errors.New("payload timeout or backoff out of range")
)

// result is what a handler goroutine returned.
type result struct {
	err  error
	took time.Duration
}

// process runs one job the way Laravel's Worker::process does. It
// reports whether it counted the job as processed itself (a job abandoned
// to a handler that ignores its context is counted when abandoned, so
// MaxJobs and StopWhenEmpty still stop the worker).
func (r *run) process(runnerSlot *slot, job *dbqueue.Job) (counted bool) {
	w := r.w
	dbNow := dbClock{at: job.ReservedAt, received: time.Now()}
	ev := w.opts.Events
	ctx := r.jobCtx

	p := &job.Payload
	h := w.handlerFor(job)
	timeout, limitErr := r.jobTimeout(job, h)
	if limitErr == nil {
		limitErr = checkBackoff(job)
	}
	if need := timeout + abandonAfter + startMargin; limitErr == nil && time.Until(job.ExpiresAt()) < need {
		// Waited so long in the prefetch buffer that its reservation could
		// run out before the job finishes, or before a handler past its
		// timeout is abandoned: hand it back rather than risk two runs.
		r.finish(job, func() { r.giveBack(job, "reservation too short to run the job within its timeout") })
		return false
	}

	maxTries := w.opts.Tries
	if h != nil && h.tries != nil {
		maxTries = *h.tries
	}
	if p.MaxTries != nil {
		maxTries = *p.MaxTries
	}
	start := true
	r.finish(job, func() {
		if fn := ev.JobProcessing; fn != nil {
			fn(ctx, job)
		}
		// markJobAsFailedIfAlreadyExceedsMaxAttempts: a job reserved past
		// its tries. Its last try ended in a release (a handler's or a
		// middleware's, or a Laravel worker's), and it fails without
		// running, as in Laravel; or it was abandoned by a worker that
		// stopped while running it (the claim says which: FollowsAbandoned),
		// and it runs again up to AbandonedRetries times (Laravel: none).
		abandoned := job.Attempts - maxTries
		past := p.RetryUntil == nil && maxTries > 0 && abandoned > 0
		released := past && !w.ops.FollowsAbandoned(job)
		if past && !released && abandoned <= w.opts.AbandonedRetries {
			w.log.Warn("job abandoned by a worker that stopped while running it; running it again past its tries",
				"id", job.ID, "name", job.Name(), "attempt", job.Attempts, "tries", maxTries, "abandoned", abandoned, "allowed", w.opts.AbandonedRetries)
		}
		switch {
		case r.batchCancelled(job):
			r.discardCancelled(job, h)
		case p.RetryUntil != nil && dbNow.now().Unix() > *p.RetryUntil:
			r.fail(job, h, 0, fmt.Errorf("%s %w", job.Name(), ErrMaxAttempts))
		case released:
			r.fail(job, h, 0, fmt.Errorf("%s %w: attempt %d ended in a release with its %d tries spent, so it does not run again (give it more tries, or a RetryUntil)",
				job.Name(), ErrMaxAttempts, job.Attempts-1, maxTries))
		case past && abandoned > w.opts.AbandonedRetries:
			if w.opts.AbandonedRetries == 0 {
				r.fail(job, h, 0, fmt.Errorf("%s %w", job.Name(), ErrMaxAttempts))
			} else {
				r.fail(job, h, 0, fmt.Errorf("%s %w: abandoned %d times by workers that stopped while running it (attempt %d, tries %d): %w",
					job.Name(), ErrMaxAttempts, abandoned, job.Attempts, maxTries, ErrAbandoned))
			}
		case h == nil:
			r.unknownKind(job, dbNow)
		case limitErr != nil:
			// Running it would only end in a wrapped duration or a
			// release that cannot be written, again and again.
			r.fail(job, h, 0, limitErr)
		default:
			return
		}
		start = false
	})
	if !start || r.isClosed() {
		return false
	}

	begun := time.Now()
	if r.stats != nil {
		r.stats.started(job, dbNow.now())
	}
	a := runnerSlot.newAttempt()
	a.parent, a.deadline, a.job, a.h, a.maxTries, a.begun, a.dbNow = ctx, begun.Add(timeout), job, h, maxTries, begun, dbNow
	runnerSlot.start(a, timeout)
	res := r.call(runnerSlot, a)
	// call returned: the handler did not end the goroutine. (With
	// GODEBUG=panicnil=1, panic(nil) recovers as nil and looks like it.)
	runnerSlot.exited = nil
	return r.afterCall(runnerSlot, a, res)
}

// afterCall writes the outcome of an attempt whose handler returned res.
func (r *run) afterCall(runnerSlot *slot, a *attempt, res result) (counted bool) {
	runnerSlot.end()
	// Whatever the handler left running on its context ends with the job.
	defer a.finish()
	w, job, ctx := r.w, a.job, r.jobCtx
	if !a.state.CompareAndSwap(attemptRunning, attemptReturned) {
		// The timer gave up on the handler and decided the job (abandon),
		// and counted it.
		<-a.decided
		r.stuck.Add(-1)
		if !a.failed && res.err == nil && a.settled == nil {
			// It finished after all while its reservation still stood:
			// the work is done, so do not run it again.
			r.finish(job, func() {
				var err error
				if w.ops.Linked(job) {
					if err = r.finishLinked(job, nil); w.recurs(err) {
						r.fail(job, a.h, res.took, successUnwritable(job, err))
						return
					}
				} else {
					err = r.persist(ctx, job, func(ctx context.Context) error { return w.q.Delete(ctx, job) })
				}
				r.logDone(job, res.took, "done late", err)
				if err == nil {
					r.count(job, countProcessed, res.took, true)
				}
			})
		}
		return true
	}
	r.finish(job, func() {
		if s := a.settled; s != nil {
			r.settle(job, a.h, res.took, s) // written in the handler's transaction
			return
		}
		r.outcome(job, a.h, a.maxTries, a, res, a.dbNow)
	})
	return false
}

// errPanicNil is a handler's error when it panicked with nil and
// GODEBUG=panicnil=1 made recover return nil.
var errPanicNil = errors.New("panic: nil (the handler panicked with a nil value)")

// errGoexit is a handler's error when it ended its goroutine with
// runtime.Goexit (t.FailNow in a test's handler does).
var errGoexit = errors.New("the handler called runtime.Goexit (t.Fatal or t.FailNow in a handler?): the job did not finish")

// call runs the handler on this goroutine, turning a panic into an error
// with its stack. A handler that ends the goroutine (runtime.Goexit)
// leaves the attempt in runnerSlot.exited, for whoever started the goroutine to
// finish on another (see run.runner).
func (r *run) call(runnerSlot *slot, a *attempt) (res result) {
	returned := false
	defer func() {
		res.took = time.Since(a.begun)
		if returned {
			return
		}
		if v := recover(); v != nil {
			res.err = fmt.Errorf("panic: %v\n%s", v, debug.Stack())
			return
		}
		// runtime.Goexit: this goroutine is ending, and whoever started
		// it finishes the job on another. (Or panic(nil) under
		// GODEBUG=panicnil=1, when call returns after all.)
		res.err = errPanicNil
		runnerSlot.exited = &exitedCall{attempt: a, result: result{err: errGoexit, took: res.took}}
	}()
	res.err = a.h.run(a, a.job)
	returned = true
	return res
}

// exitedCall is an attempt whose handler ended its goroutine.
type exitedCall struct {
	attempt *attempt
	result  result
}

// dbClock is the database's clock at the job's reservation, moved on by
// this process's monotonic clock since the job was received.
type dbClock struct{ at, received time.Time }

func (c dbClock) now() time.Time { return c.at.Add(time.Since(c.received)) }

// outcome acts on what the handler returned.
func (r *run) outcome(job *dbqueue.Job, h *handler, maxTries int, hctx context.Context, res result, dbNow dbClock) {
	ev, ctx := r.w.opts.Events, r.jobCtx
	if res.err == nil {
		if !r.complete(job, h, res.took) {
			return // failed: its success cannot be written
		}
		r.logDone(job, res.took, "done", nil)
		r.count(job, countProcessed, res.took, true)
		if fn := ev.JobProcessed; fn != nil {
			fn(ctx, job, res.took)
		}
		return
	}
	var o *outcome
	errors.As(res.err, &o)
	switch {
	case o != nil && o.kind == outcomeDiscard:
		if !r.complete(job, h, res.took) {
			return
		}
		r.logDone(job, res.took, "deleted", nil)
		r.count(job, countProcessed, res.took, true)
		if fn := ev.JobProcessed; fn != nil {
			fn(ctx, job, res.took)
		}
	case o != nil && o.kind == outcomeRelease:
		failed, err := r.release(job, h, res.took, o.delay, nil, nil)
		if failed {
			return
		}
		r.logJob(job, res.took, "released", err, "delay", o.delay)
		if err == nil {
			r.count(job, countReleased, res.took, true)
		}
		if fn := ev.JobReleased; fn != nil && err == nil {
			fn(ctx, job, o.delay)
		}
	case o != nil && o.kind == outcomeSnooze:
		err := r.persist(ctx, job, func(ctx context.Context) error { return txOpsOf(r.w.q).Snooze(ctx, job, o.delay) })
		r.logJob(job, res.took, "snoozed", err, "delay", o.delay)
		if err == nil {
			r.count(job, countReleased, res.took, true)
		}
		if fn := ev.JobReleased; fn != nil && err == nil {
			fn(ctx, job, o.delay)
		}
	case o != nil && o.kind == outcomeFail:
		r.fail(job, h, res.took, o.cause)
	case o != nil && o.kind == outcomeCancel:
		r.failAs(job, h, res.took, o.cause, "cancelled")
	case r.jobCtx.Err() != nil:
		// The worker is stopping and cancelled the job: not the job's fault.
		r.giveBack(job, "worker stopped while the job ran")
	case hctx.Err() == context.DeadlineExceeded:
		r.timedOut(job, h, maxTries, res.took, dbNow, true)
	default:
		r.exception(job, h, maxTries, res, dbNow)
	}
}

// exception is Laravel's handleJobException: fail the job if this was its
// last try, its retryUntil has passed or it reached maxExceptions;
// otherwise release it with its backoff.
func (r *run) exception(job *dbqueue.Job, h *handler, maxTries int, res result, dbNow dbClock) {
	w, p, ctx := r.w, &job.Payload, r.jobCtx
	if fn := w.opts.Events.JobExceptionOccurred; fn != nil {
		fn(ctx, job, res.err)
	}
	exceptions := p.Exceptions + 1
	switch {
	case p.RetryUntil != nil && dbNow.now().Unix() >= *p.RetryUntil,
		p.RetryUntil == nil && maxTries > 0 && job.Attempts >= maxTries,
		p.MaxExceptions != nil && *p.MaxExceptions > 0 && exceptions >= *p.MaxExceptions:
		r.fail(job, h, res.took, res.err)
		return
	}
	delay := r.backoff(job, h)
	var (
		payload []byte
		err     error
		failed  bool
	)
	if p.MaxExceptions != nil {
		payload, err = r.w.ops.WithKey(job.RawPayload, "exceptions", exceptions)
		if err != nil {
			// The count cannot be carried: releasing without it would let
			// the job run past its maxExceptions.
			r.fail(job, h, res.took, fmt.Errorf("%s: the job was to be released (%w), but %w: its exception count cannot be written: %w",
				job.Name(), res.err, ErrUnwritable, err))
			return
		}
	}
	if failed, err = r.release(job, h, res.took, delay, payload, res.err); failed {
		return
	}
	r.logJob(job, res.took, "released after error", err, "delay", delay, "cause", res.err)
	if err == nil {
		r.count(job, countReleased, res.took, true)
	}
	if fn := w.opts.Events.JobReleasedAfterException; fn != nil && err == nil {
		fn(ctx, job, delay)
	}
}

// timedOut handles a job that ran past its timeout: failed when it has
// failOnTimeout, its tries are spent or its retryUntil passed; otherwise
// released with its backoff when the handler returned, or left reserved
// (back after retry_after) when the handler is still running.
func (r *run) timedOut(job *dbqueue.Job, h *handler, maxTries int, took time.Duration, dbNow dbClock, returned bool) (failed bool) {
	w, p, ctx := r.w, &job.Payload, r.jobCtx
	if fn := w.opts.Events.JobTimedOut; fn != nil {
		fn(ctx, job)
	}
	cause := fmt.Errorf("%s %w", job.Name(), ErrTimeout)
	if p.FailOnTimeout ||
		p.RetryUntil != nil && dbNow.now().Unix() >= *p.RetryUntil ||
		p.RetryUntil == nil && maxTries > 0 && job.Attempts >= maxTries {
		r.fail(job, h, took, cause)
		return true
	}
	if !returned {
		r.logJob(job, took, "timed out, left reserved until retry_after", cause)
		return false
	}
	delay := r.backoff(job, h)
	failed, err := r.release(job, h, took, delay, nil, cause)
	if failed {
		return true
	}
	r.logJob(job, took, "timed out, released", errors.Join(cause, err), "delay", delay)
	if err == nil {
		r.count(job, countReleased, took, true)
	}
	if fn := w.opts.Events.JobReleasedAfterException; fn != nil && err == nil {
		fn(ctx, job, delay)
	}
	return false
}

// startMargin is how much longer than a job's timeout and the abandon wait
// its reservation must still last for the job to start. The database
// stamps reservations in whole seconds, so another worker may take a job
// up to a second before its ExpiresAt.
const startMargin = time.Second

// maxPayloadSeconds is MaxDelay in a payload's whole seconds.
const maxPayloadSeconds = int64(MaxDelay / time.Second)

// jobTimeout is how long the job may run: the payload's timeout, else the
// handler's, else the worker's, capped below retry_after. A payload
// timeout that is negative or longer than MaxDelay is an error naming it,
// never a wrapped duration.
func (r *run) jobTimeout(job *dbqueue.Job, h *handler) (time.Duration, error) {
	w, p := r.w, &job.Payload
	timeout := w.opts.Timeout
	if h != nil && h.timeout > 0 {
		timeout = h.timeout
	}
	if p.Timeout != nil {
		s := int64(*p.Timeout)
		if s < 0 || s > maxPayloadSeconds {
			return timeout, payloadLimitErr(job, "timeout", fmt.Sprint(s), "a whole number of seconds from 0 (null and 0 take the worker's Timeout)")
		}
		if s > 0 {
			timeout = time.Duration(s) * time.Second
		}
	}
	if limit := w.q.RetryAfter() - TimeoutMargin; timeout > limit {
		w.log.Warn("job timeout capped below retry_after so it never runs twice", "id", job.ID, "timeout", timeout, "capped", limit)
		timeout = limit
	}
	return timeout, nil
}

// checkBackoff refuses a payload backoff with a delay that is negative or
// longer than MaxDelay: it could only be written as a wrapped or
// negative time, and its release would fail on every attempt.
func checkBackoff(job *dbqueue.Job) error {
	for _, s := range job.Payload.Backoff {
		if s < 0 || int64(s) > maxPayloadSeconds {
			return payloadLimitErr(job, "backoff", fmt.Sprint(s), "whole numbers of seconds from 0")
		}
	}
	return nil
}

// payloadLimitErr says which payload field is out of range, quoting it as
// the producer wrote it (the decoded number may already have been cut to
// fit an int).
func payloadLimitErr(job *dbqueue.Job, field, decoded, allowed string) error {
	value := decoded
	var fields map[string]json.RawMessage
	if json.Unmarshal(job.RawPayload, &fields) == nil && len(fields[field]) > 0 {
		value = string(fields[field])
	}
	return fmt.Errorf("job %q: payload %q is %s: must be %s to %d (100 years); fix the producer that pushed it: %w",
		job.Name(), field, value, allowed, maxPayloadSeconds, ErrPayloadLimit)
}

// backoff is Laravel's calculateBackoff: the payload's backoff, else the
// handler's, else the worker's, indexed by attempts-1 with the last value
// repeating.
func (r *run) backoff(job *dbqueue.Job, h *handler) time.Duration {
	if len(job.Payload.Backoff) > 0 {
		return job.Payload.Backoff.Delay(job.Attempts)
	}
	b := r.w.opts.Backoff
	if h != nil && h.backoff != nil {
		b = h.backoff
	}
	if len(b) == 0 {
		return 0
	}
	return b[min(max(job.Attempts-1, 0), len(b)-1)]
}

// fail moves the job to failed_jobs and then calls the handler's failure
// callback and the JobFailed hook, once.
func (r *run) fail(job *dbqueue.Job, h *handler, took time.Duration, cause error) {
	r.failAs(job, h, took, cause, "failed")
}

// failAs is fail, logged with outcome ("cancelled" for Cancel).
func (r *run) failAs(job *dbqueue.Job, h *handler, took time.Duration, cause error, outcome string) {
	w, ctx := r.w, r.jobCtx
	var err error
	if w.ops.Linked(job) {
		err = r.finishLinked(job, cause) // also counts its batch
	} else {
		err = r.persist(ctx, job, func(ctx context.Context) error { return w.q.Fail(ctx, job, cause) })
	}
	r.logJob(job, took, outcome, errors.Join(cause, err))
	if err != nil {
		return // not recorded: the job comes back after retry_after
	}
	r.count(job, countFailed, took, took > 0)
	r.failed(job, h, cause)
}

// failed calls the handler's failure callback and the JobFailed hook of a
// job moved to failed_jobs.
func (r *run) failed(job *dbqueue.Job, h *handler, cause error) {
	w, ctx := r.w, r.jobCtx
	if h != nil && h.failed != nil {
		func() {
			defer func() {
				if v := recover(); v != nil {
					w.log.Error("failure callback panicked", "id", job.ID, "panic", v)
				}
			}()
			h.failed(context.WithoutCancel(ctx), job, cause)
		}()
	}
	if fn := w.opts.Events.JobFailed; fn != nil {
		fn(ctx, job, cause)
	}
}
