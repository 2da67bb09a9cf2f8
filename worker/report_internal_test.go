package worker

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A round under way when the worker stops finishes its writes: stopping
// does not cut it short (which logged a failed write, and made the last
// round write its counts instead).
func TestStopLetsTheRoundUnderWayFinish(t *testing.T) {
	db := dbtest.New(t, dbqueue.SQLite)
	q := db.Queue(t)
	if _, err := q.PushMany(context.Background(), []dbqueue.NewJob{{Name: "n"}, {Name: "n"}, {Name: "n"}}); err != nil {
		t.Fatal(err)
	}
	var hold atomic.Bool
	held, release, stopped := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var rounds, lastRounds atomic.Int64
	beforeReport = func(last bool) {
		if last {
			lastRounds.Add(1)
			return
		}
		rounds.Add(1)
		if hold.CompareAndSwap(true, false) {
			close(held)
			<-release
		}
	}
	reportStopped = func() { close(stopped) }
	t.Cleanup(func() { beforeReport, reportStopped = nil, nil })

	logs := &lockedLog{}
	w, err := New(q, Options{MetricsInterval: 10 * time.Millisecond, Sleep: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	w.Handle("n", func(ctx context.Context, job *dbqueue.Job) error { return nil })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	dbtest.WaitFor(t, 20*time.Second, "the jobs run", func() bool { return db.Count(t, "SELECT COUNT(*) FROM jobs") == 0 })
	hold.Store(true)
	<-held
	cancel()
	<-stopped // the loop was told to stop while its round is held
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "cannot write") {
		t.Fatalf("a round under way failed as the worker stopped:\n%s", logs)
	}
	if n := db.Count(t, "SELECT SUM(processed) FROM jobs_metrics"); n != 3 {
		t.Fatalf("%d processed in the metrics, want 3", n)
	}
	if lastRounds.Load() != 1 || rounds.Load() < 2 {
		t.Fatalf("%d rounds and %d last rounds", rounds.Load(), lastRounds.Load())
	}
}
