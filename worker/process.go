package worker

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/dbqueue/dbqueue"
)

// The errors a worker records in failed_jobs for its own reasons.
var (
	// ErrMaxAttempts: the job was reserved again with its tries spent or
	// its retryUntil passed — its last holder died or timed out (Laravel's
	// MaxAttemptsExceededException).
	ErrMaxAttempts = errors.New("has been attempted too many times or run too long; the job may have previously timed out")
	// ErrTimeout: the job ran past its timeout (Laravel's TimeoutExceededException).
	ErrTimeout = errors.New("has timed out")
	// ErrUnknownJob: no handler is registered for the job's name.
	ErrUnknownJob = errors.New("no handler is registered for this job name: register one with worker.Handle, or push it to a queue another worker serves")
)

// result is what a handler goroutine returned.
type result struct {
	err  error
	took time.Duration
}

// process runs one job the way Laravel's Worker::process does.
func (r *run) process(job *dbqueue.Job) {
	w := r.w
	received := time.Now()
	// The database's clock at reservation, moved on by our monotonic clock.
	dbNow := func() time.Time { return job.ReservedAt.Add(time.Since(received)) }
	ev := w.opts.Events
	ctx := r.jobCtx

	if fn := ev.JobProcessing; fn != nil {
		fn(ctx, job)
	}
	p := &job.Payload
	maxTries := w.opts.Tries
	if p.MaxTries != nil {
		maxTries = *p.MaxTries
	}
	h := w.handlerFor(job)

	// markJobAsFailedIfAlreadyExceedsMaxAttempts: the last holder died or
	// timed out with this job on its last try.
	if p.RetryUntil != nil {
		if dbNow().Unix() > *p.RetryUntil {
			r.fail(job, h, 0, fmt.Errorf("%s %w", job.Name(), ErrMaxAttempts))
			return
		}
	} else if maxTries > 0 && job.Attempts > maxTries {
		r.fail(job, h, 0, fmt.Errorf("%s %w", job.Name(), ErrMaxAttempts))
		return
	}
	if h == nil {
		r.fail(job, nil, 0, fmt.Errorf("job %q: %w", job.Name(), ErrUnknownJob))
		return
	}

	timeout := w.opts.Timeout
	if p.Timeout != nil && *p.Timeout > 0 {
		timeout = p.Timeout.Duration()
	}
	if limit := w.q.RetryAfter() - TimeoutMargin; timeout > limit {
		w.log.Warn("job timeout capped below retry_after so it never runs twice", "id", job.ID, "timeout", timeout, "capped", limit)
		timeout = limit
	}
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		var err error
		defer func() {
			if v := recover(); v != nil {
				err = fmt.Errorf("panic: %v\n%s", v, debug.Stack())
			}
			done <- result{err: err, took: time.Since(start)}
		}()
		err = h.run(hctx, job)
	}()

	var res result
	select {
	case res = <-done:
	case <-hctx.Done():
		// Past the timeout (or the grace period): give the handler a
		// moment to notice its context before deciding without it.
		abandon := time.NewTimer(abandonAfter)
		select {
		case res = <-done:
			abandon.Stop()
		case <-abandon.C:
			r.stuck.Add(1)
			failed := r.timedOut(job, h, maxTries, time.Since(start), dbNow, false)
			w.log.Error("handler ignores its context; its goroutine is held until it returns", "id", job.ID, "name", job.Name())
			late := <-done
			r.stuck.Add(-1)
			if !failed && late.err == nil {
				// It finished after all while its reservation still stood:
				// the work is done, so do not run it again.
				err := r.persist(ctx, job, func() error { return w.q.Delete(context.WithoutCancel(ctx), job) })
				r.logJob(job, late.took, "done late", err)
			}
			return
		}
	}

	var o *outcome
	errors.As(res.err, &o)
	switch {
	case res.err == nil:
		r.done.add(job)
		r.logJob(job, res.took, "done", nil)
		if fn := ev.JobProcessed; fn != nil {
			fn(ctx, job, res.took)
		}
	case o != nil && o.kind == outcomeDiscard:
		r.done.add(job)
		r.logJob(job, res.took, "deleted", nil)
		if fn := ev.JobProcessed; fn != nil {
			fn(ctx, job, res.took)
		}
	case o != nil && o.kind == outcomeRelease:
		err := r.persist(ctx, job, func() error { return r.releases.release(context.WithoutCancel(ctx), job, o.delay, nil) })
		r.logJob(job, res.took, "released", err, "delay", o.delay)
		if fn := ev.JobReleased; fn != nil && err == nil {
			fn(ctx, job, o.delay)
		}
	case o != nil && o.kind == outcomeFail:
		r.fail(job, h, res.took, o.cause)
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
func (r *run) exception(job *dbqueue.Job, h *handler, maxTries int, res result, dbNow func() time.Time) {
	w, p, ctx := r.w, &job.Payload, r.jobCtx
	if fn := w.opts.Events.JobExceptionOccurred; fn != nil {
		fn(ctx, job, res.err)
	}
	exceptions := p.Exceptions + 1
	switch {
	case p.RetryUntil != nil && dbNow().Unix() >= *p.RetryUntil,
		p.RetryUntil == nil && maxTries > 0 && job.Attempts >= maxTries,
		p.MaxExceptions != nil && *p.MaxExceptions > 0 && exceptions >= *p.MaxExceptions:
		r.fail(job, h, res.took, res.err)
		return
	}
	delay := r.backoff(job)
	var err error
	if p.MaxExceptions != nil {
		payload, perr := r.w.ext.WithKey(job.RawPayload, "exceptions", exceptions)
		if perr != nil {
			err = perr
		} else {
			err = r.persist(ctx, job, func() error {
				return r.releases.release(context.WithoutCancel(ctx), job, delay, payload)
			})
		}
	} else {
		err = r.persist(ctx, job, func() error { return r.releases.release(context.WithoutCancel(ctx), job, delay, nil) })
	}
	r.logJob(job, res.took, "released after error", err, "delay", delay, "cause", res.err)
	if fn := w.opts.Events.JobReleasedAfterException; fn != nil && err == nil {
		fn(ctx, job, delay)
	}
}

// timedOut handles a job that ran past its timeout: failed when it has
// failOnTimeout, its tries are spent or its retryUntil passed; otherwise
// released with its backoff when the handler returned, or left reserved
// (back after retry_after) when the handler is still running.
func (r *run) timedOut(job *dbqueue.Job, h *handler, maxTries int, took time.Duration, dbNow func() time.Time, returned bool) (failed bool) {
	w, p, ctx := r.w, &job.Payload, r.jobCtx
	if fn := w.opts.Events.JobTimedOut; fn != nil {
		fn(ctx, job)
	}
	cause := fmt.Errorf("%s %w", job.Name(), ErrTimeout)
	if p.FailOnTimeout ||
		p.RetryUntil != nil && dbNow().Unix() >= *p.RetryUntil ||
		p.RetryUntil == nil && maxTries > 0 && job.Attempts >= maxTries {
		r.fail(job, h, took, cause)
		return true
	}
	if !returned {
		r.logJob(job, took, "timed out, left reserved until retry_after", cause)
		return false
	}
	delay := r.backoff(job)
	err := r.persist(ctx, job, func() error { return r.releases.release(context.WithoutCancel(ctx), job, delay, nil) })
	r.logJob(job, took, "timed out, released", errors.Join(cause, err), "delay", delay)
	if fn := w.opts.Events.JobReleasedAfterException; fn != nil && err == nil {
		fn(ctx, job, delay)
	}
	return false
}

// backoff is Laravel's calculateBackoff: the payload's backoff, else the
// worker's, indexed by attempts-1 with the last value repeating.
func (r *run) backoff(job *dbqueue.Job) time.Duration {
	if len(job.Payload.Backoff) > 0 {
		return job.Payload.Backoff.Delay(job.Attempts)
	}
	b := r.w.opts.Backoff
	if len(b) == 0 {
		return 0
	}
	return b[min(max(job.Attempts-1, 0), len(b)-1)]
}

// fail moves the job to failed_jobs and then calls the handler's failure
// callback and the JobFailed hook, once.
func (r *run) fail(job *dbqueue.Job, h *handler, took time.Duration, cause error) {
	w, ctx := r.w, r.jobCtx
	err := r.persist(ctx, job, func() error { return w.q.Fail(context.WithoutCancel(ctx), job, cause) })
	r.logJob(job, took, "failed", errors.Join(cause, err))
	if err != nil {
		return // not recorded: the job comes back after retry_after
	}
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
