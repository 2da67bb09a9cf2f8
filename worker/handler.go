package worker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/dbqueue/dbqueue"
)

// HandlerFunc runs one job. Returning nil deletes the job; an error retries
// it (or fails it when out of tries); ReleaseAfter, Snooze, FailNow,
// Cancel and Discard say what to do instead. The context ends at the job's timeout and when
// the worker stops, and once the job is finished.
//
// Handlers run on the worker's own long-lived goroutines, one after
// another, not on a goroutine per job: a handler that changes its
// goroutine (runtime.LockOSThread, pprof labels via pprof.SetGoroutineLabels)
// must undo it before it returns. Work a handler starts with go statements
// is its own; the context it was given ends with the job.
type HandlerFunc func(ctx context.Context, job *dbqueue.Job) error

// FailedFunc is called once when a job is finally failed, like a Laravel
// job's failed() method: to notify someone, or undo partial work.
type FailedFunc func(ctx context.Context, job *dbqueue.Job, cause error)

type handler struct {
	run    HandlerFunc
	failed FailedFunc
	// The handler's own defaults, used when the payload has none: a
	// payload beats its handler, which beats the worker's Options.
	tries      *int // 0: unlimited
	timeout    time.Duration
	backoff    []time.Duration
	optErr     error        // an option out of range, reported by Handle
	middleware []Middleware // WithMiddleware's, wrapped into run by Handle
}

// HandlerOption configures a registered handler.
type HandlerOption func(*handler)

// OnFailure sets the handler's failure callback.
func OnFailure(fn FailedFunc) HandlerOption {
	return func(h *handler) { h.failed = fn }
}

// WithTries sets how many attempts the handler's jobs get when their
// payload does not say: a kind whose work is flaky can retry more than the
// worker's Options.Tries without every push repeating it. Unlimited gives
// unlimited attempts. A payload's maxTries still wins.
func WithTries(n int) HandlerOption {
	return func(h *handler) {
		switch {
		case n == Unlimited:
			n = 0 // Laravel's 0
		case n <= 0:
			h.optErr = errors.Join(h.optErr, fmt.Errorf("WithTries(%d): use a positive count, or worker.Unlimited", n))
			return
		}
		h.tries = &n
	}
}

// WithTimeout sets how long one attempt of the handler's jobs may run when
// their payload does not say: a slow kind gets longer than the worker's
// Options.Timeout without raising it for every kind. It must be
// TimeoutMargin shorter than the queue's retry_after, or a slow job would
// be taken by a second worker while it runs. A payload's timeout still
// wins.
func WithTimeout(d time.Duration) HandlerOption {
	return func(h *handler) {
		if d <= 0 || d > MaxDelay {
			h.optErr = errors.Join(h.optErr, fmt.Errorf("WithTimeout(%v): must be more than 0 and at most %v (100 years)", d, MaxDelay))
			return
		}
		h.timeout = d
	}
}

// WithBackoff sets the delays before the retries of the handler's jobs
// when their payload has none (the last repeats), instead of the worker's
// Options.Backoff; WithBackoff() with none retries at once. A payload's
// backoff still wins.
func WithBackoff(delays ...time.Duration) HandlerOption {
	return func(h *handler) {
		for _, d := range delays {
			if d < 0 || d > MaxDelay {
				h.optErr = errors.Join(h.optErr, fmt.Errorf("WithBackoff(%v): each delay must be from 0 to %v (100 years)", d, MaxDelay))
				return
			}
		}
		h.backoff = append([]time.Duration{}, delays...) // empty: retry at once
	}
}

// Handle registers the handler for jobs named name (for Laravel string
// jobs, "Class@method"; for Laravel object jobs, the class name). It panics
// on an empty name, a nil handler, a name registered twice or an option
// out of range (a WithTimeout too close to retry_after), as http.ServeMux
// does: those are programming errors.
func (w *Worker) Handle(name string, fn HandlerFunc, opts ...HandlerOption) {
	if name == "" {
		panic("worker: Handle with an empty job name")
	}
	if fn == nil {
		panic("worker: Handle(" + name + ") with a nil handler")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, dup := w.handlerMap()[name]; dup {
		panic("worker: a handler for " + name + " is already registered")
	}
	h := &handler{run: fn}
	for _, opt := range opts {
		opt(h)
	}
	if h.timeout > 0 && h.timeout+TimeoutMargin > w.q.RetryAfter() {
		h.optErr = errors.Join(h.optErr, fmt.Errorf("WithTimeout(%v) must be at least %v shorter than the queue's retry_after %v, or a slow job is taken by a second worker while the first still runs it: lower it or raise dbqueue.WithRetryAfter", h.timeout, TimeoutMargin, w.q.RetryAfter()))
	}
	if h.optErr != nil {
		panic("worker: Handle(" + name + "): " + h.optErr.Error())
	}
	if slices.ContainsFunc(h.middleware, isNilMiddleware) {
		panic("worker: Handle(" + name + ") with a nil middleware")
	}
	h.run = chain(h.run, w.opts.Middleware, h.middleware)
	handlers := maps.Clone(w.handlerMap())
	if handlers == nil {
		handlers = map[string]*handler{}
	}
	handlers[name] = h
	w.handlers.Store(&handlers)
}

// HandleJSON registers a handler that gets the job's JSON data decoded into
// a T. Data that does not decode fails the job at once (retrying cannot
// fix it), with the decode error.
func HandleJSON[T any](w *Worker, name string, fn func(ctx context.Context, job *dbqueue.Job, data T) error, opts ...HandlerOption) {
	w.Handle(name, func(ctx context.Context, job *dbqueue.Job) error {
		var data T
		if err := job.Decode(&data); err != nil {
			return FailNow(err)
		}
		return fn(ctx, job, data)
	}, opts...)
}

// Register registers the handler of a typed job kind (see
// dbqueue.JobArgs): the kind is T's zero value's Kind(), so the handler and
// dbqueue.PushArgs cannot disagree on the name, and the job's data is
// decoded into a T. Data that does not decode fails the job at once, as
// with HandleJSON. It panics as Handle does, and when T's Kind() is empty.
func Register[T dbqueue.JobArgs](w *Worker, fn func(ctx context.Context, job *dbqueue.Job, args T) error, opts ...HandlerOption) {
	var zero T
	kind := kindOf(zero)
	if kind == "" {
		panic(fmt.Sprintf("worker: Register[%T]: Kind() of its zero value is empty: return a constant kind", zero))
	}
	HandleJSON(w, kind, fn, opts...)
}

// kindOf calls Kind on a zero value, turning the panic of a Kind that
// reads a nil receiver into one that says what to change.
func kindOf(args dbqueue.JobArgs) (kind string) {
	defer func() {
		if v := recover(); v != nil {
			panic(fmt.Sprintf("worker: Register[%T]: Kind() panicked on the zero value (%v): Kind must return a constant without reading its receiver", args, v))
		}
	}()
	return args.Kind()
}

// outcome is what a handler asked for instead of the default.
type outcome struct {
	kind  outcomeKind
	delay time.Duration
	cause error
}

type outcomeKind int

const (
	outcomeRelease outcomeKind = iota + 1
	outcomeFail
	outcomeDiscard
	outcomeSnooze
	outcomeCancel
)

func (o *outcome) Error() string {
	switch o.kind {
	case outcomeRelease:
		return fmt.Sprintf("release after %v", o.delay)
	case outcomeSnooze:
		return fmt.Sprintf("snooze for %v", o.delay)
	case outcomeFail, outcomeCancel:
		if o.cause == nil {
			return "failed"
		}
		return o.cause.Error()
	default:
		return "discard"
	}
}

func (o *outcome) Unwrap() error { return o.cause }

// ReleaseAfter, returned by a handler, puts the job back to run again after
// delay without counting an exception (Laravel's $this->release($delay)):
// for rate limits and "not yet" conditions. The attempt still counts
// towards tries. A negative delay is 0; a delay longer than MaxDelay (100
// years) is MaxDelay.
func ReleaseAfter(delay time.Duration) error {
	return &outcome{kind: outcomeRelease, delay: min(max(delay, 0), MaxDelay)}
}

// FailNow, returned by a handler, fails the job at once whatever tries
// remain (Laravel's $this->fail($e)).
func FailNow(cause error) error {
	if cause == nil {
		cause = errors.New("failed by handler")
	}
	return &outcome{kind: outcomeFail, cause: cause}
}

// Discard, returned by a handler, deletes the job without running it again
// and without failing it (Laravel's $this->delete()).
func Discard() error { return &outcome{kind: outcomeDiscard} }

// Snooze, returned by a handler, puts the job back to run again after d
// and takes its attempt back (River's JobSnooze): for a job that waits for
// something, which may snooze any number of times without running out of
// tries or counting an exception. A negative d is 0; one longer than
// MaxDelay is MaxDelay.
func Snooze(d time.Duration) error {
	return &outcome{kind: outcomeSnooze, delay: min(max(d, 0), MaxDelay)}
}

// Cancel, returned by a handler, ends the job without a retry because it
// should not run (River's JobCancel): it goes to failed_jobs with the
// exception "dbqueue: cancelled by its handler: reason"
// (dbqueue.ErrCancelled), where an operator sees it and may still retry
// it, and the failure hooks run with that cause. A batched job counts as
// failed; a chain stops.
func Cancel(reason string) error {
	return &outcome{kind: outcomeCancel, cause: dbqueue.Cancelled(reason)}
}
