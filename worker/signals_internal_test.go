package worker

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// An idle worker polls the jobs table on its own backoff up to Sleep, not
// every SignalInterval: reading the signals wakes the loop only when
// something changed (a restart, a pause, the memory limit, MaxTime). Before,
// every reading woke it and an idle worker claimed once per SignalInterval
// however long its Sleep.
func TestSignalsWakeTheLoopOnlyForNews(t *testing.T) {
	db := dbtest.New(t, dbqueue.SQLite)
	q := db.Queue(t)
	var loops, reads atomic.Int64
	reads50 := make(chan struct{})
	afterSignals = func() {
		if reads.Add(1) == 50 {
			close(reads50)
		}
	}
	defer func() { afterSignals = nil }()
	paused := make(chan struct{}, 1)
	w, err := New(q, Options{
		Sleep:          time.Hour,
		SignalInterval: time.Millisecond,
		Logger:         slog.New(slog.DiscardHandler),
		Events: Events{Looping: func(context.Context) {
			loops.Add(1)
			select {
			case paused <- struct{}{}:
			default:
			}
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	w.Handle("never-pushed", func(context.Context, *dbqueue.Job) error { return nil })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var runErr error
	go func() { runErr = w.Run(ctx); close(done) }()
	defer func() {
		cancel()
		<-done
		if runErr != nil {
			t.Error(runErr)
		}
	}()
	select {
	case <-reads50:
	case <-done:
		t.Fatalf("Run returned before 50 signal readings: %v", runErr)
	}
	// The first claim finds nothing, then the poll backs off from 10ms
	// towards an hour: a handful of loops, not one per signal reading.
	if n := loops.Load(); n > 12 {
		t.Fatalf("the idle worker looped %d times over 50 signal readings: readings with no news must not wake it", n)
	}

	// News still wakes it at once: a pause changes what the loop reads.
	for len(paused) > 0 {
		<-paused
	}
	before := loops.Load()
	if err := q.Pause(context.Background(), dbqueue.DefaultQueue); err != nil {
		t.Fatal(err)
	}
	select {
	case <-paused:
	case <-done:
		t.Fatalf("Run returned: %v", runErr)
	}
	if loops.Load() == before {
		t.Fatal("a pause did not wake the loop")
	}
}
