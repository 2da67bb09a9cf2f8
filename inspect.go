package dbqueue

import (
	"context"
	"fmt"
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
// dashboards that show them all (Size per queue is a query per queue). Its
// counts are exact, and so it reads every index entry of the table: on a
// million jobs, about a second. A view that refreshes, or a table that may
// grow large, wants QueuesAfter and SizesCapped, whose cost has a bound.
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

// MaxQueuesAfter bounds the names one QueuesAfter call returns.
const MaxQueuesAfter = 1000

// QueuesAfter lists up to limit (at most MaxQueuesAfter) names of queues
// that hold jobs and sort after after ("" for the first), in the
// database's order of the queue column: one page of Queues, to walk every
// queue by passing the last name back. It reads one index entry per name
// (a loose index scan), so its cost does not grow with the jobs or queues
// that follow the page.
func (q *Queue) QueuesAfter(ctx context.Context, after string, limit int) ([]string, error) {
	if limit <= 0 || limit > MaxQueuesAfter {
		return nil, fmt.Errorf("dbqueue: QueuesAfter: limit %d: use 1 to %d", limit, MaxQueuesAfter)
	}
	names, err := q.sql.QueuesAfter(ctx, q.db, after, limit)
	if err != nil {
		return nil, sqldb.Wrap("list queues", err)
	}
	return names, nil
}

// CappedSizes are a queue's Sizes whose counts stop at a cap. A count
// whose flag is set reached the cap: the queue holds at least that many
// jobs in that state, maybe far more. A count without its flag is exact.
type CappedSizes struct {
	Sizes
	PendingCapped, DelayedCapped, ReservedCapped bool
}

// Capped reports whether any count is a lower bound.
func (s CappedSizes) Capped() bool { return s.PendingCapped || s.DelayedCapped || s.ReservedCapped }

// SizesCapped is Size of each of queues with every count stopped at
// limit: each state of each queue reads at most limit index entries
// (MySQL reads the rows of those entries too, for reserved_at, and a
// capped pending or delayed count leaves the reserved count a lower bound
// as well). For a view over many or large queues, with QueuesAfter;
// SizesByQueue when exact counts are worth reading every entry.
// OldestPending is exact on PostgreSQL and SQLite; on MySQL it is read
// from the first limit due rows, and is zero when all of them are
// reserved.
func (q *Queue) SizesCapped(ctx context.Context, queues []string, limit int64) (map[string]CappedSizes, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("dbqueue: SizesCapped: limit %d: use at least 1", limit)
	}
	rows, err := q.sql.CappedSizes(ctx, q.db, queues, limit)
	if err != nil {
		return nil, sqldb.Wrap("capped sizes", err)
	}
	out := make(map[string]CappedSizes, len(rows))
	for _, s := range rows {
		z := CappedSizes{Sizes: Sizes{Pending: s.Pending, Delayed: s.Delayed, Reserved: s.Reserved},
			PendingCapped: s.PendingCapped, DelayedCapped: s.DelayedCapped, ReservedCapped: s.ReservedCapped}
		if s.OldestPending != nil {
			z.OldestPending = time.Duration(s.Now-*s.OldestPending) * time.Second
		}
		out[s.Queue] = z
	}
	return out, nil
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
