package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// Release batching: jobs put back with a delay (after an error, a timeout,
// or ReleaseAfter) are gathered for up to releaseDelay and written with one
// ReleaseMany, each still checked against its own reservation. A runner
// waits for its own job's outcome, so its log line and events still follow
// the write, and a failed write is retried by the runner (persist).
const (
	releaseBatch = 500
	releaseDelay = 2 * time.Millisecond
	// flushTimeout bounds one batch's write, so a hung connection cannot
	// hold every runner's release; the runners' persist retries it.
	flushTimeout = 30 * time.Second
)

type releaser struct {
	q     *dbqueue.Queue
	batch *batcher[releaseReq]
	// writeCtx, when set, is the context of each batch's write (run.writeCtx,
	// which a stopping worker cuts); otherwise flushTimeout bounds it.
	writeCtx func() (context.Context, context.CancelFunc)
	// flushed, when set (by tests), hears the size of each batch written.
	flushed func(n int)
}

type releaseReq struct {
	r   dbqueue.Releasing
	err chan error
}

func newReleaser(q *dbqueue.Queue, writeCtx func() (context.Context, context.CancelFunc)) *releaser {
	return startReleaser(&releaser{q: q, writeCtx: writeCtx})
}

func startReleaser(rl *releaser) *releaser {
	rl.batch = newBatcher(releaseBatch, releaseDelay, rl.flush)
	return rl
}

// release puts job back after delay, with payload replacing its own when
// not nil and cause (when not nil) added to its error history, and
// returns when that is written.
func (rl *releaser) release(ctx context.Context, job *dbqueue.Job, delay time.Duration, payload []byte, cause error) error {
	if delay < 0 || payload != nil {
		// Checked here so one bad request cannot fail a whole batch.
		if delay < 0 {
			return recurring{fmt.Errorf("worker: release job %d: negative delay %v", job.ID, delay)}
		}
		if _, err := dbqueue.DecodePayload(payload); err != nil {
			return recurring{fmt.Errorf("worker: release job %d: %w", job.ID, err)}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	req := releaseReq{r: dbqueue.Releasing{Job: job, Delay: delay, Payload: payload, Cause: cause}, err: make(chan error, 1)}
	// After close, written by this goroutine alone (a runner Run stopped
	// waiting for may still release a job).
	rl.batch.add(req)
	return <-req.err
}

// close writes what is pending and waits for it.
func (rl *releaser) close() { rl.batch.close() }

func (rl *releaser) flush(batch []releaseReq) {
	rs := make([]dbqueue.Releasing, len(batch))
	for i, req := range batch {
		rs[i] = req.r
	}
	var ctx context.Context
	var cancel context.CancelFunc
	if rl.writeCtx != nil {
		ctx, cancel = rl.writeCtx()
	} else {
		ctx, cancel = context.WithTimeout(context.Background(), flushTimeout)
	}
	defer cancel()
	lost, err := opsOf(rl.q).ReleaseMany(ctx, rs)
	if rl.flushed != nil {
		rl.flushed(len(rs))
	}
	if len(batch) > 1 && sqldb.IsRefused(err) {
		// The database refused the data of one of them (a new payload
		// over max_allowed_packet): write each alone, so that only the
		// job that carries it hears the refusal and is failed for it.
		cancel()
		for _, req := range batch {
			rl.flush([]releaseReq{req})
		}
		return
	}
	gone := make(map[*dbqueue.Job]bool, len(lost))
	for _, j := range lost {
		gone[j] = true
	}
	for _, req := range batch {
		switch {
		case err != nil:
			req.err <- err
		case gone[req.r.Job]:
			req.err <- fmt.Errorf("job %d (attempt %d): %w", req.r.Job.ID, req.r.Job.Attempts, dbqueue.ErrNotHeld)
		default:
			req.err <- nil
		}
	}
}
