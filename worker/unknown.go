package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/dbqueue/dbqueue"
)

// unknownKind handles a job whose name has no handler on this worker. In
// a rolling deploy, a worker of the old version takes jobs of kinds only
// the new version knows; failing them would lose them to failed_jobs, and
// counting their attempts would spend the tries they need on the worker
// that has the handler (one, by default). So the job is released for
// UnknownKindBackoff with its attempt given back, as a snooze is, until
// UnknownKindWait has passed since it was pushed (its created_at, by the
// database's clock) or its retryUntil has passed: then no handler came,
// and it is failed with an error naming its kind.
func (r *run) unknownKind(job *dbqueue.Job, dbNow dbClock) {
	w, p, ctx := r.w, &job.Payload, r.jobCtx
	now := dbNow.now()
	waited := now.Sub(job.CreatedAt).Truncate(time.Second)
	switch {
	case p.RetryUntil != nil && now.Unix() >= *p.RetryUntil:
		// The name unquoted: Laravel's are full of backslashes.
		r.fail(job, nil, 0, fmt.Errorf("job %s (worker %q): its retryUntil passed while no worker with its handler took it: %w",
			job.Name(), w.opts.Name, ErrUnknownJob))
		return
	case waited >= w.opts.UnknownKindWait:
		r.fail(job, nil, 0, fmt.Errorf("job %s (worker %q): no worker with its handler took it in the %v since it was pushed (Options.UnknownKindWait %v): deploy a worker that handles %s, or register it here: %w",
			job.Name(), w.opts.Name, waited, w.opts.UnknownKindWait, job.Name(), ErrUnknownJob))
		return
	}
	delay := w.opts.UnknownKindBackoff
	err := r.persist(ctx, job, func(ctx context.Context) error { return txOpsOf(w.q).Snooze(ctx, job, delay) })
	r.logJob(job, 0, "released, attempt given back: no handler for its name on this worker", err, "delay", delay)
	if err == nil {
		r.count(job, countReleased, 0, false)
	}
	if fn := w.opts.Events.JobReleased; fn != nil && err == nil {
		fn(ctx, job, delay)
	}
}
