// Command dbqbench is dbqueue's own benchmark: for each database (PostgreSQL,
// MariaDB, SQLite) it prints a markdown table of
//
//   - enqueue only: PushMany in batches of 1,000, and single Push calls from
//     one goroutine (jobs/s);
//   - work only: burn down a pre-filled backlog of -jobs (jobs/s), with the
//     peak Go heap and goroutine count of the process while the worker ran;
//   - end to end: push in batches of 1,000 while the worker drains (jobs/s);
//   - latency: push-to-handler-start p50/p95/p99 at a light steady rate
//     (-latency-rate jobs/s for -latency-for), each job carrying its push
//     time in its data;
//   - optionally (-backlog N) work only on a backlog of N pending jobs, to
//     show that the worker's memory stays flat however long the queue.
//
// Every row is the median over -rounds (the backlog row: -backlog-rounds),
// with min and max. The header records the machine, Go and server versions,
// the date, the load average and the worker settings, so that a table can be
// read later without guessing how it was made.
//
//	cd bench && go run ./cmd/dbqbench -rounds 3
//	go run ./cmd/dbqbench -dialects pg -backlog 1000000
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/bench"
	"github.com/dbqueue/dbqueue/bench/dbqueueq"
)

type config struct {
	pgDSN, myDSN, sqliteDSN string
	dialects                []string
	measures                []string
	jobs, single, rounds    int
	backlog, backlogRounds  int
	depths                  []int
	delayed, depthJobs      int
	depthRef                int
	latencyRate             int
	latencyFor              time.Duration
	timeout                 time.Duration
	worker                  dbqueueq.Options
}

var (
	defaultMeasures = []string{"enqueue", "push", "work", "e2e", "latency"}
	allMeasures     = append(slices.Clone(defaultMeasures), "depth")
)

func main() {
	var (
		c          config
		dialects   = flag.String("dialects", "pg,mariadb,sqlite", "comma-separated databases to run: pg, mariadb, sqlite")
		measures   = flag.String("measure", strings.Join(defaultMeasures, ","), "comma-separated measurements: "+strings.Join(allMeasures, ", ")+" (depth: the backlog-depth table, see depth.go); or one of "+strings.Join(standaloneMeasures, ", ")+" alone")
		depths     = flag.String("depths", "0,200k,2M,10M", "depth: ready backlogs, one row each (k and M suffixes)")
		cpuprofile = flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	)
	flag.StringVar(&c.pgDSN, "pg", "postgres://postgres@127.0.0.1:5432/test", "PostgreSQL DSN (tables go to schema "+dbqueueq.Schema+")")
	flag.StringVar(&c.myDSN, "mysql", "root@tcp(127.0.0.1:3306)/test", "MariaDB/MySQL DSN (tables go to database "+dbqueueq.Schema+")")
	flag.StringVar(&c.sqliteDSN, "sqlite", "sqlite:"+filepath.Join(os.TempDir(), "bench.db"), "SQLite DSN")
	flag.IntVar(&c.jobs, "jobs", 20_000, "jobs per throughput measurement")
	flag.IntVar(&c.single, "single", 2_000, "jobs pushed one Push call at a time (0: -jobs)")
	flag.IntVar(&c.rounds, "rounds", 3, "rounds; rows report the median")
	flag.IntVar(&c.backlog, "backlog", 0, "extra work-only row on a pre-filled backlog of this many jobs (0: skip; try 1000000)")
	flag.IntVar(&c.backlogRounds, "backlog-rounds", 1, "rounds of the backlog row")
	flag.IntVar(&c.delayed, "delayed", 5_000_000, "depth: delayed jobs of the delayed row (0: no such row)")
	flag.IntVar(&c.depthJobs, "depth-jobs", 200_000, "depth: jobs pushed by each end-to-end measurement, and burned down in the delayed row")
	flag.IntVar(&c.depthRef, "depth-ref", 200_000, "depth: the ready backlog the ratio column divides by")
	flag.IntVar(&c.latencyRate, "latency-rate", 100, "latency: jobs pushed per second")
	flag.DurationVar(&c.latencyFor, "latency-for", 10*time.Second, "latency: how long to push")
	flag.DurationVar(&c.timeout, "timeout", 5*time.Minute, "limit for one measurement (the backlog row gets 1s more per 1,000 jobs)")
	flag.IntVar(&c.worker.Concurrency, "concurrency", dbqueueq.DefaultConcurrency, "worker Concurrency")
	flag.IntVar(&c.worker.Prefetch, "prefetch", dbqueueq.DefaultPrefetch, "worker Prefetch (a claim takes up to concurrency+prefetch jobs); negative: none")
	flag.IntVar(&c.worker.Workers, "workers", dbqueueq.DefaultWorkers, "worker.Worker instances, each on its own pool")
	flag.DurationVar(&c.worker.Sleep, "sleep", dbqueueq.DefaultSleep, "worker Sleep: longest poll interval of an idle worker")
	flag.BoolVar(&c.worker.LibraryDefaults, "library-defaults", false, "run the workers on worker.Options' own defaults (ignores -concurrency, -prefetch, -sleep)")
	flag.BoolVar(&c.worker.OTel, "otel", false, "run with OpenTelemetry metrics and traces on (package dbqotel; an SDK sampling every span and exporting nowhere)")
	flag.Parse()
	log.SetFlags(0)
	if c.single <= 0 {
		c.single = c.jobs
	}
	for d := range strings.SplitSeq(*dialects, ",") {
		d = strings.TrimSpace(d)
		if !slices.Contains([]string{"pg", "mariadb", "sqlite"}, d) {
			log.Fatalf("unknown dialect %q: use pg, mariadb, sqlite", d)
		}
		c.dialects = append(c.dialects, d)
	}
	if m, ok := standalone(*measures); ok {
		runStandalone(&c, m)
		return
	}
	for m := range strings.SplitSeq(*measures, ",") {
		m = strings.TrimSpace(m)
		if !slices.Contains(allMeasures, m) {
			log.Fatalf("unknown measurement %q: use %s", m, strings.Join(allMeasures, ", "))
		}
		c.measures = append(c.measures, m)
	}
	var err error
	if c.depths, err = parseDepths(*depths); err != nil {
		log.Fatal(err)
	}
	if c.jobs < 1 || c.depthJobs < 1 || c.rounds < 1 || c.latencyRate < 1 || c.latencyFor <= 0 {
		log.Fatal("-jobs, -rounds, -latency-rate and -latency-for must be positive")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	stopProfile, err := bench.CPUProfile(*cpuprofile)
	if err != nil {
		log.Fatal(err)
	}
	defer stopProfile()

	began := time.Now()
	loadBefore := bench.LoadAvg()
	var out strings.Builder
	var versions []string
	for _, d := range c.dialects {
		t, version, err := runDialect(ctx, &c, d)
		if err != nil {
			log.Printf("%s: %v", d, err)
			if ctx.Err() != nil {
				break
			}
			continue
		}
		versions = append(versions, version)
		out.WriteString(t)
	}

	w := os.Stdout
	fmt.Fprintf(w, "\n## dbqueue benchmark, %s\n\n", began.Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(w, "- dbqueue: %s\n", buildInfo())
	fmt.Fprintf(w, "- machine: %d CPUs (GOMAXPROCS %d), %s, %s/%s, %s\n", runtime.NumCPU(), runtime.GOMAXPROCS(0), cpuModel(), runtime.GOOS, runtime.GOARCH, runtime.Version())
	for _, v := range versions {
		fmt.Fprintf(w, "- server: %s\n", v)
	}
	o := c.worker
	fmt.Fprintf(w, "- worker: %d × worker.Worker, Concurrency %d, Prefetch %d, Sleep %s, no-op handler, logger discards job lines; enqueue batch %d\n",
		o.Workers, o.Concurrency, o.Prefetch, o.Sleep, 1_000)
	if o.LibraryDefaults {
		fmt.Fprintf(w, "- worker options: the library's defaults (-library-defaults): the Concurrency, Prefetch and Sleep above are not used\n")
	}
	fmt.Fprintf(w, "- %d rounds (backlog row: %d), medians; took %s; load average (1 min) %s → %s\n\n",
		c.rounds, c.backlogRounds, time.Since(began).Round(time.Second), loadBefore, bench.LoadAvg())
	io.WriteString(w, out.String())
}

// row is one line of a dialect's table.
type row struct {
	name  string
	jobs  int
	rates []float64 // jobs/s, one per round
	cpu   []float64 // this process's CPU (user+system) per job, µs, one per round
	// latency rows: percentiles per round, in ms
	lat   [3][]float64
	peaks []peak // per round (work-only rows)
}

func runDialect(ctx context.Context, c *config, d string) (table, version string, err error) {
	var sys *dbqueueq.System
	var title string
	switch d {
	case "pg":
		title = "PostgreSQL"
		sys, err = dbqueueq.NewPG(ctx, c.pgDSN, c.worker)
	case "mariadb":
		title = "MariaDB"
		sys, err = dbqueueq.NewMariaDB(ctx, c.myDSN, c.worker)
	case "sqlite":
		title = "SQLite"
		sys, err = dbqueueq.NewSQLite(ctx, c.sqliteDSN, c.worker)
	}
	if err != nil {
		return "", "", err
	}
	defer sys.Close()
	if err := sys.Setup(ctx); err != nil {
		return "", "", fmt.Errorf("setup: %w", err)
	}
	version, err = sys.ServerVersion(ctx)
	if err != nil {
		return "", "", fmt.Errorf("version: %w", err)
	}
	progress := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%-8s "+format+"\n", append([]any{d}, args...)...)
	}
	mctx := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, c.timeout) }

	// Warm up: connections, prepared statements, the worker's code paths.
	{
		wctx, cancel := mctx()
		_, err := bench.Measure(wctx, sys, bench.ModeBurnDown, min(c.jobs, 5_000), 1_000)
		cancel()
		if err != nil {
			return "", "", fmt.Errorf("warm-up: %w", err)
		}
	}

	want := func(m string) bool { return slices.Contains(c.measures, m) }
	enq := &row{name: "enqueue only: PushMany, 1,000 per call", jobs: c.jobs}
	push := &row{name: "enqueue only: single Push, one goroutine", jobs: c.single}
	work := &row{name: "work only: burn down a pre-filled backlog", jobs: c.jobs}
	e2e := &row{name: "end to end: PushMany ×1,000 while working", jobs: c.jobs}
	nLat := int(float64(c.latencyRate) * c.latencyFor.Seconds())
	lat := &row{name: fmt.Sprintf("latency push → handler start at %d jobs/s for %s (ms)", c.latencyRate, c.latencyFor), jobs: nLat}

	for round := range c.rounds {
		if want("enqueue") {
			rctx, cancel := mctx()
			c0 := cpuTime()
			rate, err := enqueueMany(rctx, sys, c.jobs)
			cpu := perJob(cpuTime()-c0, c.jobs)
			cancel()
			if err != nil {
				return "", "", fmt.Errorf("enqueue: %w", err)
			}
			enq.add(rate, cpu)
			progress("round %d  enqueue PushMany  %8.0f jobs/s  %5.0f µs CPU/job", round+1, rate, cpu)
		}
		if want("push") {
			rctx, cancel := mctx()
			c0 := cpuTime()
			rate, err := enqueueSingle(rctx, sys, c.single)
			cpu := perJob(cpuTime()-c0, c.single)
			cancel()
			if err != nil {
				return "", "", fmt.Errorf("single push: %w", err)
			}
			push.add(rate, cpu)
			progress("round %d  enqueue Push      %8.0f jobs/s  %5.0f µs CPU/job", round+1, rate, cpu)
		}
		if want("work") {
			rctx, cancel := mctx()
			rate, cpu, peak, err := burnDown(rctx, sys, c.jobs)
			cancel()
			if err != nil {
				return "", "", fmt.Errorf("work only: %w", err)
			}
			work.add(rate, cpu)
			work.peaks = append(work.peaks, peak)
			progress("round %d  work only         %8.0f jobs/s  %5.0f µs CPU/job  peak %s", round+1, rate, cpu, peak)
		}
		if want("e2e") {
			rctx, cancel := mctx()
			c0 := cpuTime()
			m, err := bench.Measure(rctx, sys, bench.ModeEndToEnd, c.jobs, 1_000)
			dur := m.Elapsed
			cpu := perJob(cpuTime()-c0, c.jobs)
			cancel()
			if err != nil {
				return "", "", fmt.Errorf("end to end: %w", err)
			}
			rate := float64(c.jobs) / dur.Seconds()
			e2e.add(rate, cpu)
			progress("round %d  end to end        %8.0f jobs/s  %5.0f µs CPU/job", round+1, rate, cpu)
		}
		if want("latency") {
			rctx, cancel := mctx()
			err := sys.Reset(rctx)
			var p [3]float64
			if err == nil {
				p, err = latency(rctx, sys, c.latencyRate, nLat, "")
			}
			cancel()
			if err != nil {
				return "", "", fmt.Errorf("latency: %w", err)
			}
			for i := range p {
				lat.lat[i] = append(lat.lat[i], p[i])
			}
			progress("round %d  latency p50 %.1f ms  p95 %.1f ms  p99 %.1f ms", round+1, p[0], p[1], p[2])
		}
	}
	rows := []*row{enq, push, work, e2e}
	if c.backlog > 0 {
		bl := &row{name: fmt.Sprintf("work only: burn down a backlog of %d", c.backlog), jobs: c.backlog}
		for round := range c.backlogRounds {
			limit := c.timeout + time.Duration(c.backlog/1_000)*time.Second
			rctx, cancel := context.WithTimeout(ctx, limit)
			progress("round %d  backlog: pushing %d jobs", round+1, c.backlog)
			rate, cpu, peak, err := burnDown(rctx, sys, c.backlog)
			cancel()
			if err != nil {
				return "", "", fmt.Errorf("backlog: %w", err)
			}
			bl.add(rate, cpu)
			bl.peaks = append(bl.peaks, peak)
			progress("round %d  backlog %d  %8.0f jobs/s  %5.0f µs CPU/job  peak %s", round+1, c.backlog, rate, cpu, peak)
		}
		rows = append(rows, bl)
	}
	if want("latency") {
		rows = append(rows, lat)
	}

	var b strings.Builder
	fmt.Fprintf(&b, "### %s (%s)\n\n", title, version)
	if want("depth") {
		if err := runDepths(ctx, c, d, sys, &b, progress); err != nil {
			return "", "", fmt.Errorf("depth: %w", err)
		}
	}
	if slices.ContainsFunc(rows, func(r *row) bool { return len(r.rates) > 0 }) {
		b.WriteString("| measurement | jobs | median jobs/s | min | max | Go CPU µs/job | peak while working: Go heap, stacks, goroutines |\n")
		b.WriteString("|---|---:|---:|---:|---:|---:|---|\n")
	}
	for _, r := range rows {
		if len(r.rates) > 0 {
			mem := "–"
			if len(r.peaks) > 0 {
				var p peak
				for _, q := range r.peaks {
					p.heap, p.stacks, p.goroutines = max(p.heap, q.heap), max(p.stacks, q.stacks), max(p.goroutines, q.goroutines)
				}
				mem = p.String()
			}
			fmt.Fprintf(&b, "| %s | %d | %.0f | %.0f | %.0f | %.0f | %s |\n", r.name, r.jobs, median(r.rates), slices.Min(r.rates), slices.Max(r.rates), median(r.cpu), mem)
		}
	}
	for _, r := range rows {
		if len(r.lat[0]) > 0 {
			fmt.Fprintf(&b, "\n%s, %d jobs per round: **p50 %.1f ms, p95 %.1f ms, p99 %.1f ms** (medians over rounds; p99 range %.1f–%.1f ms)\n",
				r.name, r.jobs, median(r.lat[0]), median(r.lat[1]), median(r.lat[2]), slices.Min(r.lat[2]), slices.Max(r.lat[2]))
		}
	}
	b.WriteString("\n")
	return b.String(), version, nil
}

// enqueueMany times PushMany of n jobs, 1,000 per call, into an empty queue.
func enqueueMany(ctx context.Context, sys *dbqueueq.System, n int) (float64, error) {
	if err := sys.Reset(ctx); err != nil {
		return 0, err
	}
	start := time.Now()
	if err := sys.Enqueue(ctx, n); err != nil {
		return 0, err
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// enqueueSingle times n Push calls, one after the other.
func enqueueSingle(ctx context.Context, sys *dbqueueq.System, n int) (float64, error) {
	if err := sys.Reset(ctx); err != nil {
		return 0, err
	}
	q := sys.Queue()
	job := dbqueue.NewJob{Name: dbqueueq.JobName, Data: json.RawMessage(`{"num":0}`)}
	start := time.Now()
	for range n {
		if _, err := q.Push(ctx, job); err != nil {
			return 0, err
		}
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// peak is what the memory sampler saw.
type peak struct {
	heap       uint64 // heap objects, bytes
	stacks     uint64 // goroutine stacks, bytes
	goroutines int64
}

// burnDown is bench.BurnDown with the Go heap and goroutines sampled every
// 5ms while the worker runs (after a GC, so the prefill's garbage does not
// count). It returns jobs/s, CPU µs per job and the peaks.
func burnDown(ctx context.Context, sys *dbqueueq.System, n int) (float64, float64, peak, error) {
	if err := sys.Reset(ctx); err != nil {
		return 0, 0, peak{}, err
	}
	if err := sys.Enqueue(ctx, n); err != nil {
		return 0, 0, peak{}, fmt.Errorf("prefill: %w", err)
	}
	runtime.GC()
	stop := make(chan struct{})
	var p peak
	var wg sync.WaitGroup
	wg.Go(func() {
		samples := []metrics.Sample{
			{Name: "/memory/classes/heap/objects:bytes"},
			{Name: "/memory/classes/heap/stacks:bytes"},
			{Name: "/sched/goroutines:goroutines"},
		}
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(samples)
			p.heap = max(p.heap, samples[0].Value.Uint64())
			p.stacks = max(p.stacks, samples[1].Value.Uint64())
			p.goroutines = max(p.goroutines, int64(samples[2].Value.Uint64()))
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	})
	c0 := cpuTime()
	start := time.Now()
	run, err := sys.Start(ctx, n)
	if err == nil {
		var last time.Time
		last, err = run.Wait(ctx)
		cpu := perJob(cpuTime()-c0, n)
		close(stop)
		wg.Wait()
		if err == nil {
			return float64(n) / last.Sub(start).Seconds(), cpu, p, nil
		}
	} else {
		close(stop)
		wg.Wait()
	}
	return 0, 0, p, err
}

// perJob is d per job in µs.
func perJob(d time.Duration, n int) float64 {
	return float64(d) / float64(time.Microsecond) / float64(n)
}

func (r *row) add(rate, cpu float64) {
	r.rates = append(r.rates, rate)
	r.cpu = append(r.cpu, cpu)
}

// latency pushes n jobs to queue ("": the default) at rate per second,
// each carrying its push time, and returns the p50, p95 and p99 of
// push-to-handler-start in ms. The workers must read queue (SetQueues).
func latency(ctx context.Context, sys *dbqueueq.System, rate, n int, queue string) ([3]float64, error) {
	var res [3]float64
	var (
		mu   sync.Mutex
		lats = make([]time.Duration, 0, n)
		bad  atomic.Int64
	)
	sys.SetHandler(func(_ context.Context, job *dbqueue.Job) error {
		var data struct {
			T int64 `json:"t"`
		}
		if err := json.Unmarshal(job.Payload.Data, &data); err != nil || data.T == 0 {
			bad.Add(1)
			return nil
		}
		d := time.Since(time.Unix(0, data.T))
		mu.Lock()
		lats = append(lats, d)
		mu.Unlock()
		return nil
	})
	defer sys.SetHandler(nil)
	run, err := sys.Start(ctx, n)
	if err != nil {
		return res, err
	}
	// Give the worker its first poll; then push on a fixed schedule (a
	// push that runs late is sent at once, not skipped).
	time.Sleep(100 * time.Millisecond)
	q := sys.Queue()
	interval := time.Second / time.Duration(rate)
	start := time.Now()
	var pushErr error
	for i := range n {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		data := fmt.Appendf(nil, `{"t":%d}`, time.Now().UnixNano())
		if _, err := q.Push(ctx, dbqueue.NewJob{Name: dbqueueq.JobName, Queue: queue, Data: json.RawMessage(data)}); err != nil {
			pushErr = err
			break
		}
	}
	if pushErr != nil {
		wctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, _ = run.Wait(wctx)
		return res, pushErr
	}
	if _, err := run.Wait(ctx); err != nil {
		return res, err
	}
	if b := bad.Load(); b > 0 {
		return res, fmt.Errorf("%d jobs without a push time", b)
	}
	if len(lats) != n {
		return res, fmt.Errorf("recorded %d latencies, want %d", len(lats), n)
	}
	slices.Sort(lats)
	for i, p := range []float64{0.50, 0.95, 0.99} {
		res[i] = float64(lats[percentileIndex(len(lats), p)]) / float64(time.Millisecond)
	}
	return res, nil
}

// percentileIndex is the nearest-rank index of percentile p in n sorted values.
func percentileIndex(n int, p float64) int {
	i := int(float64(n)*p+0.999999) - 1
	return min(max(i, 0), n-1)
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func (p peak) String() string {
	return fmt.Sprintf("heap %s, stacks %s, %d goroutines", mib(p.heap), mib(p.stacks), p.goroutines)
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// buildInfo says which dbqueue was measured: the module's replacement
// directory, and the repository's commit when the binary was built in it.
func buildInfo() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown build"
	}
	where := "module github.com/dbqueue/dbqueue"
	for _, d := range bi.Deps {
		if d.Path == "github.com/dbqueue/dbqueue" {
			where = d.Path + " " + d.Version
			if d.Replace != nil {
				where += " => " + d.Replace.Path
			}
		}
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev != "" {
		where += fmt.Sprintf(", repository at %.12s (uncommitted changes: %s)", rev, modified)
	}
	return where
}

// cpuModel is the CPU's model name from /proc/cpuinfo ("unknown CPU" elsewhere).
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}
