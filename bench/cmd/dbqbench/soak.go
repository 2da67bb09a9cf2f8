package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/bench"
	"github.com/dbqueue/dbqueue/bench/dbqueueq"
)

// The soak's flags (-measure soak).
var (
	soakFor    = flag.Duration("for", time.Hour, "soak: how long to push and work (it stops by itself)")
	soakRate   = flag.String("rate", "auto", "soak: jobs/s to push: a number, or auto (70% of the end-to-end capacity, the median of 3 end-to-end runs measured first)")
	soakSample = flag.Duration("sample", 0, "soak: sampling interval (0: a minute; 10s when -for is under 15m)")
	soakDir    = flag.String("soak-dir", ".", "soak: directory for soak-<dialect>.csv and soak-<dialect>.png")
)

// soakSchema is the soak's own PostgreSQL schema and MariaDB database, so
// a compare or dbqbench run beside it does not truncate its jobs.
const soakSchema = "dbqueue_soak"

// soakShare of the measured capacity is what -rate auto pushes.
const soakShare = 0.7

// soakCommon are the columns every dialect's CSV starts with.
var soakCommon = []string{"elapsed_s", "pushed_per_s", "done_per_s", "pending", "p50_ms", "p99_ms", "go_heap_live_mib", "goroutines", "load1"}

// soakConfig is what runSoak reads besides the flags shared with the
// other measurements.
type soakConfig struct {
	dur, every time.Duration
	rate       float64 // 0: auto
	rateText   string  // as given: "auto" or a number
	dir        string
}

func parseSoak() (soakConfig, error) {
	sc := soakConfig{dur: *soakFor, every: *soakSample, dir: *soakDir, rateText: *soakRate}
	if sc.dur <= 0 {
		return sc, errors.New("-for must be positive (try 60m, or 1m for a smoke run)")
	}
	if sc.every <= 0 {
		sc.every = time.Minute
		if sc.dur < 15*time.Minute {
			sc.every = 10 * time.Second
		}
	}
	if *soakRate != "auto" {
		r, err := strconv.ParseFloat(*soakRate, 64)
		if err != nil || r <= 0 {
			return sc, fmt.Errorf("-rate %q: give jobs per second (a positive number) or auto", *soakRate)
		}
		sc.rate = r
	}
	return sc, os.MkdirAll(sc.dir, 0o755)
}

// soakWarmup is how long after the start the flatness summary ignores: five
// minutes of an hour, a fifth of a shorter run.
func soakWarmup(d time.Duration) time.Duration { return min(5*time.Minute, d/5) }

// runSoak pushes at a steady rate while one worker works, for sc.dur, and
// samples every sc.every into a CSV (written row by row, so a run cut short
// keeps what it measured); at the end it plots the CSV and prints how far
// each series strayed from its mean after the warm-up.
func runSoak(ctx context.Context, c *config, d string, sc soakConfig) error {
	o := c.worker
	o.Schema = soakSchema
	dsnSQLite := soakSQLiteDSN(c.sqliteDSN)
	sys, title, err := openDialect(ctx, c, d, o, dsnSQLite)
	if err != nil {
		return err
	}
	defer sys.Close()
	if err := sys.Setup(ctx); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	version, err := sys.ServerVersion(ctx)
	if err != nil {
		return err
	}
	progress := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s %-8s "+format+"\n", append([]any{time.Now().Format("15:04:05"), d}, args...)...)
	}
	capacity, rate := 0.0, sc.rate
	if rate == 0 {
		capacity, err = measureCapacity(ctx, sys, progress)
		if err != nil {
			return fmt.Errorf("capacity: %w", err)
		}
		rate = math.Round(capacity * soakShare)
	}
	if err := sys.Reset(ctx); err != nil {
		return err
	}
	stats := statsFor(sys, sqlitePath(dsnSQLite))
	csvPath := filepath.Join(sc.dir, "soak-"+d+".csv")
	f, err := os.Create(csvPath)
	if err != nil {
		return err
	}
	defer f.Close()
	began := time.Now()
	header := fmt.Sprintf("dbqbench -measure soak -dialects %s -for %s -rate %s: %s (%s), pushing %.0f jobs/s", d, sc.dur, sc.rateText, title, version, rate)
	if capacity > 0 {
		header += fmt.Sprintf(" (%.0f%% of the %.0f jobs/s end-to-end capacity measured first)", soakShare*100, capacity)
	}
	header += fmt.Sprintf("; %s; started %s; load %s", bench.Machine(), began.UTC().Format("2006-01-02 15:04 MST"), bench.LoadAvg())
	fmt.Fprintf(f, "# %s\n", header)
	w := csv.NewWriter(f)
	cols := append(slices.Clone(soakCommon), stats.names...)
	w.Write(cols)
	w.Flush()
	progress("%s", header)

	var hist latHist
	sys.SetHandler(func(_ context.Context, job *dbqueue.Job) error {
		if t, ok := pushTime(job.Payload.Data); ok {
			hist.record(time.Since(time.Unix(0, t)))
		}
		return nil
	})
	defer sys.SetHandler(nil)
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	run, err := sys.StartRun(runCtx, math.MaxInt64)
	if err != nil {
		return err
	}
	var pushed atomic.Int64
	pushErr := make(chan error, 1)
	var pushers sync.WaitGroup
	pushCtx, stopPush := context.WithCancel(ctx)
	pushers.Go(func() { pushErr <- pushAtRate(pushCtx, sys.Queue(), rate, &pushed) })
	stallCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	stallCount := make(chan int, 1)
	go func() { stallCount <- watchStalls(stallCtx, sc.dir, d, run.Processed, &pushed, progress) }()

	if _, err := stats.read(ctx, 0); err != nil { // the per-job counters' base
		stopPush()
		pushers.Wait()
		return errors.Join(err, run.Stop())
	}
	tick := time.NewTicker(sc.every)
	defer tick.Stop()
	end := time.After(sc.dur)
	prevAt, prevPushed, prevDone := began, int64(0), int64(0)
	var sampleErr error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case err := <-pushErr:
			sampleErr = fmt.Errorf("push: %w", err)
			break loop
		case <-end:
			break loop
		case now := <-tick.C:
			p, dn := pushed.Load(), run.Processed()
			secs := now.Sub(prevAt).Seconds()
			lat := hist.take()
			pending, err := countPending(ctx, sys)
			if err != nil {
				sampleErr = err
				break loop
			}
			heap, goroutines := goMemory()
			vals := []float64{now.Sub(began).Seconds(), float64(p-prevPushed) / secs, float64(dn-prevDone) / secs, pending,
				ms(quantile(lat, 0.50)), ms(quantile(lat, 0.99)), heap / bytesPerMiB, goroutines, loadAvg()}
			extra, err := stats.read(ctx, dn-prevDone)
			if err != nil {
				sampleErr = err
				break loop
			}
			vals = append(vals, extra...)
			rec := make([]string, len(vals))
			for i, v := range vals {
				rec[i] = strconv.FormatFloat(v, 'f', -1, 64)
			}
			w.Write(rec)
			w.Flush()
			if err := w.Error(); err != nil {
				sampleErr = err
				break loop
			}
			progress("%6.0fs pushed %7.0f/s done %7.0f/s pending %6.0f p50 %6.1f ms p99 %7.1f ms heap %5.1f MiB %s load %.2f",
				vals[0], vals[1], vals[2], vals[3], vals[4], vals[5], vals[6], describe(stats.names, extra), vals[8])
			prevAt, prevPushed, prevDone = now, p, dn
		}
	}
	stopPush()
	pushers.Wait()
	stopWatch()
	stalls := <-stallCount
	// The worker's warnings (a claim that timed out and was retried) are
	// part of what a soak reports, not a reason to throw its hour away.
	workerNote := "the worker logged no warnings or errors"
	if err := run.Stop(); err != nil {
		workerNote = "the worker logged " + err.Error()
	}
	workerNote += fmt.Sprintf("; %d stalls (no job done for %s with jobs waiting; goroutine dumps stall-%s-N.txt in %s)", stalls, stallAfter, d, sc.dir)
	if sampleErr != nil {
		return sampleErr
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	f.Close()
	pngPath := strings.TrimSuffix(csvPath, ".csv") + ".png"
	if err := plotSoakFile(csvPath, pngPath); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	summary, err := summarizeSoakFile(csvPath, soakWarmup(sc.dur))
	if err != nil {
		return err
	}
	fmt.Printf("\n### Soak, %s\n\n%s\n\n- took %s, load average now %s; CSV %s, plot %s\n- %s\n\n%s\n", title, header, time.Since(began).Round(time.Second), bench.LoadAvg(), csvPath, pngPath, workerNote, summary)
	return nil
}

// soakSQLiteDSN is the soak's own SQLite file beside -sqlite's.
func soakSQLiteDSN(dsn string) string {
	p := sqlitePath(dsn)
	return "sqlite:" + strings.TrimSuffix(p, filepath.Ext(p)) + "_soak.db"
}

// measureCapacity is the median of three end-to-end runs of about 5 s each,
// sized by the warm burn-down rate (bench.WarmRate).
func measureCapacity(ctx context.Context, sys *dbqueueq.System, progress func(string, ...any)) (float64, error) {
	warm, err := bench.WarmRate(ctx, sys, 5_000, 50_000)
	if err != nil {
		return 0, err
	}
	n := max(20_000, min(300_000, int(warm*5)/1_000*1_000))
	var rates []float64
	for i := range 3 {
		m, err := bench.Measure(ctx, sys, bench.ModeEndToEnd, n, 1_000)
		if err != nil {
			return 0, err
		}
		rates = append(rates, float64(n)/m.Elapsed.Seconds())
		progress("capacity %d: end to end %d jobs, %.0f jobs/s, load %s", i+1, n, rates[i], bench.LoadAvg())
	}
	return median(rates), nil
}

// pushAtRate pushes rate jobs/s with PushMany, up to 1,000 a call, every
// 10ms pushing what the schedule says is due (a producer that falls behind
// catches up, and the CSV's pushed_per_s shows it). Each job carries its
// push time for the latency columns.
func pushAtRate(ctx context.Context, q *dbqueue.Queue, rate float64, pushed *atomic.Int64) error {
	jobs := make([]dbqueue.NewJob, pushBatchSoak)
	start := time.Now()
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		for {
			due := int64(rate*time.Since(start).Seconds()) - pushed.Load()
			if due <= 0 {
				break
			}
			k := int(min(due, pushBatchSoak))
			data := json.RawMessage(fmt.Appendf(nil, `{"t":%d}`, time.Now().UnixNano()))
			for i := range k {
				jobs[i] = dbqueue.NewJob{Name: dbqueueq.JobName, Data: data}
			}
			if _, err := q.PushMany(ctx, jobs[:k]); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			pushed.Add(int64(k))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

const pushBatchSoak = 1_000

// pushTime reads {"t":N} without encoding/json: the handler runs for every
// job of the soak, and its cost should be the queue's, not a decoder's.
func pushTime(data []byte) (int64, bool) {
	rest, ok := bytes.CutPrefix(data, []byte(`{"t":`))
	if !ok {
		return 0, false
	}
	rest, ok = bytes.CutSuffix(rest, []byte("}"))
	if !ok {
		return 0, false
	}
	t, err := strconv.ParseInt(string(rest), 10, 64)
	return t, err == nil
}

func countPending(ctx context.Context, sys *dbqueueq.System) (float64, error) {
	var n float64
	if err := sys.Admin().QueryRowContext(ctx, "SELECT count(*) FROM jobs").Scan(&n); err != nil {
		return 0, fmt.Errorf("count jobs: %w", err)
	}
	return n, nil
}

// goMemory is the live Go heap after the last collection (what the
// process keeps, not where the collector's sawtooth happens to be) and
// the goroutine count.
func goMemory() (heap, goroutines float64) {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/sched/goroutines:goroutines"}}
	metrics.Read(s)
	return float64(s[0].Value.Uint64()), float64(s[1].Value.Uint64())
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/float64(time.Microsecond)) / 1_000 }

func loadAvg() float64 {
	v, _ := strconv.ParseFloat(bench.LoadAvg(), 64)
	return v
}

func describe(names []string, vals []float64) string {
	var b strings.Builder
	for i, n := range names {
		fmt.Fprintf(&b, "%s %.4g ", n, vals[i])
	}
	return strings.TrimSpace(b.String())
}
