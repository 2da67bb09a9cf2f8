package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/bench"
	"github.com/dbqueue/dbqueue/bench/dbqueueq"
)

// width-queues' flags.
var (
	widthQueues = flag.Int("width-queues", 10_000, "width-queues: how many queues the weighted worker reads")
	widthJobs   = flag.Int("width-jobs", 100_000, "width-queues: jobs per measurement")
	widthMax    = flag.Duration("width-max", time.Minute, "width-queues: stop a measurement after this long and report the jobs done by then")
	widthRows   = flag.String("width-rows", "", "width-queues: the rows of the table to measure, counted from 1 (e.g. 1,4); all when empty. The × column divides by the first row measured")
)

// widthSchema is width-queues' own schema or database.
const widthSchema = "dbqueue_width"

// widthCase is one row of width-queues: a weighted worker reading listed
// queues, of which holding hold jobs (the same total in every case).
type widthCase struct {
	listed, holding int
}

func (w widthCase) String() string {
	if w.listed == w.holding {
		return fmt.Sprintf("%d queues listed, all holding jobs", w.listed)
	}
	return fmt.Sprintf("%d queues listed, %d holding jobs (%d empty)", w.listed, w.holding, w.listed-w.holding)
}

// runWidthQueues burns down the same number of jobs through a worker with
// QueueWeights over few and over many queues: all queues holding a few
// jobs each, and a few queues holding them all among thousands of empty
// ones. If a claim's cost did not grow with the queues listed, every row
// would run at the first row's rate.
func runWidthQueues(ctx context.Context, c *config, d string) error {
	nq, jobs := *widthQueues, *widthJobs
	if nq < 10 || jobs < nq {
		return fmt.Errorf("-width-queues must be at least 10 and -width-jobs at least -width-queues")
	}
	cases := []widthCase{{10, 10}, {nq / 100, nq / 100}, {nq / 10, nq / 10}, {nq, nq}, {nq, 10}}
	if *widthRows != "" {
		var picked []widthCase
		for _, f := range strings.Split(*widthRows, ",") {
			k, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || k < 1 || k > len(cases) {
				return fmt.Errorf("-width-rows %q: rows are counted from 1 to %d", *widthRows, len(cases))
			}
			picked = append(picked, cases[k-1])
		}
		cases = picked
	}
	began, loadBefore := time.Now(), bench.LoadAvg()
	rows := make([][]float64, len(cases)) // per case: rate per round
	cpus := make([][]float64, len(cases)) // per case: client, server µs/job per round
	partial := make([]string, len(cases))
	var version string
	for i, wc := range cases {
		names := widthNames(wc.listed)
		o := c.worker
		o.Schema = widthSchema
		o.Queues = names
		o.QueueWeights = map[string]int{}
		for k, q := range names {
			o.QueueWeights[q] = 1 + k%3
		}
		sys, _, err := openDialect(ctx, c, d, o, soakSQLiteDSN(c.sqliteDSN))
		if err != nil {
			return err
		}
		if err := sys.Setup(ctx); err != nil {
			sys.Close()
			return err
		}
		if version, err = sys.ServerVersion(ctx); err != nil {
			sys.Close()
			return err
		}
		for round := range c.rounds {
			rctx, cancel := context.WithTimeout(ctx, c.timeout)
			rate, cpu, done, err := burnDownSpread(rctx, sys, names[:wc.holding], jobs, *widthMax)
			cancel()
			if err != nil {
				sys.Close()
				return fmt.Errorf("%s: %w", wc, err)
			}
			if done < jobs {
				partial[i] += fmt.Sprintf(" %d", done)
			}
			rows[i] = append(rows[i], rate)
			cpus[i] = append(cpus[i], us(cpu.Client, done), us(cpu.Server, done))
			fmt.Fprintf(os.Stderr, "%s %-8s round %d  %-45s %8.0f jobs/s  %d done  client %5.1f µs  server %5.1f µs  load %s\n",
				time.Now().Format("15:04:05"), d, round+1, wc, rate, done, us(cpu.Client, done), us(cpu.Server, done), bench.LoadAvg())
		}
		sys.Close()
	}
	var b strings.Builder
	b.WriteString(reportHead(fmt.Sprintf("Width: %d jobs through one weighted worker (%s)", jobs, d), version, began, loadBefore))
	fmt.Fprintf(&b, "- worker: Concurrency %d, Prefetch %d, QueueWeights 1, 2, 3 in turn over the listed queues; medians of %d rounds\n",
		c.worker.Concurrency, c.worker.Prefetch, c.rounds)
	fmt.Fprintf(&b, "- a measurement stops after %s (-width-max); its rate is then the jobs done by then over that time\n\n", *widthMax)
	b.WriteString("| queues | median jobs/s | min | max | × first row | client µs/job | server µs/job | stopped early, jobs done |\n|---|---:|---:|---:|---:|---:|---:|---|\n")
	base := median(rows[0])
	for i, wc := range cases {
		var cl, sv []float64
		for k := 0; k < len(cpus[i]); k += 2 {
			cl, sv = append(cl, cpus[i][k]), append(sv, cpus[i][k+1])
		}
		server := fmt.Sprintf("%.1f", median(sv))
		if d == "sqlite" {
			server = "– (in the client)"
		}
		early := "–"
		if partial[i] != "" {
			early = strings.TrimSpace(partial[i])
		}
		fmt.Fprintf(&b, "| %s | %.0f | %.0f | %.0f | %.2f | %.1f | %s | %s |\n", wc, median(rows[i]), slices.Min(rows[i]), slices.Max(rows[i]), median(rows[i])/base, median(cl), server, early)
	}
	fmt.Println(b.String())
	return nil
}

// widthNames are n queue names of equal length.
func widthNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("w%05d", i)
	}
	return names
}

// burnDownSpread pushes n jobs spread evenly over queues (not timed), then
// times the system's worker until all are done or limit has passed; it
// returns jobs/s, the CPU both sides spent and the jobs done (n, or fewer
// when limit ended it).
func burnDownSpread(ctx context.Context, sys *dbqueueq.System, queues []string, n int, limit time.Duration) (float64, bench.CPU, int, error) {
	if err := sys.Reset(ctx); err != nil {
		return 0, bench.CPU{}, 0, err
	}
	batch := make([]dbqueue.NewJob, 0, 1_000)
	data := json.RawMessage(`{"num":0}`)
	for i := range n {
		batch = append(batch, dbqueue.NewJob{Name: dbqueueq.JobName, Queue: queues[i%len(queues)], Data: data})
		if len(batch) == cap(batch) || i == n-1 {
			if _, err := sys.Queue().PushMany(ctx, batch); err != nil {
				return 0, bench.CPU{}, 0, fmt.Errorf("prefill: %w", err)
			}
			batch = batch[:0]
		}
	}
	mark := bench.MarkCPU()
	start := time.Now()
	run, err := sys.StartRun(ctx, n)
	if err != nil {
		return 0, bench.CPU{}, 0, err
	}
	select {
	case <-run.Done():
	case <-time.After(limit):
	case <-ctx.Done():
	}
	done := run.Processed()
	if done >= int64(n) {
		last, err := run.Wait(ctx)
		if err != nil {
			return 0, bench.CPU{}, 0, err
		}
		return float64(n) / last.Sub(start).Seconds(), mark.Since(), n, nil
	}
	elapsed := time.Since(start)
	if err := run.Stop(); err != nil {
		return 0, bench.CPU{}, 0, err
	}
	if ctx.Err() != nil {
		return 0, bench.CPU{}, 0, ctx.Err()
	}
	return float64(done) / elapsed.Seconds(), mark.Since(), int(done), nil
}

func us(d time.Duration, n int) float64 { return float64(d) / float64(time.Microsecond) / float64(n) }
