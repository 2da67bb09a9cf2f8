package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dbqueue/dbqueue"
)

// HandlerFunc runs one job. Returning nil deletes the job; an error retries
// it (or fails it when out of tries); ReleaseAfter, FailNow and Discard
// say what to do instead. The context ends at the job's timeout and when
// the worker stops.
type HandlerFunc func(ctx context.Context, job *dbqueue.Job) error

// FailedFunc is called once when a job is finally failed, like a Laravel
// job's failed() method: to notify someone, or undo partial work.
type FailedFunc func(ctx context.Context, job *dbqueue.Job, cause error)

type handler struct {
	run        HandlerFunc
	failed     FailedFunc
	middleware []Middleware // WithMiddleware's, wrapped into run by Handle
}

// HandlerOption configures a registered handler.
type HandlerOption func(*handler)

// OnFailure sets the handler's failure callback.
func OnFailure(fn FailedFunc) HandlerOption {
	return func(h *handler) { h.failed = fn }
}

// Handle registers the handler for jobs named name (for Laravel string
// jobs, "Class@method"; for Laravel object jobs, the class name). It panics
// on an empty name, a nil handler or a name registered twice, as
// http.ServeMux does: those are programming errors.
func (w *Worker) Handle(name string, fn HandlerFunc, opts ...HandlerOption) {
	if name == "" {
		panic("worker: Handle with an empty job name")
	}
	if fn == nil {
		panic("worker: Handle(" + name + ") with a nil handler")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, dup := w.handlers[name]; dup {
		panic("worker: a handler for " + name + " is already registered")
	}
	h := &handler{run: fn}
	for _, opt := range opts {
		opt(h)
	}
	if slices.ContainsFunc(h.middleware, isNilMiddleware) {
		panic("worker: Handle(" + name + ") with a nil middleware")
	}
	h.run = chain(h.run, w.opts.Middleware, h.middleware)
	w.handlers[name] = h
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
)

func (o *outcome) Error() string {
	switch o.kind {
	case outcomeRelease:
		return fmt.Sprintf("release after %v", o.delay)
	case outcomeFail:
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
