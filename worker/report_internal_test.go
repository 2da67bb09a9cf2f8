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

// runReporting runs a worker of no-op "n" jobs on q that reports every
// 10 ms, logging into logs; cancel stops it and done gets Run's error.
func runReporting(t *testing.T, q *dbqueue.Queue) (logs *lockedLog, cancel context.CancelFunc, done chan error) {
	t.Helper()
	logs = &lockedLog{}
	w, err := New(q, Options{MetricsInterval: 10 * time.Millisecond, Sleep: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	w.Handle("n", func(ctx context.Context, job *dbqueue.Job) error { return nil })
	ctx, cancel := context.WithCancel(context.Background())
	done = make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	return logs, cancel, done
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

	logs, cancel, done := runReporting(t, q)
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

// A round that failed only in its prune (a table of migration 00011
// missing, no counts yet to write) is followed by rounds that prune again,
// so none of them reports the writes recovered while the table is still
// missing: the failure is logged once and the recovery once, after the
// table is back. The prune ran every five minutes, so the next round,
// with nothing to write, logged "written again", and the first counts
// logged the failure a second time.
func TestFailedPruneIsNotRecoveredByAnEmptyRound(t *testing.T) {
	db := dbtest.New(t, dbqueue.SQLite)
	q := db.Queue(t)
	var rounds atomic.Int64
	roundStarted := make(chan int64, 100)
	beforeReport = func(last bool) {
		if !last {
			select {
			case roundStarted <- rounds.Add(1):
			default:
			}
		}
	}
	t.Cleanup(func() { beforeReport, reportStopped = nil, nil })
	db.Exec(t, "ALTER TABLE jobs_metrics_hourly RENAME TO jobs_metrics_hourly_away")
	logs, cancel, done := runReporting(t, q)
	defer cancel()
	// Round 1 prunes and fails; rounds 2 and 3 have nothing to write.
	for n := int64(0); n < 4; {
		n = <-roundStarted
	}
	if l := logs.String(); strings.Count(l, "cannot write metrics") != 1 || strings.Contains(l, "written again") {
		t.Fatalf("with the hourly table missing and nothing to write, want one failure and no recovery:\n%s", l)
	}
	if _, err := q.Push(context.Background(), dbqueue.NewJob{Name: "n"}); err != nil {
		t.Fatal(err)
	}
	dbtest.WaitFor(t, 20*time.Second, "the job runs", func() bool { return db.Count(t, "SELECT COUNT(*) FROM jobs") == 0 })
	db.Exec(t, "ALTER TABLE jobs_metrics_hourly_away RENAME TO jobs_metrics_hourly")
	dbtest.WaitFor(t, 20*time.Second, "the recovery", func() bool { return strings.Contains(logs.String(), "written again") })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if l := logs.String(); strings.Count(l, "cannot write metrics") != 1 || strings.Count(l, "written again") != 1 {
		t.Fatalf("want the failure and the recovery logged once each:\n%s", l)
	}
}
