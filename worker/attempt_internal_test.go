package worker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
)

// newTestRun is the part of a run that slots need.
func newTestRun(t *testing.T) *run {
	t.Helper()
	r := &run{freed: make(chan struct{}, 1)}
	r.jobCtx, r.cancelJobs = context.WithCancel(context.Background())
	t.Cleanup(r.cancelJobs)
	return r
}

// A slot's timer is reused from job to job: a fire meant for an attempt
// that has ended finds the next one, whose deadline is still ahead, and
// leaves it alone; a fire past the running attempt's deadline cancels it
// with DeadlineExceeded and nothing else.
func TestSlotTimerBelongsToTheRunningAttempt(t *testing.T) {
	r := newTestRun(t)
	s := r.newSlot()
	first := &attempt{parent: r.jobCtx, deadline: time.Now().Add(-time.Second)}
	s.start(first, time.Hour)
	s.end()
	next := &attempt{parent: r.jobCtx, deadline: time.Now().Add(time.Hour)}
	s.start(next, time.Hour)
	s.fire() // the first attempt's fire, arriving late
	if err := next.Err(); err != nil {
		t.Fatalf("a late fire for the previous attempt ended the next one: %v", err)
	}
	if err := first.Err(); err != nil {
		t.Fatalf("an attempt that had ended was cancelled: %v", err)
	}
	s.end()

	due := &attempt{parent: r.jobCtx, deadline: time.Now().Add(-time.Millisecond)}
	s.start(due, time.Hour)
	s.fire()
	if err := due.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("fire past the deadline: Err %v, want DeadlineExceeded", err)
	}
	select {
	case <-due.Done():
	default:
		t.Fatal("Done is open after the deadline fired")
	}
	if !due.timedOut {
		t.Fatal("the attempt is not marked as timed out, so it would never be abandoned")
	}
	s.end()
}

// The stop cancels what runs, and an attempt that starts after the stop
// starts cancelled: none slips through between the two.
func TestCancelRunningReachesEverySlot(t *testing.T) {
	r := newTestRun(t)
	a, b := r.newSlot(), r.newSlot()
	running := &attempt{parent: r.jobCtx, deadline: time.Now().Add(time.Hour)}
	a.start(running, time.Hour)
	done := running.Done() // asked for before the cancel, closed by it
	r.cancelRunning()
	select {
	case <-done:
	default:
		t.Fatal("a running attempt's Done stayed open after the stop")
	}
	if !errors.Is(running.Err(), context.Canceled) {
		t.Fatalf("running attempt: Err %v, want Canceled", running.Err())
	}
	late := &attempt{parent: r.jobCtx, deadline: time.Now().Add(time.Hour)}
	b.start(late, time.Hour)
	if !errors.Is(late.Err(), context.Canceled) {
		t.Fatalf("attempt started after the stop: Err %v, want Canceled", late.Err())
	}
	a.end()
	b.end()
}

// A handler's context is a context like any other: values come from the
// worker's context; contexts derived from it end the moment it does (a
// handler that waits on its context and then reads a child's Err sees
// the child ended too); its deadline and Cause are right; and a handler
// that never asks for Done makes no timer or channel.
func TestAttemptIsAContext(t *testing.T) {
	type key struct{}
	r := newTestRun(t)
	r.jobCtx = context.WithValue(r.jobCtx, key{}, "v")
	s := r.newSlot()
	a := &attempt{parent: r.jobCtx, deadline: time.Now().Add(time.Hour)}
	s.start(a, time.Hour)
	if got := a.Value(key{}); got != "v" {
		t.Fatalf("Value = %v, want the worker context's", got)
	}
	if d, ok := a.Deadline(); !ok || !d.Equal(a.deadline) {
		t.Fatalf("Deadline = %v, %v", d, ok)
	}
	if a.std != nil {
		t.Fatal("a context nobody waited on made a standard context")
	}
	child, cancel := context.WithCancel(a)
	defer cancel()
	ran := make(chan struct{})
	context.AfterFunc(a, func() { close(ran) })
	stopped := make(chan struct{})
	if !context.AfterFunc(a, func() { close(stopped) })() {
		t.Fatal("stopping an AfterFunc before the end reported it had run")
	}
	r.cancelRunning() // the worker stops
	if !errors.Is(child.Err(), context.Canceled) {
		t.Fatalf("child right after its parent ended: Err %v, want Canceled", child.Err())
	}
	<-ran
	select {
	case <-stopped:
		t.Fatal("a stopped AfterFunc ran")
	default:
	}
	s.end()

	// At the deadline: DeadlineExceeded everywhere.
	r2 := newTestRun(t)
	s2 := r2.newSlot()
	b := &attempt{parent: r2.jobCtx, deadline: time.Now().Add(20 * time.Millisecond)}
	s2.start(b, 20*time.Millisecond)
	derived, cancel2 := context.WithTimeout(b, time.Hour)
	defer cancel2()
	<-derived.Done()
	if !errors.Is(derived.Err(), context.DeadlineExceeded) || !errors.Is(b.Err(), context.DeadlineExceeded) ||
		!errors.Is(context.Cause(b), context.DeadlineExceeded) {
		t.Fatalf("at the deadline: child %v, attempt %v, cause %v", derived.Err(), b.Err(), context.Cause(b))
	}
	s2.end()
	b.finish()
	if !errors.Is(b.Err(), context.DeadlineExceeded) {
		t.Fatalf("finish after the timeout changed Err to %v", b.Err())
	}

	// RunOnce's context may end first: its deadline is the handler's.
	parent, cancel3 := context.WithTimeout(context.Background(), time.Minute)
	defer cancel3()
	c := &attempt{parent: parent, deadline: time.Now().Add(time.Hour)}
	if d, _ := c.Deadline(); d.After(time.Now().Add(2 * time.Minute)) {
		t.Fatalf("Deadline %v: later than the worker context's", d)
	}
}

// A timer fire that arrives late, after the attempt was abandoned, must
// not leave the runner waiting for a decision that never comes.
func TestLateFireAfterAbandon(t *testing.T) {
	r := newTestRun(t)
	r.w = &Worker{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	r.closed = true // no database: finishing only logs
	s := r.newSlot()
	job := &dbqueue.Job{ID: 1}
	a := &attempt{parent: r.jobCtx, deadline: time.Now().Add(-3 * time.Second), job: job, begun: time.Now().Add(-4 * time.Second)}
	s.start(a, time.Hour)
	s.fire() // the timeout: cancelled
	s.fire() // past the abandon wait: abandoned
	s.fire() // a late duplicate
	done := make(chan struct{})
	go func() { r.afterCall(s, a, result{}); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("afterCall never returned: the late fire replaced the decision it waits on")
	}
}
