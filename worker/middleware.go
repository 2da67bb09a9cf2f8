package worker

import (
	"errors"
	"slices"
)

// Middleware wraps a handler with work that many handlers share — rate
// limits, locks, skipping, tracing, logging — so each handler keeps to its
// own job (River's worker middleware, Laravel's job middleware). It gets
// the next handler in the chain and returns the handler to run instead.
// What it returns is what the worker acts on, as from a handler: nil
// deletes the job, an error retries or fails it, and ReleaseAfter,
// FailNow and Discard work the same from a middleware, with or without
// calling next (a rate limit returns ReleaseAfter without running the
// job at all).
//
// Package github.com/dbqueue/dbqueue/middleware has the ones Laravel
// ships: RateLimited, WithoutOverlapping, ThrottlesExceptions, SkipIf.
type Middleware func(next HandlerFunc) HandlerFunc

// WithMiddleware adds middleware to one handler. They run inside the
// worker's own (Options.Middleware), in the order given, the first
// outermost; repeating the option appends. The order of a job's run is:
//
//	Options.Middleware[0] → Options.Middleware[1] → … →
//	WithMiddleware[0] → WithMiddleware[1] → … → the handler
//
// and what each returns goes back out the same way.
func WithMiddleware(m ...Middleware) HandlerOption {
	return func(h *handler) { h.middleware = append(h.middleware, m...) }
}

// chain wraps fn in the worker's middleware, then the handler's, the
// first outermost. It is done once, when the handler is registered: a
// handler with no middleware is called directly, at no cost.
func chain(fn HandlerFunc, worker, own []Middleware) HandlerFunc {
	all := slices.Concat(worker, own)
	for i := len(all) - 1; i >= 0; i-- {
		fn = all[i](fn)
		if fn == nil {
			panic("worker: a middleware returned a nil handler")
		}
	}
	return fn
}

// IsOutcome reports whether err is a decision made with ReleaseAfter,
// FailNow or Discard rather than an exception: a middleware that counts
// failures (ThrottlesExceptions) counts only the errors for which it is
// false.
func IsOutcome(err error) bool {
	var o *outcome
	return errors.As(err, &o)
}

func isNilMiddleware(m Middleware) bool { return m == nil }
