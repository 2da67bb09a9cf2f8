package sqldb

// Handle is what dbqueue's sibling packages (failed, worker) need of a
// *dbqueue.Queue: its connection and settings.
type Handle struct {
	DB         DB
	Dialect    Dialect
	Connection string // failed_jobs.connection
	Queue      string // the default queue
	RetryAfter int64  // seconds
}

// HandleOf returns the Handle of a *dbqueue.Queue. Package dbqueue sets it
// when it is initialised, so the public API needs no accessor for it.
var HandleOf func(queue any) Handle
