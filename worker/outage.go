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

	down  atomic.Bool // an outage is under way: ok has work to do
	mu    sync.Mutex
	since time.Time // the first failure of the outage under way; zero when none
}

// failed reports a failure: the first of an outage at Warn, the others at
// Debug.
func (o *outage) failed(err error) {
	o.mu.Lock()
	first := o.since.IsZero()
	if first {
		o.since = time.Now()
		o.down.Store(true)
	}
	since := o.since
	o.mu.Unlock()
	if first {
		o.log.Warn(o.stopped, "error", err, "meanwhile", o.doing)
		return
	}
	o.log.Debug(o.stopped+": still failing", "error", err, "for", time.Since(since).Round(time.Millisecond))
}

// ok reports a success: it ends the outage under way, if any, with a
// line saying how long it lasted.
func (o *outage) ok() {
	if !o.down.Load() {
		return
	}
	o.mu.Lock()
	since := o.since
	o.since = time.Time{}
	o.down.Store(false)
	o.mu.Unlock()
	if !since.IsZero() {
		o.log.Info(o.resumed, "after", time.Since(since).Round(time.Millisecond))
	}
}
