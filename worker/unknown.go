package worker

import (
	"fmt"

	"github.com/dbqueue/dbqueue"
)

// unknownKind handles a job whose name has no handler on this worker. In
// a rolling deploy, a worker of the old version takes jobs of kinds only
// the new version knows; failing them would lose them to failed_jobs, so
// the job is released for UnknownKindBackoff, for a worker that has the
// handler. The attempt counts: a job no worker handles is failed when its
// tries run out or its retryUntil passes, with an error naming it.
func (r *run) unknownKind(job *dbqueue.Job, maxTries int, dbNow dbClock) {
	w, p, ctx := r.w, &job.Payload, r.jobCtx
	if p.RetryUntil != nil && dbNow.now().Unix() >= *p.RetryUntil ||
		p.RetryUntil == nil && maxTries > 0 && job.Attempts >= maxTries {
		tries := "unlimited"
		if maxTries > 0 {
			tries = fmt.Sprint(maxTries)
		}
		// The name unquoted: Laravel's are full of backslashes.
		r.fail(job, nil, 0, fmt.Errorf("job %s (attempt %d of %s, worker %q): %w",
			job.Name(), job.Attempts, tries, w.opts.Name, ErrUnknownJob))
		return
	}
	delay := w.opts.UnknownKindBackoff
	failed, err := r.release(job, nil, 0, delay, nil, fmt.Errorf("job %s: %w", job.Name(), ErrUnknownJob))
	if failed {
		return
	}
	r.logJob(job, 0, "released: no handler for its name on this worker", err, "delay", delay)
	if err == nil {
		r.count(job, countReleased, 0, false)
	}
	if fn := w.opts.Events.JobReleased; fn != nil && err == nil {
		fn(ctx, job, delay)
	}
}
