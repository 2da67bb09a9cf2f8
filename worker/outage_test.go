package worker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/worker"
)

// records is a slog handler that keeps every record, at every level, and
// lets a test wait for the records it expects.
type records struct {
	mu      sync.Mutex
	all     []slog.Record
	changed chan struct{} // closed and replaced at each record
}

func newRecords() *records { return &records{changed: make(chan struct{})} }

func (rs *records) Enabled(context.Context, slog.Level) bool { return true }
func (rs *records) WithAttrs([]slog.Attr) slog.Handler       { return rs }
func (rs *records) WithGroup(string) slog.Handler            { return rs }
func (rs *records) Handle(_ context.Context, r slog.Record) error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.all = append(rs.all, r.Clone())
	close(rs.changed)
	rs.changed = make(chan struct{})
	return nil
}

// with returns the records whose message is msg.
func (rs *records) with(msg string) []slog.Record {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var out []slog.Record
	for _, r := range rs.all {
		if r.Message == msg {
			out = append(out, r)
		}
	}
	return out
}

// atLeast returns the records at level or above.
func (rs *records) atLeast(level slog.Level) []slog.Record {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var out []slog.Record
	for _, r := range rs.all {
		if r.Level >= level {
			out = append(out, r)
		}
	}
	return out
}

func (rs *records) String() string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var b strings.Builder
	for _, r := range rs.all {
		fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
		r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
		b.WriteByte('\n')
	}
	return b.String()
}

// until waits, on the records as they come, until ok holds.
func (rs *records) until(t *testing.T, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.After(limit)
	for {
		rs.mu.Lock()
		changed := rs.changed
		rs.mu.Unlock()
		if ok() {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("no %s within %v; log:\n%s", what, limit, rs)
		}
	}
}

func attr(r slog.Record, key string) (slog.Value, bool) {
	var v slog.Value
	found := false
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v, found = a.Value, true
		}
		return !found
	})
	return v, found
}

// The messages of an outage, as the worker logs them.
const (
	reserveStopped = "reserving jobs stopped: the database fails or cannot be reached"
	reserveResumed = "reserving jobs resumed"
	signalsStopped = "cannot read worker signals"
	signalsResumed = "worker signals read again"
)

// An outage is told once as it starts, with the error and what the worker
// does meanwhile, and once as it ends, with how long it lasted: for the
// claims and for the signal readings alike, however many retries it takes
// (the retries are at Debug). A job runs after it: claims work again. No
// job runs before it, whose delete the cut could meet. Before, the only lines were "cannot read
// worker signals" once per SignalInterval, and a claim retried a refused
// connection for 30s inside before the worker heard of it. SQLite has no
// server to lose.
func TestOutageIsToldOnce(t *testing.T) {
	t.Parallel()
	for _, d := range []dbqueue.Dialect{dbqueue.Postgres, dbqueue.MySQL} {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			db := dbtest.New(t, d)
			proxy, dsn := db.Proxy(t)
			q, err := dbqueue.Open(bg, dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			direct := db.Queue(t) // pushes that do not go through the proxy
			rec := newRecords()
			ran := make(chan int64, 4)
			looping := make(chan struct{})
			var once sync.Once
			w, _ := newWorker(t, q, worker.Options{Logger: slog.New(rec), MetricsInterval: -1,
				Events: worker.Events{Looping: func(context.Context) { once.Do(func() { close(looping) }) }}})
			w.Handle("n", func(ctx context.Context, job *dbqueue.Job) error {
				ran <- job.ID
				return nil
			})
			ctx, cancel := context.WithTimeout(bg, 60*time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- w.Run(ctx) }()
			runs := func(what string) {
				t.Helper()
				pushN(t, direct, 1, dbqueue.NewJob{Name: "n"})
				select {
				case <-ran:
				case <-ctx.Done():
					t.Fatalf("no job ran %s; log:\n%s", what, rec)
				}
			}
			<-looping // past the first reading of the signals: claiming

			proxy.Cut()
			// Both outages told, and retried several times since. (A claim's
			// retries inside its statement are told once they have lasted
			// a second: a deadlock retried at once is no outage.)
			rec.until(t, 30*time.Second, "retried outage", func() bool {
				return len(rec.with(reserveStopped)) > 0 && len(rec.with(signalsStopped)) > 0 &&
					len(rec.with(reserveStopped+": still failing")) >= 3 && len(rec.with(signalsStopped+": still failing")) >= 3
			})
			proxy.Restore()
			runs("after the outage")
			rec.until(t, 30*time.Second, "signals read again", func() bool { return len(rec.with(signalsResumed)) > 0 })
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}

			for _, m := range []struct {
				msg   string
				level slog.Level
				attr  string
			}{
				{reserveStopped, slog.LevelWarn, "error"},
				{reserveResumed, slog.LevelInfo, "after"},
				{signalsStopped, slog.LevelWarn, "error"},
				{signalsResumed, slog.LevelInfo, "after"},
			} {
				got := rec.with(m.msg)
				if len(got) != 1 {
					t.Errorf("%q logged %d times, want once; log:\n%s", m.msg, len(got), rec)
					continue
				}
				if got[0].Level != m.level {
					t.Errorf("%q at %v, want %v", m.msg, got[0].Level, m.level)
				}
				v, ok := attr(got[0], m.attr)
				if !ok {
					t.Errorf("%q has no %s", m.msg, m.attr)
				}
				if m.attr == "after" && (v.Kind() != slog.KindDuration || v.Duration() <= 0) {
					t.Errorf("%q says after=%v, want the outage's duration", m.msg, v)
				}
			}
			if loud := rec.atLeast(slog.LevelWarn); len(loud) != 2 {
				t.Errorf("%d records at Warn or above, want the two that say the outage started; log:\n%s", len(loud), rec)
			}
		})
	}
}

// Stopping while the database is down: jobs whose success cannot be
// written are retried through the grace period and no longer (the
// completer slept on a background context until the reservations were
// about to expire, 60s here), Run returns within GracePeriod plus the
// documented 2s, and its error names the jobs whose outcome it could not
// write; WorkerStopping hears the same.
func TestStopDuringOutageIsBounded(t *testing.T) {
	t.Parallel()
	for _, d := range []dbqueue.Dialect{dbqueue.Postgres, dbqueue.MySQL} {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			db := dbtest.New(t, d)
			proxy, dsn := db.Proxy(t)
			q, err := dbqueue.Open(bg, dsn, dbqueue.WithRetryAfter(60*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			ids := pushN(t, q, 4, dbqueue.NewJob{Name: "n"})
			rec := newRecords()
			started, release := make(chan struct{}, 4), make(chan struct{})
			const grace, bound = time.Second, 2 * time.Second
			stopping := make(chan error, 1)
			w, _ := newWorker(t, q, worker.Options{
				Concurrency: 4, GracePeriod: grace, Timeout: 10 * time.Second, Logger: slog.New(rec),
				Events: worker.Events{WorkerStopping: func(_ worker.StopReason, err error) { stopping <- err }},
			})
			w.Handle("n", func(ctx context.Context, job *dbqueue.Job) error {
				started <- struct{}{}
				<-release
				return nil
			})
			ctx, cancel := context.WithCancel(bg)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- w.Run(ctx) }()
			for range ids {
				<-started
			}
			proxy.Cut()
			close(release)
			// The handlers have returned; their deletes cannot be written.
			rec.until(t, 30*time.Second, "handlers returned", func() bool { return len(rec.with("job")) == len(ids) })
			cancel()
			stopped := time.Now()
			var runErr error
			select {
			case runErr = <-done:
			case <-time.After(2 * time.Minute):
				t.Fatalf("Run did not return; log:\n%s", rec)
			}
			took := time.Since(stopped)
			t.Logf("Run returned %v after it was told to stop", took.Round(time.Millisecond))
			if took > grace+bound {
				t.Errorf("Run returned %v after it was told to stop, want at most GracePeriod (%v) + %v; log:\n%s", took, grace, bound, rec)
			}
			var unwritten *worker.UnwrittenError
			if !errors.As(runErr, &unwritten) {
				t.Fatalf("Run returned %v, want an UnwrittenError; log:\n%s", runErr, rec)
			}
			got := slices.Sorted(slices.Values(unwritten.IDs))
			if !slices.Equal(got, ids) {
				t.Errorf("UnwrittenError names %v, want the jobs whose success was not written %v", got, ids)
			}
			if unwritten.Err == nil || !strings.Contains(runErr.Error(), fmt.Sprint(ids[0])) {
				t.Errorf("the error does not carry the cause and the ids: %v", runErr)
			}
			if ev := <-stopping; !errors.As(ev, &unwritten) {
				t.Errorf("WorkerStopping heard %v, want the UnwrittenError", ev)
			}
			// What Run reported is what the database holds: the jobs are
			// still there, reserved, to run again after retry_after.
			if n := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE reserved_at IS NOT NULL"); n != len(ids) {
				t.Errorf("%d jobs reserved after the stop, want %d", n, len(ids))
			}
		})
	}
}

// A runner resting between jobs (Options.Rest) stops resting when the
// worker stops: Run does not wait out the rest (it slept through it, and
// the grace period, and was then reported as a handler that ignored
// cancellation).
func TestStopCutsTheRest(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t, dbqueue.SQLite)
	q := db.Queue(t)
	pushN(t, q, 1, dbqueue.NewJob{Name: "n"})
	w, logs := newWorker(t, q, worker.Options{Rest: time.Hour, GracePeriod: 30 * time.Second, MetricsInterval: -1})
	ran := make(chan struct{})
	w.Handle("n", func(ctx context.Context, job *dbqueue.Job) error { close(ran); return nil })
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	<-ran
	dbtest.WaitFor(t, 20*time.Second, "the job deleted", func() bool { return db.Count(t, "SELECT COUNT(*) FROM jobs") == 0 })
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("Run waited out the rest past 10s (grace period 30s); log:\n%s", logs)
	}
	if strings.Contains(logs.String(), "ignored cancellation") {
		t.Fatalf("a resting runner was taken for a stuck handler:\n%s", logs)
	}
}

// A queue closed under a running worker cannot be worked again: Run stops
// at once with an error that says so, instead of retrying a closed pool
// forever, and the jobs whose outcome it could not write are named.
func TestClosedQueueStopsRun(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q, err := dbqueue.Open(bg, db.DSN, dbqueue.WithRetryAfter(60*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		ids := pushN(t, q, 2, dbqueue.NewJob{Name: "n"})
		started, release := make(chan struct{}, 2), make(chan struct{})
		w, logs := newWorker(t, q, worker.Options{Concurrency: 2, GracePeriod: 30 * time.Second, Timeout: 10 * time.Second, MetricsInterval: -1})
		w.Handle("n", func(ctx context.Context, job *dbqueue.Job) error {
			started <- struct{}{}
			<-release
			return nil
		})
		done := make(chan error, 1)
		go func() { done <- w.Run(bg) }()
		for range ids {
			<-started
		}
		q.Close()
		close(release)
		var runErr error
		select {
		case runErr = <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("Run went on with a closed queue; log:\n%s", logs)
		}
		if runErr == nil || !strings.Contains(runErr.Error(), "closed") {
			t.Fatalf("Run returned %v, want an error saying the queue was closed", runErr)
		}
		var unwritten *worker.UnwrittenError
		if !errors.As(runErr, &unwritten) {
			t.Fatalf("Run returned %v, want an UnwrittenError too", runErr)
		}
		if got := slices.Sorted(slices.Values(unwritten.IDs)); !slices.Equal(got, ids) {
			t.Errorf("UnwrittenError names %v, want %v", got, ids)
		}
		if strings.Contains(logs.String(), "retrying") {
			t.Errorf("a closed queue was retried:\n%s", logs)
		}
	})
}

// Run on a queue already closed returns at once with the error, instead
// of retrying the first reading of the signals forever.
func TestRunOnClosedQueueReturns(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q, err := dbqueue.Open(bg, db.DSN)
		if err != nil {
			t.Fatal(err)
		}
		w, logs := newWorker(t, q, worker.Options{MetricsInterval: -1})
		w.Handle("n", func(context.Context, *dbqueue.Job) error { return nil })
		q.Close()
		if err := runReturns(t, bg, w, 10*time.Second); err == nil || !strings.Contains(err.Error(), "closed") {
			t.Fatalf("Run on a closed queue returned %v, want the closed pool's error; log:\n%s", err, logs)
		}
	})
}
