// Package queueside names, once, the worker side a *dbqueue.Queue
// carries: core.WorkerSide over package dbqueue's own types, which
// package core cannot import. The packages around the root (worker,
// failed, periodic, the dashboard, the driver packages) read it with Of,
// checked at compile time: a method one of them needs and the queue does
// not offer fails the build, not a type assertion at run time.
package queueside

import (
	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/core"
)

// WorkerSide is the worker side of a *dbqueue.Queue.
type WorkerSide = core.WorkerSide[*dbqueue.Job, dbqueue.Releasing, *dbqueue.Batch, dbqueue.NewJob, dbqueue.Search, dbqueue.SearchResult[struct{}], dbqueue.ScheduleInfo]

// Of returns q's worker side.
func Of(q *dbqueue.Queue) WorkerSide { return core.WorkerSideOf[WorkerSide](q) }
