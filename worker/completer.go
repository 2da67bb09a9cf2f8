package worker

import (
	"log/slog"
	"sync"
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

// busyFor is how long a job's delete may keep skipping its row because
// another transaction holds a lock on it (see dialect.SkipDeleter) before
// the completer deletes it waiting for the lock. A claim's lock lasts one
// claim transaction, milliseconds to a second on a crowded server; a row
// still locked after busyFor is locked by something that may hold it
// long, and waiting for it is the only way to finish.
const busyFor = time.Second

type completer struct {
	r     *run
	batch *batcher[*dbqueue.Job]

	mu   sync.Mutex
	busy map[*dbqueue.Job]time.Time // jobs put back as busy: when first
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

// flush deletes a batch without waiting for row locks: the jobs whose
// rows another transaction had locked (another process's claim, on
// MariaDB and MySQL) and that are still held go back to the batcher for a later
// batch, for up to busyFor, then are deleted waiting for the lock; after
// close they are deleted waiting at once.
func (c *completer) flush(batch []*dbqueue.Job) {
	busy := c.write(batch, true)
	if len(busy) == 0 && c.noneBusy() {
		return
	}
	now := time.Now()
	c.mu.Lock()
	first := make(map[*dbqueue.Job]time.Time, len(busy))
	for _, j := range busy {
		if t, ok := c.busy[j]; ok {
			first[j] = t
		} else {
			first[j] = now
		}
	}
	for _, j := range batch {
		delete(c.busy, j) // deleted or lost, or in first
	}
	var again, wait []*dbqueue.Job
	for _, j := range busy {
		if t := first[j]; now.Sub(t) < busyFor && now.Add(busyFor).Before(j.ExpiresAt()) {
			if c.busy == nil {
				c.busy = make(map[*dbqueue.Job]time.Time)
			}
			c.busy[j] = t
			again = append(again, j)
		} else {
			wait = append(wait, j)
		}
	}
	c.mu.Unlock()
	if len(again) > 0 && !c.batch.requeue(again) {
		wait = append(wait, again...) // closed: no later batch
		c.mu.Lock()
		for _, j := range again {
			delete(c.busy, j)
		}
		c.mu.Unlock()
	}
	if len(wait) > 0 {
		c.write(wait, false)
	}
}

// noneBusy reports whether no job was put back as busy.
func (c *completer) noneBusy() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.busy) == 0
}

// write deletes batch, skipping rows another transaction has locked when
// skip is set and returning those of them still held; it retries database
// trouble until the oldest reservation in it is about to expire, or the
// worker's grace period is over; an error no retry can cure (a closed
// pool) gives up at once.
func (c *completer) write(batch []*dbqueue.Job, skip bool) (busy []*dbqueue.Job) {
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
		var lost []*dbqueue.Job
		var err error
		if skip {
			lost, busy, err = r.w.ops.DeleteManySkipping(ctx, batch)
		} else {
			lost, err = r.w.ops.DeleteMany(ctx, batch)
		}
		cancel()
		if err == nil {
			for _, j := range lost {
				log.Warn("completed job was no longer held (reclaimed after retry_after); it may run again", "id", j.ID, "name", j.Name())
			}
			return busy
		}
		// Once the grace period is over, the try just made was the last.
		if sqldb.IsClosed(err) || time.Now().Add(wait).After(deadline) || r.writes.retrying.Err() != nil {
			r.gaveUp(err, batch...)
			log.Error("cannot delete completed jobs; they will run again after retry_after", "jobs", len(batch), "ids", jobIDs(batch), "error", err)
			return nil
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
