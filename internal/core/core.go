// Package core is what dbqueue's own packages (worker, failed, the driver
// packages, dbqueuetest) share of a queue and no user sees: its
// connection, its dialect, its settings, and the worker-side operations of
// package dbqueue. A *dbqueue.Queue carries a Handle, whose unexported
// method only this package can call, so nothing outside the module can
// reach in, and nothing here is global.
package core

import (
	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// Queue is one queue's connection and settings.
type Queue struct {
	DB      sqldb.DB
	Dialect dialect.Dialect
	// Connection is failed_jobs.connection; DefaultQueue the queue used
	// when a caller names none; RetryAfter the reservation's length in
	// seconds.
	Connection   string
	DefaultQueue string
	RetryAfter   int64
	// Ext holds package dbqueue's worker-side operations, typed there; the
	// packages that use them assert the interface they need.
	Ext any
	// Redact passes a payload read for showing through the queue's
	// Redactor (dbqueue.WithRedactor).
	Redact func(name string, payload []byte) []byte
}

// Handle is embedded in dbqueue.Queue.
type Handle struct{ q *Queue }

// NewHandle wraps q for embedding.
func NewHandle(q *Queue) Handle { return Handle{q} }

func (h Handle) coreQueue() *Queue { return h.q }

// Holder is anything that embeds a Handle: a *dbqueue.Queue.
type Holder interface{ coreQueue() *Queue }

// Of returns the core of a *dbqueue.Queue (nil for a nil queue).
func Of(h Holder) *Queue {
	if h == nil {
		return nil
	}
	return h.coreQueue()
}
