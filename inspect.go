package dbqueue

import (
	"context"
	"time"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// Sizes is a queue's job count by state, measured in one statement.
type Sizes struct {
	// Pending jobs are due and unreserved: the next to run.
	Pending int64
	// Delayed jobs wait for their available time (a delay or a backoff).
	Delayed int64
	// Reserved jobs are held by a worker, or were held by one that died and
	// will be taken again after retry_after.
	Reserved int64
	// OldestPending is how long the oldest pending job has been due; zero
	// when none is pending. A growing value means workers are behind.
	OldestPending time.Duration
}

// Total is every job in the queue.
func (s Sizes) Total() int64 { return s.Pending + s.Delayed + s.Reserved }

// Size counts the jobs of a queue ("" for the default queue).
func (q *Queue) Size(ctx context.Context, queue string) (Sizes, error) {
	if queue == "" {
		queue = q.queue
	}
	s, err := q.sql.Sizes(ctx, q.db, queue)
	if err != nil {
		return Sizes{}, sqldb.Wrap("size", err)
	}
	out := Sizes{Pending: s.Pending, Delayed: s.Delayed, Reserved: s.Reserved}
	if s.OldestPending != nil {
		out.OldestPending = time.Duration(s.Now-*s.OldestPending) * time.Second
	}
	return out, nil
}

// SizesByQueue is Size of every queue that holds jobs, by name: one
// grouped read of the jobs table however many queues there are, for
// dashboards that show them all (Size per queue is a query per queue). It
// reads every row of the table, so call it for a view, not per job.
func (q *Queue) SizesByQueue(ctx context.Context) (map[string]Sizes, error) {
	rows, err := q.sql.SizesByQueue(ctx, q.db)
	if err != nil {
		return nil, sqldb.Wrap("sizes by queue", err)
	}
	out := make(map[string]Sizes, len(rows))
	for _, s := range rows {
		z := Sizes{Pending: s.Pending, Delayed: s.Delayed, Reserved: s.Reserved}
		if s.OldestPending != nil {
			z.OldestPending = time.Duration(s.Now-*s.OldestPending) * time.Second
		}
		out[s.Queue] = z
	}
	return out, nil
}

// Queues lists the names of the queues that hold jobs, sorted: for
// dashboards and the dbqueue command, which show every queue without being
// told their names. A queue with no jobs left is not listed.
func (q *Queue) Queues(ctx context.Context) ([]string, error) {
	names, err := q.sql.Queues(ctx, q.db)
	if err != nil {
		return nil, sqldb.Wrap("list queues", err)
	}
	return names, nil
}

// Clear deletes every job of a queue ("" for the default queue), reserved
// ones included, and returns how many went. Failed jobs are kept.
func (q *Queue) Clear(ctx context.Context, queue string) (int64, error) {
	if queue == "" {
		queue = q.queue
	}
	var n int64
	err := sqldb.Retry(ctx, func() (err error) {
		n, err = q.sql.Clear(ctx, q.db, queue)
		return err
	})
	if err != nil {
		return 0, sqldb.Wrap("clear", err)
	}
	return n, nil
}
