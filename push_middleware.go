package dbqueue

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// PushFunc writes jobs and returns their ids in order: what a
// PushMiddleware calls to go on with the push.
type PushFunc func(ctx context.Context, jobs []NewJob) ([]int64, error)

// PushMiddleware runs around every push of a queue — Push, PushMany,
// PushTx, dbqpgx.PushTx and the PushUnique forms alike — so that what every job should carry is
// added in one place rather than at each call site: a trace id or tenant
// in the headers (NewJob.SetHeader), a default queue per job name, a log
// line or a metric with the ids that came back. It may change the jobs
// (the slice is the push's own copy; set headers with SetHeader, which
// never writes into the caller's map), refuse the push by returning an
// error without calling next, or call next with other jobs. Whatever ids
// it returns are what the caller gets, one per job it was given.
//
// A middleware runs once per push with all of that push's jobs, never per
// job: PushMany of 10,000 jobs calls it once.
type PushMiddleware func(ctx context.Context, jobs []NewJob, next PushFunc) ([]int64, error)

// WithPushMiddleware adds push middleware to the queue. The first given
// is the outermost: it sees the jobs first and the ids last. A queue
// without push middleware pushes exactly as before, with no extra copy or
// call.
func WithPushMiddleware(m ...PushMiddleware) Option {
	return func(q *Queue) error {
		for _, fn := range m {
			if fn == nil {
				return errors.New("dbqueue: WithPushMiddleware: nil middleware")
			}
		}
		q.pushMiddleware = append(q.pushMiddleware, m...)
		return nil
	}
}

// throughMiddleware runs jobs through the queue's push middleware and then
// push. The middleware get a copy of the caller's slice, and the ids
// returned must be one per job the caller gave.
func (q *Queue) throughMiddleware(ctx context.Context, jobs []NewJob, push PushFunc) ([]int64, error) {
	next := push
	for i := len(q.pushMiddleware) - 1; i >= 0; i-- {
		m, inner := q.pushMiddleware[i], next
		next = func(ctx context.Context, jobs []NewJob) ([]int64, error) { return m(ctx, jobs, inner) }
	}
	ids, err := next(ctx, slices.Clone(jobs))
	if err != nil {
		return nil, err
	}
	if len(ids) != len(jobs) {
		return nil, fmt.Errorf("dbqueue: push middleware returned %d ids for %d jobs: a middleware must push every job it is given, or fail", len(ids), len(jobs))
	}
	return ids, nil
}
