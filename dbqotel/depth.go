package dbqotel

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/metric"

	"github.com/dbqueue/dbqueue"
)

// MaxDepthQueues bounds how many queues one collection of the depth
// gauges reads when ObserveDepth is given none to watch: each costs one
// statement, so a database with thousands of queue names cannot turn a
// metrics scrape into thousands of queries. The first in name order are
// read.
const MaxDepthQueues = 100

// The states of dbqueue.queue.depth, from dbqueue.Sizes.
var (
	statePending  = AttrJobState.String("pending")
	stateDelayed  = AttrJobState.String("delayed")
	stateReserved = AttrJobState.String("reserved")
)

// ObserveDepth reports q's queues to the dbqueue.queue.depth and
// dbqueue.queue.oldest_pending gauges, read from the database each time
// the MeterProvider collects (one statement per queue, each collection
// bounded by Options.DepthTimeout and the collection's own context). With
// queues named, those are read, empty or not; with none, the queues that
// hold jobs (dbqueue.Queue.Queues), up to MaxDepthQueues; "" is q's
// default queue.
//
// One process should observe a queue, not every worker: the depth is the
// same from everywhere. Call Unregister on the result to stop, before
// closing q.
func (i *Instrumentation) ObserveDepth(q *dbqueue.Queue, queues ...string) (metric.Registration, error) {
	if q == nil {
		return nil, errors.New("dbqotel: ObserveDepth: nil queue")
	}
	queues = append([]string(nil), queues...)
	reg, err := i.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		return i.observeDepth(ctx, o, q, queues)
	}, i.depth, i.oldest)
	if err != nil {
		return nil, fmt.Errorf("dbqotel: register the depth gauges: %w", err)
	}
	return reg, nil
}

func (i *Instrumentation) observeDepth(ctx context.Context, o metric.Observer, q *dbqueue.Queue, queues []string) error {
	ctx, cancel := context.WithTimeout(ctx, i.opts.DepthTimeout)
	defer cancel()
	if len(queues) == 0 {
		names, err := q.Queues(ctx)
		if err != nil {
			return fmt.Errorf("dbqotel: queue depth: %w", err)
		}
		queues = names[:min(len(names), MaxDepthQueues)]
	}
	var errs []error
	for _, name := range queues {
		if name == "" {
			name = q.DefaultQueue()
		}
		s, err := q.Size(ctx, name)
		if err != nil {
			errs = append(errs, fmt.Errorf("dbqotel: depth of queue %q: %w", name, err))
			if ctx.Err() != nil {
				break // the rest would fail the same way
			}
			continue
		}
		queue := AttrQueue.String(name)
		o.ObserveInt64(i.depth, s.Pending, metric.WithAttributes(queue, statePending))
		o.ObserveInt64(i.depth, s.Delayed, metric.WithAttributes(queue, stateDelayed))
		o.ObserveInt64(i.depth, s.Reserved, metric.WithAttributes(queue, stateReserved))
		o.ObserveFloat64(i.oldest, s.OldestPending.Seconds(), metric.WithAttributes(queue))
	}
	return errors.Join(errs...)
}
