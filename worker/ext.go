package worker

import (
	"context"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/queueside"
)

// queueOps is the worker side of a dbqueue.Queue, kept off its public API
// and reached through internal/core.
type queueOps interface {
	DeleteMany(ctx context.Context, jobs []*dbqueue.Job) ([]*dbqueue.Job, error)
	ReleaseMany(ctx context.Context, rs []dbqueue.Releasing) ([]*dbqueue.Job, error)
	Reserve(ctx context.Context, n, limited int, queues []string, failed func(job *dbqueue.Job, cause error), short func(queue string)) ([]*dbqueue.Job, error)
	ReadyQueues(ctx context.Context, queues []string) ([]string, error)
	Unreserve(ctx context.Context, job *dbqueue.Job) error
	Wakeups(queues ...string) (<-chan struct{}, func())
	WithKey(raw []byte, key string, value any) ([]byte, error)
	Signals(ctx context.Context, queues []string) (restart int64, paused map[string]bool, err error)
	Linked(job *dbqueue.Job) bool
	FollowsAbandoned(job *dbqueue.Job) bool
	Unwritable(err error) bool
	FinishLinked(ctx context.Context, job *dbqueue.Job, cause error) (before, after *dbqueue.Batch, err error)
}

func opsOf(q *dbqueue.Queue) queueOps { return queueside.Of(q) }
