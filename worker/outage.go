package worker

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// outage follows one kind of database work through a run of failures,
// so that an outage is told once when it starts (what stopped, why, and
// what the worker does meanwhile) and once when it ends (after how
// long), instead of once per retry: the retries in between are at Debug.
// Claims and signal readings each have one; failures may be reported
// from several goroutines at once.
type outage struct {
	log *slog.Logger
	// stopped and resumed are the messages of the two lines; doing says
	// what the worker does while the outage lasts.
	stopped, resumed, doing string

	down  atomic.Bool // failures since the last success: ok has work to do
	mu    sync.Mutex
	since time.Time // the first failure since the last success
	told  bool      // the outage's start was logged
}

// outageAfter is how long failures retried inside one statement
// (sqldb.Retry: a deadlock, a refused connection) must last before they
// are told as an outage: a conflict retried within milliseconds is not one.
const outageAfter = time.Second

// failed reports work that failed: the first failure of an outage is told
// at Warn, the others at Debug.
func (o *outage) failed(err error) { o.note(err, true) }

// retried reports a failure about to be retried inside a statement
// (sqldb.RetryHooks): told once such failures have lasted outageAfter.
func (o *outage) retried(err error) { o.note(err, false) }

func (o *outage) note(err error, tell bool) {
	now := time.Now()
	o.mu.Lock()
	if o.since.IsZero() {
		o.since = now
		o.down.Store(true)
	}
	since := o.since
	tell = !o.told && (tell || now.Sub(since) >= outageAfter)
	if tell {
		o.told = true
	}
	o.mu.Unlock()
	if tell {
		o.log.Warn(o.stopped, "error", err, "meanwhile", o.doing)
		return
	}
	o.log.Debug(o.stopped+": still failing", "error", err, "for", now.Sub(since).Round(time.Millisecond))
}

// ok reports a success: it ends the outage under way, if any, with a
// line saying how long it lasted.
func (o *outage) ok() {
	if !o.down.Load() {
		return
	}
	o.mu.Lock()
	since, told := o.since, o.told
	o.since, o.told = time.Time{}, false
	o.down.Store(false)
	o.mu.Unlock()
	if told {
		o.log.Info(o.resumed, "after", time.Since(since).Round(time.Millisecond))
	}
}
