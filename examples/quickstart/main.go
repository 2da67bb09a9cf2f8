// Command quickstart shows dbqueue working end to end with nothing to
// install: it creates a SQLite file, migrates it, enqueues a realistic mix
// of jobs, works them with a concurrent worker while showing progress, and
// prints a summary with the failed jobs. It exits non-zero if any job was
// lost.
//
//	go run ./examples/quickstart
//	go run ./examples/quickstart -dsn postgres://postgres@127.0.0.1:5432/test
//	go run ./examples/quickstart -dsn 'root@tcp(127.0.0.1:3306)/test'
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dbqueue/dbqueue"
	_ "github.com/dbqueue/dbqueue/driver/dbqmysql" // -dsn may name any of the three
	_ "github.com/dbqueue/dbqueue/driver/dbqpgx"
	_ "github.com/dbqueue/dbqueue/driver/dbqsqlite"
	"github.com/dbqueue/dbqueue/failed"
	"github.com/dbqueue/dbqueue/migrations"
	"github.com/dbqueue/dbqueue/worker"
)

// queueName keeps the demo's jobs apart from anything else in the database.
const queueName = "quickstart"

// The mix: most jobs succeed, some fail once and succeed on retry, a few
// fail for good, some run after a delay.
type mix struct{ ok, flaky, broken, delayed int }

func newMix(total int) mix {
	m := mix{flaky: total / 10, broken: total / 50, delayed: total * 3 / 100}
	m.ok = total - m.flaky - m.broken - m.delayed
	return m
}

type counters struct {
	done, retried, failed, lost atomic.Int64
}

func main() {
	dsn := flag.String("dsn", "sqlite:./quickstart.db", "database DSN (postgres://…, mysql://… or user@tcp(host)/db, sqlite:path)")
	total := flag.Int("jobs", 10000, "how many jobs to enqueue")
	concurrency := flag.Int("concurrency", 16, "jobs the worker runs at once")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *dsn, *total, *concurrency, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dsn string, total, concurrency int, out io.Writer) error {
	if total < 100 {
		return fmt.Errorf("-jobs %d: use at least 100 so every kind of job is in the mix", total)
	}
	if strings.HasPrefix(dsn, "sqlite:./quickstart.db") {
		for _, f := range []string{"quickstart.db", "quickstart.db-wal", "quickstart.db-shm"} {
			_ = os.Remove(f) // start fresh each run
		}
	}
	// What the migrations did (PostgreSQL's autovacuum options, widened
	// columns) goes to the quickstart's own log on stderr, as an
	// application's would, not to slog.Default.
	setupLog := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := migrations.UpDSN(ctx, dsn, migrations.WithLogger(setupLog)); err != nil {
		return err
	}
	q, err := dbqueue.Open(ctx, dsn, dbqueue.WithDefaultQueue(queueName), dbqueue.WithRetryAfter(30*time.Second))
	if err != nil {
		return err
	}
	defer q.Close()
	store, err := failed.New(q)
	if err != nil {
		return err
	}
	if _, err := q.Clear(ctx, queueName); err != nil { // leftovers of an interrupted run
		return err
	}
	if err := forgetOld(ctx, store); err != nil {
		return err
	}

	m := newMix(total)
	fmt.Fprintf(out, "dbqueue quickstart on %s: %d jobs (%d succeed, %d fail once then succeed, %d fail for good, %d delayed 2s)\n",
		q.Dialect(), total, m.ok, m.flaky, m.broken, m.delayed)
	start := time.Now()
	if err := enqueue(ctx, q, m); err != nil {
		return err
	}
	fmt.Fprintf(out, "enqueued %d jobs in %v\n", total, time.Since(start).Round(time.Millisecond))

	var c counters
	w, err := worker.New(q, worker.Options{
		Concurrency: concurrency, Sleep: 100 * time.Millisecond, Timeout: 10 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), // progress replaces per-job lines
		Events: worker.Events{
			JobReleasedAfterException: func(context.Context, *dbqueue.Job, time.Duration) { c.retried.Add(1) },
			JobFailed:                 func(context.Context, *dbqueue.Job, error) { c.failed.Add(1) },
		},
	})
	if err != nil {
		return err
	}
	register(w, &c)

	workCtx, stopWork := context.WithCancel(ctx)
	defer stopWork()
	runErr := make(chan error, 1)
	workStart := time.Now()
	go func() { runErr <- w.Run(workCtx) }()

	finished := progress(ctx, q, &c, int64(total), workStart, out)
	stopWork()
	if err := <-runErr; err != nil {
		return err
	}
	took := time.Since(workStart)
	return summary(ctx, q, store, &c, m, took, finished, out)
}

func forgetOld(ctx context.Context, store *failed.Store) error {
	for {
		old, err := store.List(ctx, failed.Filter{Queue: queueName, Limit: failed.MaxLimit})
		if err != nil || len(old) == 0 {
			return err
		}
		for _, j := range old {
			if _, err := store.Forget(ctx, j.UUID); err != nil {
				return err
			}
		}
	}
}

func enqueue(ctx context.Context, q *dbqueue.Queue, m mix) error {
	var jobs []dbqueue.NewJob
	add := func(n int, job dbqueue.NewJob) {
		for i := 0; i < n; i++ {
			j := job
			j.Data = map[string]int{"n": len(jobs)}
			jobs = append(jobs, j)
		}
	}
	add(m.ok, dbqueue.NewJob{Name: "resize-image"})
	add(m.flaky, dbqueue.NewJob{Name: "charge-card", MaxTries: 3, Backoff: []time.Duration{time.Second}})
	add(m.broken, dbqueue.NewJob{Name: "send-sms", MaxTries: 2, Backoff: []time.Duration{time.Second}})
	add(m.delayed, dbqueue.NewJob{Name: "send-reminder", Delay: 2 * time.Second})
	rand.Shuffle(len(jobs), func(i, k int) { jobs[i], jobs[k] = jobs[k], jobs[i] })
	_, err := q.PushMany(ctx, jobs)
	return err
}

func register(w *worker.Worker, c *counters) {
	work := func() { time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond) }
	ok := func(ctx context.Context, job *dbqueue.Job) error { work(); c.done.Add(1); return nil }
	w.Handle("resize-image", ok)
	w.Handle("send-reminder", ok)
	w.Handle("charge-card", func(ctx context.Context, job *dbqueue.Job) error {
		work()
		if job.Attempts == 1 {
			return errors.New("payment gateway timeout")
		}
		c.done.Add(1)
		return nil
	})
	w.Handle("send-sms", func(ctx context.Context, job *dbqueue.Job) error {
		return errors.New("sms: invalid phone number")
	})
}

// progress redraws one line until every job is done or failed, the queue
// is empty, or two minutes pass. It reports whether the run finished.
func progress(ctx context.Context, q *dbqueue.Queue, c *counters, total int64, start time.Time, out io.Writer) bool {
	tty := isTerminal(out)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	lastPrint := time.Time{}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
		s, err := q.Size(ctx, queueName)
		done, failedN := c.done.Load(), c.failed.Load()
		rate := float64(done+failedN) / time.Since(start).Seconds()
		line := fmt.Sprintf("processed %6d/%d  retried %4d  failed %3d  | pending %5d delayed %4d reserved %3d | %6.0f jobs/s",
			done+failedN, total, c.retried.Load(), failedN, s.Pending, s.Delayed, s.Reserved, rate)
		finished := err == nil && done+failedN >= total && s.Total() == 0
		if tty {
			fmt.Fprintf(out, "\r%s", line)
		} else if time.Since(lastPrint) >= time.Second || finished {
			fmt.Fprintln(out, line)
			lastPrint = time.Now()
		}
		if finished || time.Now().After(deadline) {
			if tty {
				fmt.Fprintln(out)
			}
			return finished
		}
	}
}

func summary(ctx context.Context, q *dbqueue.Queue, store *failed.Store, c *counters, m mix, took time.Duration, finished bool, out io.Writer) error {
	s, err := q.Size(ctx, queueName)
	if err != nil {
		return err
	}
	list, err := store.List(ctx, failed.Filter{Queue: queueName, Limit: failed.MaxLimit})
	if err != nil {
		return err
	}
	done, failedN := c.done.Load(), c.failed.Load()
	total := int64(m.ok + m.flaky + m.broken + m.delayed)
	fmt.Fprintf(out, "\nsummary\n  processed   %d jobs in %v (%.0f jobs/s, delayed jobs included)\n", done+failedN, took.Round(time.Millisecond), float64(done+failedN)/took.Seconds())
	fmt.Fprintf(out, "  succeeded   %d\n  retried     %d (released with backoff after an error)\n  failed      %d (in failed_jobs)\n  left        %d in jobs\n", done, c.retried.Load(), failedN, s.Total())
	fmt.Fprintf(out, "\nfailed jobs (failed.Store.List, newest first; %d in all):\n", len(list))
	for i, j := range list {
		if i == 5 {
			fmt.Fprintf(out, "  … and %d more\n", len(list)-5)
			break
		}
		first, _, _ := strings.Cut(j.Exception, "\n")
		fmt.Fprintf(out, "  %s  %-9s %s  %s\n", j.UUID, j.Name(), j.FailedAt.Format(time.TimeOnly), first)
	}
	var problems []string
	if !finished {
		problems = append(problems, "the run did not finish within two minutes")
	}
	if done != total-int64(m.broken) {
		problems = append(problems, fmt.Sprintf("%d jobs succeeded, want %d", done, total-int64(m.broken)))
	}
	if int(failedN) != m.broken || len(list) != m.broken {
		problems = append(problems, fmt.Sprintf("%d failure events and %d rows in failed_jobs, want %d", failedN, len(list), m.broken))
	}
	if s.Total() != 0 {
		problems = append(problems, fmt.Sprintf("%d jobs left in the queue", s.Total()))
	}
	if len(problems) > 0 {
		return fmt.Errorf("jobs were lost or left over: %s", strings.Join(problems, "; "))
	}
	fmt.Fprintln(out, "\nevery job is accounted for: nothing lost")
	return nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}
