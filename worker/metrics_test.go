package worker_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/worker"
)

// longQueue is a queue name of 255 bytes, with multi-byte characters
// (so on MySQL it is fewer than 255 characters, and byte-exact).
var longQueue = func() string {
	s := "Mail é 名前 " + strings.Repeat("q", 255)
	return s[:255]
}()

// longKind is a job name longer than the tables' 255 characters: the
// metrics keep its first 255.
var longKind = strings.Repeat("K", 300)

// dsnFlags is the test database's DSN with the MySQL flags that change
// what the server reports, on MySQL; the DSN itself elsewhere.
func dsnFlags(db *dbtest.DB) string {
	if db.Dialect != dbqueue.MySQL {
		return db.DSN
	}
	sep := "?"
	if strings.Contains(db.DSN, "?") {
		sep = "&"
	}
	return db.DSN + sep + "clientFoundRows=true&parseTime=true&loc=Local"
}

// waitFor polls cond until it holds or 20 seconds pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	dbtest.WaitFor(t, 20*time.Second, what, cond)
}

func metricsNow(t *testing.T, q *dbqueue.Queue, mq dbqueue.MetricsQuery) dbqueue.Metrics {
	t.Helper()
	m, err := q.Metrics(bg, mq)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Two workers on two pools (one with MySQL's DSN flags) work one queue:
// what each records adds up in the metrics table, per queue and kind,
// including the writes each makes as it stops. One writes only then (an
// hour's interval), so its counts reach the table only through the
// flush on stop. Their heartbeat rows appear while they run, are updated,
// and are gone once they stop.
func TestMetricsAddUpAcrossWorkers(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		qa := db.Queue(t)
		qb := (&dbtest.DB{Dialect: db.Dialect, DSN: dsnFlags(db)}).Queue(t)
		push := func(n int, name string) { pushN(t, qa, n, dbqueue.NewJob{Name: name, Queue: longQueue}) }
		push(30, "ok")
		push(4, "bad")
		push(5, "again")
		push(3, longKind)
		var seen atomic.Int64
		// a stops taking "ok" jobs after its first five until b has run
		// one, so b's heartbeat has jobs to count however quickly a could
		// have emptied the queue alone.
		bRan := make(chan struct{})
		var bOnce sync.Once
		handlers := func(w *worker.Worker, isB bool) {
			w.Handle("ok", func(ctx context.Context, job *dbqueue.Job) error {
				if isB {
					bOnce.Do(func() { close(bRan) })
				} else if seen.Load() >= 5 {
					select {
					case <-bRan:
					case <-ctx.Done():
						return ctx.Err()
					}
				}
				seen.Add(1)
				time.Sleep(3 * time.Millisecond) // work to time
				return nil
			})
			w.Handle("bad", func(ctx context.Context, job *dbqueue.Job) error { return errors.New("boom") })
			w.Handle("again", func(ctx context.Context, job *dbqueue.Job) error {
				if job.Attempts == 1 {
					return worker.ReleaseAfter(0)
				}
				return nil
			}, worker.WithTries(3))
			w.Handle(longKind, func(ctx context.Context, job *dbqueue.Job) error { return nil })
		}
		wa, _ := newWorker(t, qa, worker.Options{Name: "a", Queues: []string{longQueue}, Concurrency: 2, Prefetch: -1, MetricsInterval: time.Hour})
		wb, _ := newWorker(t, qb, worker.Options{Name: "b", Queues: []string{longQueue}, Concurrency: 3, MetricsInterval: 50 * time.Millisecond})
		handlers(wa, false)
		handlers(wb, true)
		ctx, cancel := context.WithCancel(bg)
		defer cancel()
		errs := make(chan error, 2)
		// a works alone first, so some of the counts are its own.
		go func() { errs <- wa.Run(ctx) }()
		waitFor(t, "a to run jobs", func() bool { return seen.Load() >= 5 })
		go func() { errs <- wb.Run(ctx) }()
		// Both heartbeat rows appear, naming the queue.
		waitFor(t, "two heartbeat rows", func() bool {
			ws, err := qa.Workers(bg)
			return err == nil && len(ws) == 2
		})
		ws, _ := qa.Workers(bg)
		if ws[0].Name != "a" || ws[1].Name != "b" || !slices.Equal(ws[0].Queues, []string{longQueue}) || ws[1].Concurrency != 3 || ws[0].PID == 0 || ws[0].Host == "" || ws[0].Version == "" {
			t.Fatalf("heartbeat rows: %+v", ws)
		}
		waitFor(t, "the queue to empty", func() bool { return db.Count(t, "SELECT COUNT(*) FROM jobs") == 0 })
		// b's row is updated with what it processed.
		waitFor(t, "b's heartbeat to count its jobs", func() bool {
			ws, err := qa.Workers(bg)
			return err == nil && len(ws) == 2 && ws[1].Processed > 0 && !ws[1].LastSeen.Before(ws[1].Started)
		})
		cancel()
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		if ws, err := qa.Workers(bg); err != nil || len(ws) != 0 {
			t.Fatalf("heartbeat rows after both stopped: %+v, %v; want none", ws, err)
		}

		m := metricsNow(t, qa, dbqueue.MetricsQuery{Queue: longQueue})
		if m.Total.Processed != 30+5+3 || m.Total.Failed != 4 || m.Total.Released != 5 {
			t.Fatalf("totals %+v; want 38 processed, 4 failed, 5 released", m.Total)
		}
		byKind := map[string]dbqueue.MetricsGroup{}
		for _, g := range m.Groups {
			if g.Queue != longQueue {
				t.Errorf("group of queue %q, want the long queue", g.Queue)
			}
			byKind[g.Kind] = g
		}
		if g := byKind["ok"]; g.Processed != 30 || g.RuntimeP50 < 2*time.Millisecond || g.RuntimeP95 < g.RuntimeP50 || g.WaitP95 < 0 {
			t.Errorf("ok: %+v; want 30 processed, runtime p50 of 2ms or more (each sleeps 3ms)", g)
		}
		if g := byKind["again"]; g.Processed != 5 || g.Released != 5 {
			t.Errorf("again: %+v; want 5 processed and 5 released", g)
		}
		if g := byKind[longKind[:255]]; g.Processed != 3 {
			t.Errorf("the long kind, cut to 255 characters: %+v (groups %v)", g, slices.Collect(mapsKeys(byKind)))
		}
		if g := byKind["bad"]; g.Failed != 4 || g.FailureRate() != 1 {
			t.Errorf("bad: %+v; want 4 failed, failure rate 1", g)
		}
		// The per-minute points sum to the total.
		var sum int64
		for _, p := range m.Points {
			sum += p.Processed
		}
		if sum != m.Total.Processed {
			t.Errorf("points sum to %d processed, total says %d", sum, m.Total.Processed)
		}
	})
}

func mapsKeys(m map[string]dbqueue.MetricsGroup) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// A write that fails (the table is gone for a while) keeps its counts,
// and the next write that works adds them.
func TestMetricsCarriedOverFailedWrite(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		w, logs := newWorker(t, q, worker.Options{MetricsInterval: 30 * time.Millisecond})
		w.Handle("n", func(ctx context.Context, job *dbqueue.Job) error { return nil })
		ctx, cancel := context.WithCancel(bg)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		waitFor(t, "the first heartbeat", func() bool { return db.Count(t, "SELECT COUNT(*) FROM jobs_workers") == 1 })
		db.Exec(t, "ALTER TABLE jobs_metrics RENAME TO jobs_metrics_away")
		pushN(t, q, 7, dbqueue.NewJob{Name: "n"})
		waitFor(t, "the queue to empty", func() bool { return db.Count(t, "SELECT COUNT(*) FROM jobs") == 0 })
		waitFor(t, "a failed write", func() bool { return strings.Contains(logs.String(), "cannot write metrics") })
		db.Exec(t, "ALTER TABLE jobs_metrics_away RENAME TO jobs_metrics")
		waitFor(t, "the carried counts", func() bool {
			return db.Count(t, "SELECT COALESCE(SUM(processed), 0) FROM jobs_metrics") == 7
		})
		waitFor(t, "the recovery to be logged", func() bool { return strings.Contains(logs.String(), "written again") })
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if n := db.Count(t, "SELECT SUM(processed) FROM jobs_metrics"); n != 7 {
			t.Fatalf("%d processed in the table, want 7 (counted once)", n)
		}
	})
}

// On a schema without migration 00011's hourly table, a worker works its
// jobs and writes neither the minutes nor the hours (one transaction): it
// logs that migrate up is due and keeps its counts, which land in both
// tables once the table is there, counted once, each hour's row the sum
// of its minutes' rows column for column.
func TestMetricsWaitForHourlyTable(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		w, logs := newWorker(t, q, worker.Options{MetricsInterval: 30 * time.Millisecond})
		w.Handle("n", func(ctx context.Context, job *dbqueue.Job) error { return nil })
		db.Exec(t, "ALTER TABLE jobs_metrics_hourly RENAME TO jobs_metrics_hourly_away")
		ctx, cancel := context.WithCancel(bg)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		pushN(t, q, 7, dbqueue.NewJob{Name: "n"})
		waitFor(t, "the queue to empty", func() bool { return db.Count(t, "SELECT COUNT(*) FROM jobs") == 0 })
		waitFor(t, "a failed write", func() bool { return strings.Contains(logs.String(), "cannot write metrics") })
		if l := logs.String(); !strings.Contains(l, "00011") || !strings.Contains(l, "run migrate up") {
			t.Errorf("the warning does not say to run migrate up for 00011:\n%s", l)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs_metrics"); n != 0 {
			t.Fatalf("%d minute rows written without their hours", n)
		}
		db.Exec(t, "ALTER TABLE jobs_metrics_hourly_away RENAME TO jobs_metrics_hourly")
		waitFor(t, "the carried counts", func() bool {
			return db.Count(t, "SELECT COALESCE(SUM(processed), 0) FROM jobs_metrics_hourly") == 7
		})
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if n := db.Count(t, "SELECT SUM(processed) FROM jobs_metrics"); n != 7 {
			t.Fatalf("%d processed in the minutes, want 7 (counted once)", n)
		}
		if n := strings.Count(logs.String(), "cannot write metrics"); n != 1 {
			t.Errorf("the failure was logged %d times, want once", n)
		}
		// Every hour's row is the sum of its minutes, in every column.
		cols := []string{"processed", "failed", "released"}
		for i := range 24 {
			cols = append(cols, fmt.Sprintf("rt%02d", i), fmt.Sprintf("wt%02d", i))
		}
		for _, c := range cols {
			diff := db.Count(t, "SELECT COUNT(*) FROM jobs_metrics_hourly h WHERE h."+c+" <> (SELECT COALESCE(SUM(m."+c+"), 0) FROM jobs_metrics m"+
				" WHERE m.queue = h.queue AND m.kind = h.kind AND m.bucket >= h.bucket AND m.bucket < h.bucket + 3600)")
			if diff != 0 {
				t.Errorf("column %s: %d hours differ from their minutes", c, diff)
			}
		}
		var waits []string
		for i := range 24 {
			waits = append(waits, fmt.Sprintf("SUM(wt%02d)", i))
		}
		if n := db.Count(t, "SELECT "+strings.Join(waits, " + ")+" FROM jobs_metrics_hourly"); n != 7 {
			t.Errorf("%d waits in the hours, want 7", n)
		}
	})
}

// A heartbeat row whose worker was killed (it expired unrefreshed) is
// deleted by any running worker; one that has not expired is kept. A
// worker name longer than the column (and not valid UTF-8, with a NUL)
// is stored escaped as every failure text is (dialect.StorableText), cut
// to 255 characters.
func TestStaleWorkerRowPruned(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		ins := "INSERT INTO jobs_workers (id, name, host, pid, version, queues, concurrency, running, processed, started_at, last_seen, expires_at)" +
			" VALUES (?, 'killed', 'h', 1, 'v', '[]', 1, 1, 0, " + db.Now() + " - 100, " + db.Now() + " - 100, " + db.Now() + " - ?)"
		db.Exec(t, ins, "dead", 5)
		db.Exec(t, ins, "alive", -3600) // expires in an hour
		name := "\xff\x00" + strings.Repeat("名", 300)
		w, _ := newWorker(t, q, worker.Options{MetricsInterval: 30 * time.Millisecond, Name: name, Queues: []string{longQueue}})
		w.Handle("n", func(ctx context.Context, job *dbqueue.Job) error { return nil })
		ctx, cancel := context.WithCancel(bg)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		waitFor(t, "the dead worker's row to go", func() bool {
			return db.Count(t, "SELECT COUNT(*) FROM jobs_workers WHERE id = 'dead'") == 0
		})
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs_workers WHERE id = 'alive'"); n != 1 {
			t.Fatalf("the unexpired row was deleted")
		}
		ws, err := q.Workers(bg)
		if err != nil || len(ws) != 2 {
			t.Fatalf("workers: %+v, %v; want the running one and the unexpired one", ws, err)
		}
		var mine dbqueue.WorkerInfo
		for _, w := range ws {
			if w.Name != "killed" {
				mine = w
			}
		}
		if want := `\xff\x00` + strings.Repeat("名", 247); mine.Name != want || !slices.Equal(mine.Queues, []string{longQueue}) {
			t.Fatalf("the running worker's row: name %q, queues %q; want %q and the long queue", mine.Name, mine.Queues, want)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// MetricsInterval below zero writes nothing: no heartbeat, no metrics.
func TestMetricsOff(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		pushN(t, q, 3, dbqueue.NewJob{Name: "n"})
		w, _ := newWorker(t, q, worker.Options{MetricsInterval: -1, StopWhenEmpty: true})
		w.Handle("n", func(ctx context.Context, job *dbqueue.Job) error { return nil })
		if err := runUntil(t, w, 20*time.Second); err != nil {
			t.Fatal(err)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs_metrics") + db.Count(t, "SELECT COUNT(*) FROM jobs_workers"); n != 0 {
			t.Fatalf("%d rows written with metrics off", n)
		}
	})
}

// With HistoryRetention, finished jobs (done and failed, not released)
// are written to the history, by the database clock; entries older than
// the retention are deleted.
func TestJobHistory(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		old := "INSERT INTO jobs_history (id, uuid, queue, kind, attempts, finished_at, runtime_us, outcome) VALUES (1, 'old', 'default', 'n', 1, " + db.Now() + " - 7200, 5, 'done')"
		for range 3 {
			db.Exec(t, old)
		}
		pushN(t, q, 3, dbqueue.NewJob{Name: "ok"})
		pushN(t, q, 2, dbqueue.NewJob{Name: "bad", Queue: longQueue})
		w, _ := newWorker(t, q, worker.Options{HistoryRetention: time.Hour, StopWhenEmpty: true, Queues: []string{"default", longQueue}})
		w.Handle("ok", func(ctx context.Context, job *dbqueue.Job) error { return nil })
		w.Handle("bad", func(ctx context.Context, job *dbqueue.Job) error { return errors.New("boom") })
		if err := runUntil(t, w, 20*time.Second); err != nil {
			t.Fatal(err)
		}
		h, err := q.History(bg, dbqueue.HistoryQuery{})
		if err != nil {
			t.Fatal(err)
		}
		if len(h) != 5 {
			t.Fatalf("%d history entries, want 5 (the 3 old ones pruned): %+v", len(h), h)
		}
		var now int64
		if err := db.SQL.QueryRow("SELECT " + db.Now()).Scan(&now); err != nil {
			t.Fatal(err)
		}
		for _, e := range h {
			if e.UUID == "" || e.ID == 0 || e.Attempts != 1 || e.Finished.Unix() < now-60 || e.Finished.Unix() > now+1 {
				t.Errorf("entry %+v (database now %d)", e, now)
			}
		}
		failed, err := q.History(bg, dbqueue.HistoryQuery{Outcome: "failed", Queue: longQueue})
		if err != nil || len(failed) != 2 || failed[0].Kind != "bad" || failed[0].Seq <= failed[1].Seq {
			t.Fatalf("failed entries of the long queue, newest first: %+v, %v", failed, err)
		}
		// The two queues are worked at once, so the newest failed entry need
		// not be the newest of all: count what came before it.
		before := 0
		for _, e := range h {
			if e.Seq < failed[0].Seq {
				before++
			}
		}
		if page, err := q.History(bg, dbqueue.HistoryQuery{Before: failed[0].Seq, Limit: 10}); err != nil || len(page) != before || before < 1 {
			t.Fatalf("entries before seq %d: %d, %v; want %d of %+v", failed[0].Seq, len(page), err, before, h)
		}
	})
}
