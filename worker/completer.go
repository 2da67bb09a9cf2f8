package worker

import (
	"context"
	"time"

	"github.com/dbqueue/dbqueue"
)

// Completion batching: successful jobs are deleted together, each still
// checked against its own reservation. A crash before a batch is written
// loses no work: those jobs run again after retry_after.
const (
	completeBatch = 500
	completeDelay = 2 * time.Millisecond
)

type completer struct {
	w     *Worker
	batch *batcher[*dbqueue.Job]
}

func newCompleter(w *Worker) *completer {
	c := &completer{w: w}
	c.batch = newBatcher(completeBatch, completeDelay, c.flush)
	return c
}

// add queues job's delete; after close it deletes the job by itself (a
// runner Run stopped waiting for, with a handler that ignored
// cancellation, may still finish a job after close).
func (c *completer) add(job *dbqueue.Job) { c.batch.add(job) }

// close writes what is pending and waits for it.
func (c *completer) close() { c.batch.close() }

// flush deletes a batch, retrying database trouble until the oldest
// reservation in it is about to expire.
func (c *completer) flush(batch []*dbqueue.Job) {
	deadline := batch[0].ExpiresAt()
	for _, j := range batch {
		if j.ExpiresAt().Before(deadline) {
			deadline = j.ExpiresAt()
		}
	}
	deadline = deadline.Add(-time.Second)
	wait := 50 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
		lost, err := c.w.ops.DeleteMany(ctx, batch)
		cancel()
		if err == nil {
			for _, j := range lost {
				c.w.log.Warn("completed job was no longer held (reclaimed after retry_after); it may run again", "id", j.ID, "name", j.Name())
			}
			return
		}
		if time.Now().Add(wait).After(deadline) {
			c.w.log.Error("cannot delete completed jobs; they will run again after retry_after", "jobs", len(batch), "error", err)
			return
		}
		c.w.log.Warn("cannot delete completed jobs; retrying", "in", wait, "error", err)
		time.Sleep(wait)
		wait = min(wait*2, 5*time.Second)
	}
}
