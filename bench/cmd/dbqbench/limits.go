package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/bench"
	"github.com/dbqueue/dbqueue/bench/dbqueueq"
	"github.com/dbqueue/dbqueue/worker"
)

// limits' flags.
var (
	limitsJobs     = flag.Int("limits-jobs", 50_000, "limits: no-op jobs per burn-down")
	limitsSlowJobs = flag.Int("limits-slow-jobs", 20_000, "limits: 5 ms jobs per burn-down")
)

// limitsSchema is the limits measurement's own schema or database.
const limitsSchema = "dbqueue_limits"

// limitCase is one row of the limits measurement: how its jobs are
// pushed, and whether a limit is declared on other jobs.
type limitCase struct {
	name string
	// job returns the i-th job's limit (nil: none).
	limit func(i int) *dbqueue.Concurrency
	// other declares a limit on jobs of another queue (one delayed job),
	// so the claims of these run the limited claim's check.
	other bool
}

var (
	noLimit     = limitCase{name: "no limit declared", limit: func(int) *dbqueue.Concurrency { return nil }}
	otherLimit  = limitCase{name: "a limit declared on other jobs, none on these", limit: func(int) *dbqueue.Concurrency { return nil }, other: true}
	globalLimit = limitCase{name: "all under one limit of 1,000", limit: func(int) *dbqueue.Concurrency { return &dbqueue.Concurrency{Limit: "all", PerKey: 1_000} }}
	perKeyLimit = limitCase{name: "1 at a time per key, over 10,000 keys", limit: func(i int) *dbqueue.Concurrency {
		return &dbqueue.Concurrency{Limit: "per-key", Key: fmt.Sprint(i % 10_000), PerKey: 1}
	}}
	fortyLimit    = limitCase{name: "under one limit of 40", limit: func(int) *dbqueue.Concurrency { return &dbqueue.Concurrency{Limit: "forty", PerKey: 40} }}
	fortyNoLimit  = limitCase{name: "no limit", limit: func(int) *dbqueue.Concurrency { return nil }}
	limitsNoOp    = []limitCase{noLimit, otherLimit, globalLimit, perKeyLimit}
	limitsFiveMs  = []limitCase{fortyNoLimit, fortyLimit}
	fiveMsHandler = func(context.Context, *dbqueue.Job) error { time.Sleep(5 * time.Millisecond); return nil }
)

// runLimits measures what concurrency limits in the claim cost: no-op jobs
// burned down by one worker with and without limits that never bind, and
// 5 ms jobs through 4 workers of 10 handlers (each on its own pool) with
// and without a limit of 40, which then binds exactly.
func runLimits(ctx context.Context, c *config, d string) error {
	began, loadBefore := time.Now(), bench.LoadAvg()
	var b strings.Builder
	var version string
	table := func(title string, o dbqueueq.Options, h worker.HandlerFunc, cases []limitCase, jobs int) error {
		o.Schema = limitsSchema
		sys, _, err := openDialect(ctx, c, d, o, limitsSQLiteDSN(c.sqliteDSN))
		if err != nil {
			return err
		}
		defer sys.Close()
		if h != nil {
			sys.SetHandler(h)
		}
		if err := sys.Setup(ctx); err != nil {
			return err
		}
		if version, err = sys.ServerVersion(ctx); err != nil {
			return err
		}
		rates := make([][]float64, len(cases))
		// Rounds go across the cases, so drift in the machine's speed
		// lands on every row alike.
		for round := range c.rounds {
			for i, lc := range cases {
				rctx, cancel := context.WithTimeout(ctx, c.timeout)
				rate, err := burnDownLimited(rctx, sys, lc, jobs)
				cancel()
				if err != nil {
					return fmt.Errorf("%s: %w", lc.name, err)
				}
				rates[i] = append(rates[i], rate)
				fmt.Fprintf(os.Stderr, "%s %-8s round %d  %-50s %8.0f jobs/s  load %s\n",
					time.Now().Format("15:04:05"), d, round+1, lc.name, rate, bench.LoadAvg())
			}
		}
		fmt.Fprintf(&b, "\n%s\n\n| jobs | median jobs/s | min | max | × first row |\n|---|---:|---:|---:|---:|\n", title)
		base := median(rates[0])
		for i, lc := range cases {
			fmt.Fprintf(&b, "| %s | %.0f | %.0f | %.0f | %.2f |\n", lc.name, median(rates[i]), slices.Min(rates[i]), slices.Max(rates[i]), median(rates[i])/base)
		}
		return nil
	}
	one := c.worker
	one.Workers = 1
	if err := table(fmt.Sprintf("%d no-op jobs, one worker of %d handlers:", *limitsJobs, one.Concurrency), one, nil, limitsNoOp, *limitsJobs); err != nil {
		return err
	}
	four := c.worker
	four.Workers, four.Concurrency = 4, 10
	if err := table(fmt.Sprintf("%d jobs of 5 ms, 4 workers of 10 handlers, each on its own pool:", *limitsSlowJobs), four, fiveMsHandler, limitsFiveMs, *limitsSlowJobs); err != nil {
		return err
	}
	fmt.Print(reportHead(fmt.Sprintf("Concurrency limits in the claim (%s)", d), version, began, loadBefore))
	fmt.Printf("- medians of %d rounds, taken in turn across the rows\n%s\n", c.rounds, b.String())
	return nil
}

// burnDownLimited empties the tables, pushes n jobs of case lc (not
// timed), then times the system's workers until all are done.
func burnDownLimited(ctx context.Context, sys *dbqueueq.System, lc limitCase, n int) (float64, error) {
	if err := sys.Reset(ctx); err != nil {
		return 0, err
	}
	if _, err := sys.Admin().ExecContext(ctx, "DELETE FROM jobs_flow"); err != nil {
		return 0, fmt.Errorf("reset the limits: %w", err)
	}
	q := sys.Queue()
	if lc.other {
		_, err := q.Push(ctx, dbqueue.NewJob{Name: dbqueueq.JobName, Queue: "elsewhere", Delay: time.Hour,
			Concurrency: &dbqueue.Concurrency{Limit: "elsewhere", PerKey: 1}})
		if err != nil {
			return 0, err
		}
	}
	data := json.RawMessage(`{"num":0}`)
	batch := make([]dbqueue.NewJob, 0, 1_000)
	for i := range n {
		batch = append(batch, dbqueue.NewJob{Name: dbqueueq.JobName, Data: data, Concurrency: lc.limit(i)})
		if len(batch) == cap(batch) || i == n-1 {
			if _, err := q.PushMany(ctx, batch); err != nil {
				return 0, fmt.Errorf("prefill: %w", err)
			}
			batch = batch[:0]
		}
	}
	start := time.Now()
	run, err := sys.StartRun(ctx, n)
	if err != nil {
		return 0, err
	}
	last, err := run.Wait(ctx)
	if err != nil {
		return 0, err
	}
	return float64(n) / last.Sub(start).Seconds(), nil
}

// limitsSQLiteDSN is the limits measurement's own SQLite file beside -sqlite's.
func limitsSQLiteDSN(dsn string) string {
	p := sqlitePath(dsn)
	return "sqlite:" + strings.TrimSuffix(p, filepath.Ext(p)) + "_limits.db"
}
