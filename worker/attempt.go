package worker

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dbqueue/dbqueue"
)

// A handler runs on the goroutine that took its job from the prefetch
// buffer, not on one started for it: a goroutine, a channel and a
// context.WithTimeout per job were a third of the worker's CPU per job. What
// a separate goroutine gave — deciding a job whose handler ignores its
// context past its timeout — is done by the slot's timer instead.

// slot is where one goroutine runs handlers, one at a time: the attempt it
// runs now and one timer, reused from job to job, that ends that attempt's
// context at its timeout and, abandonAfter later, decides the job without
// a handler that ignores it.
type slot struct {
	r     *run
	mu    sync.Mutex
	cur   *attempt // under mu
	timer *time.Timer
	// armed is when the timer fires, zero when it will not (under mu).
	armed time.Time
	// exited is set by call, on the slot's goroutine, when a handler
	// ended that goroutine: the job is finished on another.
	exited *exitedCall
	// attempts are the slot's next attempts, allocated attemptChunk at a
	// time (see newAttempt).
	attempts []attempt
}

// attemptChunk is how many attempts a slot allocates at once.
const attemptChunk = 32

// newAttempt is a zero attempt for the slot's next job. Attempts are
// never reused, since a handler may keep its context, but they are
// allocated in chunks: the collector's work follows the number of objects
// as well as their bytes. A context kept past its job keeps its chunk.
func (s *slot) newAttempt() *attempt {
	if len(s.attempts) == 0 {
		s.attempts = make([]attempt, attemptChunk)
	}
	a := &s.attempts[0]
	s.attempts = s.attempts[1:]
	return a
}

// newSlot makes a slot and lists it in r, so that stopping the worker
// cancels what it runs.
func (r *run) newSlot() *slot {
	s := &slot{r: r}
	s.timer = time.AfterFunc(time.Hour, s.fire)
	s.timer.Stop()
	r.slotsMu.Lock()
	r.slots = append(r.slots, s)
	r.slotsMu.Unlock()
	return s
}

// cancelRunning cancels r.jobCtx and the context of every handler running,
// with r.jobCtx's error (RunOnce's context may have ended by its deadline).
func (r *run) cancelRunning() {
	r.cancelJobs()
	err := r.jobCtx.Err()
	r.slotsMu.Lock()
	slots := r.slots
	r.slotsMu.Unlock()
	for _, s := range slots {
		s.mu.Lock()
		a := s.cur
		s.mu.Unlock()
		if a != nil {
			a.cancel(err)
		}
	}
}

// Attempt states: the first of the handler's return and the timer's
// decision to abandon it wins.
const (
	attemptRunning int32 = iota
	attemptReturned
	attemptAbandoned
)

// attempt is one run of a handler, and the handler's context. Until the
// handler asks for Done (or derives a context, which asks), the attempt
// is its own small context: values from the worker's job context, the
// job's deadline, and an error the worker sets at the timeout, at a stop
// and when the job is done. The first Done makes it a standard context,
// context.WithDeadline of the worker's job context, and from then on Done,
// Err, Value and every context derived from it are that context's: a
// child is cancelled the moment the handler's context is. A handler that
// never waits on its context costs one allocation and no timer.
type attempt struct {
	parent   context.Context
	deadline time.Time

	mu   sync.Mutex
	err  error              // set by cancel and finish
	std  context.Context    // made by the first Done
	stop context.CancelFunc // std's

	// timedOut is set, under the slot's mu, when the timer has cancelled
	// the attempt for its timeout and waits abandonAfter more.
	timedOut bool
	state    atomic.Int32

	// What the timer needs to decide the job without its handler.
	job      *dbqueue.Job
	h        *handler
	maxTries int
	begun    time.Time
	dbNow    dbClock
	// decided is set, under the slot's mu, by the timer that abandons the
	// attempt, and closed once the job's outcome is written; failed says
	// whether it was failed (then a late success is not written).
	decided chan struct{}
	failed  bool
	// settled is what a transactional handler's transaction committed of
	// the job's end (HandleTx): the worker writes no end of its own.
	settled *settlement
}

var _ context.Context = (*attempt)(nil)

// Deadline is the job's, or the worker context's if that comes first
// (RunOnce's may have one).
func (a *attempt) Deadline() (time.Time, bool) {
	if d, ok := a.parent.Deadline(); ok && d.Before(a.deadline) {
		return d, true
	}
	return a.deadline, true
}

func (a *attempt) Value(key any) any {
	if _, ok := key.(settleKey); ok {
		return a // a transactional handler records its end here (settle)
	}
	a.mu.Lock()
	std := a.std
	a.mu.Unlock()
	if std != nil {
		return std.Value(key) // context.Cause and derived contexts find std's own
	}
	return a.parent.Value(key)
}

func (a *attempt) Done() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.std == nil {
		a.std, a.stop = context.WithDeadline(a.parent, a.deadline)
		if a.err != nil && a.err != context.DeadlineExceeded {
			a.stop() // ended already: by a stop, or the job is done
		}
	}
	return a.std.Done()
}

func (a *attempt) Err() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.std != nil {
		return a.std.Err()
	}
	return a.err
}

func (a *attempt) String() string {
	return "worker job context (deadline " + a.deadline.Format(time.RFC3339Nano) + ")"
}

// cancel ends the context with err; it reports whether it did (false: it
// had ended already). At the timeout (DeadlineExceeded) a standard
// context ends by its own deadline, at the same moment.
func (a *attempt) cancel(err error) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err != nil {
		return false
	}
	a.err = err
	if a.std != nil && err != context.DeadlineExceeded {
		a.stop()
	}
	return true
}

// finish ends the context when the job is done: whatever the handler left
// running on it stops, and a standard context's timer is released. It
// lets go of the job: attempts are allocated in chunks and Jobs a claim
// at a time, so an attempt that kept its job would keep its whole claim
// alive for as long as the slot uses the attempt's chunk.
func (a *attempt) finish() {
	a.mu.Lock()
	if a.err == nil {
		a.err = context.Canceled
	}
	if a.std != nil {
		a.stop()
	}
	a.job, a.h = nil, nil
	a.mu.Unlock()
}

// start makes a the slot's running attempt, with its timeout counted from
// now. An attempt started after the worker cancelled running jobs starts
// cancelled.
//
// The timer is armed only when it would fire after a's deadline, or not
// at all: quick jobs leave it armed at an earlier job's deadline, and
// when it fires it finds the attempt running then and waits for its
// deadline. That saves a Reset and a Stop, each under the timer's lock,
// for every job.
func (s *slot) start(a *attempt, timeout time.Duration) {
	s.mu.Lock()
	s.cur = a
	if s.armed.IsZero() || s.armed.After(a.deadline) {
		s.reset(timeout)
	}
	s.mu.Unlock()
	if err := s.r.jobCtx.Err(); err != nil {
		a.cancel(err)
	}
}

// end clears the slot when a's handler has returned. The timer stays
// armed for the next job (see start).
func (s *slot) end() {
	s.mu.Lock()
	s.cur = nil
	s.mu.Unlock()
}

// reset arms the timer to fire in d; under mu. armed is read just before
// the timer is set, so the timer fires at most microseconds after it.
func (s *slot) reset(d time.Duration) {
	s.armed = time.Now().Add(d)
	s.timer.Reset(d)
}

// retire stops the timer of a slot no goroutine will run jobs on again.
func (s *slot) retire() {
	s.mu.Lock()
	s.timer.Stop()
	s.armed = time.Time{}
	s.mu.Unlock()
}

// fire is the slot's timer: at the running attempt's deadline it cancels
// its context, and abandonAfter later, if the handler still runs, it
// decides the job without it. A timer that fires for an attempt already
// gone finds the next one (or none) and waits for that one's deadline.
func (s *slot) fire() {
	s.mu.Lock()
	s.armed = time.Time{}
	a := s.cur
	if a == nil {
		s.mu.Unlock()
		return
	}
	now := time.Now()
	abandonAt := a.deadline.Add(abandonAfter)
	switch {
	case now.Before(a.deadline):
		s.reset(a.deadline.Sub(now))
		s.mu.Unlock()
		return
	case !a.timedOut:
		if a.cancel(context.DeadlineExceeded) {
			a.timedOut = true
			s.reset(abandonAt.Sub(now))
		}
		// Otherwise the stopping worker cancelled it first: that is not
		// a timeout, and its handler is waited for (Run bounds the wait).
		s.mu.Unlock()
		return
	case now.Before(abandonAt):
		s.reset(abandonAt.Sub(now))
		s.mu.Unlock()
		return
	case a.decided != nil:
		s.mu.Unlock()
		return // abandoned already: a late fire
	}
	// decided is set before the state says abandoned, so a handler that
	// returns and sees that state finds it.
	a.decided = make(chan struct{})
	if !a.state.CompareAndSwap(attemptRunning, attemptAbandoned) {
		s.mu.Unlock()
		return // it returned after all
	}
	s.mu.Unlock()
	s.r.abandon(a)
}

// abandon decides a job whose handler ignored its context abandonAfter
// past its timeout. Its goroutine stays with the handler until it returns
// (see process).
func (r *run) abandon(a *attempt) {
	defer close(a.decided)
	job := a.job
	r.stuck.Add(1)
	r.finish(job, func() {
		a.failed = r.timedOut(job, a.h, a.maxTries, time.Since(a.begun), a.dbNow, false)
		r.w.log.Error("handler ignores its context; its goroutine is held until it returns", "id", job.ID, "name", job.Name())
	})
	// Decided: count it now, so MaxJobs and StopWhenEmpty do not wait for
	// a handler that may never return.
	r.processed.Add(1)
	r.signal()
}
