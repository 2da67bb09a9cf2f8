package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dbqueue/dbqueue"
)

// BatchCallbacks are what workers do as a batch (dbqueue.Queue.Batch)
// moves, Laravel's then, catch and finally as Go functions. Each fires
// once per batch across every worker: the worker whose transaction counts
// the job that crosses the line fires it, right after that transaction
// commits. A worker that dies between the commit and the call loses that
// call (as a Laravel worker would): keep callbacks to what may be skipped
// or repeated by hand, and register the same ones on every worker that
// serves the batch's queues, since any of them may be the one.
type BatchCallbacks struct {
	// Then runs when every job of the batch has succeeded (never for a
	// cancelled batch).
	Then func(ctx context.Context, b *dbqueue.Batch)
	// Catch runs at the batch's first failure, with the job and the cause.
	// Without AllowFailures that failure has just cancelled the batch.
	Catch func(ctx context.Context, b *dbqueue.Batch, job *dbqueue.Job, cause error)
	// Finally runs when every job has run, successfully or not
	// (b.Done()), after Then or Catch.
	Finally func(ctx context.Context, b *dbqueue.Batch)
}

// OnBatch registers the callbacks for batches named name
// (dbqueue.BatchOptions.Name), replacing any registered before. Call it
// before Run, as Handle.
func (w *Worker) OnBatch(name string, cb BatchCallbacks) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.batchCallbacks == nil {
		w.batchCallbacks = map[string]BatchCallbacks{}
	}
	w.batchCallbacks[name] = cb
}

func (w *Worker) callbacksFor(name string) (BatchCallbacks, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	cb, ok := w.batchCallbacks[name]
	return cb, ok
}

// complete writes a successful job's end: unlinked jobs go to the batched
// deletes; a chain link or batch job is finished in its own transaction,
// which also pushes the chain's next job and counts the batch. A success
// that can never be written (its chain's next link is unusable) fails the
// job instead, saying the handler succeeded; complete then reports false.
func (r *run) complete(job *dbqueue.Job, h *handler, took time.Duration) bool {
	if !r.w.ops.Linked(job) {
		r.done.add(job)
		return true
	}
	err := r.finishLinked(job, nil)
	if !r.w.recurs(err) {
		return true
	}
	r.fail(job, h, took, successUnwritable(job, err))
	return false
}

// finishLinked ends a linked job (cause nil: success), retrying database
// trouble while its reservation lasts, then fires the batch callbacks its
// count crossed.
func (r *run) finishLinked(job *dbqueue.Job, cause error) error {
	ctx := r.jobCtx
	var before, after *dbqueue.Batch
	err := r.persist(ctx, job, func(ctx context.Context) (err error) {
		before, after, err = r.w.ops.FinishLinked(ctx, job, cause)
		return err
	})
	if err != nil {
		switch {
		case errors.Is(err, dbqueue.ErrNotHeld):
			r.logJob(job, 0, "finished, but no longer held (reclaimed after retry_after): it may run again", err)
		case cause == nil && !r.w.recurs(err):
			r.logJob(job, 0, "not finished: it runs again after retry_after", err)
		}
		return err
	}
	if after != nil {
		r.batchMoved(job, before, after, cause)
	}
	return nil
}

// batchMoved fires the callbacks of the lines one count crossed. The
// count was read and written under the batch row's lock, so exactly one
// finishing job sees each line crossed.
func (r *run) batchMoved(job *dbqueue.Job, before, after *dbqueue.Batch, cause error) {
	then := cause == nil && before.PendingJobs > 0 && after.PendingJobs == 0 && !before.Finished()
	catch := cause != nil && before.FailedJobs == 0 && after.FailedJobs > 0
	finally := !before.Done() && after.Done()
	if !then && !catch && !finally {
		return
	}
	cb, ok := r.w.callbacksFor(after.Name)
	r.w.log.Info("batch", "id", after.ID, "name", after.Name, "then", then, "catch", catch, "finally", finally,
		"pending", after.PendingJobs, "failed", after.FailedJobs, "callbacks", ok)
	if !ok {
		return
	}
	ctx := context.WithoutCancel(r.jobCtx)
	call := func(which string, fn func()) {
		defer func() {
			if v := recover(); v != nil {
				r.w.log.Error("batch callback panicked", "id", after.ID, "name", after.Name, "callback", which, "panic", v)
			}
		}()
		fn()
	}
	if catch && cb.Catch != nil {
		call("catch", func() { cb.Catch(ctx, after, job, cause) })
	}
	if then && cb.Then != nil {
		call("then", func() { cb.Then(ctx, after) })
	}
	if finally && cb.Finally != nil {
		call("finally", func() { cb.Finally(ctx, after) })
	}
}

// batchCancelled reports whether job's batch was cancelled, so the job is
// discarded without running. A batch seen cancelled stays so; one that
// cannot be read lets the job run (at worst it runs, as it would have
// before the cancel).
func (r *run) batchCancelled(job *dbqueue.Job) bool {
	id := job.Payload.BatchID
	if id == "" {
		return false
	}
	if _, ok := r.w.cancelledBatches.Load(id); ok {
		return true
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.jobCtx), reserveTimeout)
	defer cancel()
	b, err := r.w.q.FindBatch(ctx, id)
	switch {
	case errors.Is(err, dbqueue.ErrBatchNotFound):
		return false // pruned: the job runs uncounted
	case err != nil:
		r.w.log.Warn("cannot read the job's batch; running the job", "id", job.ID, "batch", id, "error", err)
		return false
	case b.Cancelled():
		r.w.cancelledBatches.Store(id, true)
		return true
	}
	return false
}

// discardCancelled deletes a job of a cancelled batch without running it,
// counted as processed in the batch, as Laravel's cancelled batch jobs
// return at once.
func (r *run) discardCancelled(job *dbqueue.Job, h *handler) {
	err := r.finishLinked(job, nil)
	if r.w.recurs(err) {
		r.fail(job, h, 0, fmt.Errorf("%s: its batch was cancelled, so it was to be discarded, but %w: %w", job.Name(), ErrUnwritable, err))
		return
	}
	r.logDone(job, 0, "discarded: its batch was cancelled", err)
	if err == nil {
		r.count(job, countProcessed, 0, false)
	}
	if fn := r.w.opts.Events.JobProcessed; fn != nil && err == nil {
		fn(r.jobCtx, job, time.Duration(0))
	}
}
