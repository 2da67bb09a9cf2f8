package worker

import (
	"log/slog"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// Completion batching: successful jobs are deleted together, each still
// checked against its own reservation. A crash before a batch is written
// loses no work: those jobs run again after retry_after.
const (
	completeBatch = 500
	completeDelay = 2 * time.Millisecond
)

type completer struct {
	r     *run
	batch *batcher[*dbqueue.Job]
}

func newCompleter(r *run) *completer {
	c := &completer{r: r}
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
// reservation in it is about to expire, or the worker's grace period is
// over; an error no retry can cure (a closed pool) gives up at once.
func (c *completer) flush(batch []*dbqueue.Job) {
	r, log := c.r, c.r.w.log
	deadline := batch[0].ExpiresAt()
	for _, j := range batch {
		if j.ExpiresAt().Before(deadline) {
			deadline = j.ExpiresAt()
		}
	}
	deadline = deadline.Add(-time.Second)
	wait := 50 * time.Millisecond
	for try := 0; ; try++ {
		ctx, cancel := r.writeCtx(r.writes.retrying)
		lost, err := r.w.ops.DeleteMany(ctx, batch)
		cancel()
		if err == nil {
			for _, j := range lost {
				log.Warn("completed job was no longer held (reclaimed after retry_after); it may run again", "id", j.ID, "name", j.Name())
			}
			return
		}
		// Once the grace period is over, the try just made was the last.
		if sqldb.IsClosed(err) || time.Now().Add(wait).After(deadline) || r.writes.retrying.Err() != nil {
			r.gaveUp(err, batch...)
			log.Error("cannot delete completed jobs; they will run again after retry_after", "jobs", len(batch), "ids", jobIDs(batch), "error", err)
			return
		}
		level := slog.LevelWarn
		if try > 0 {
			level = slog.LevelDebug // one line per outage, not per retry
		}
		log.Log(r.writes.retrying, level, "cannot delete completed jobs; retrying", "jobs", len(batch), "in", wait, "error", err)
		sleep(r.writes.retrying, wait) // cut short when the grace period ends: one more try
		wait = min(wait*2, 5*time.Second)
	}
}

// jobIDs lists the ids of jobs for a log line.
func jobIDs(jobs []*dbqueue.Job) []int64 {
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	return ids
}
