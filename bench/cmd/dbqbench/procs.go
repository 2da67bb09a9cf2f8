package main

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"github.com/dbqueue/dbqueue/driver/dbqmysql"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/bench"
	"github.com/dbqueue/dbqueue/bench/dbqueueq"
	"github.com/dbqueue/dbqueue/bench/riverq"
	"github.com/dbqueue/dbqueue/worker"
)

// procs' flags. -procs-child, -procs-system and -procs-dsn are how the
// parent starts its children (the benchmark binary itself); a user gives
// none of them.
var (
	procsCounts      = flag.String("procs", "16", "procs: comma-separated worker process counts, each measured beside the 1-process baseline every ratio divides by (16: 1 and 16; 1,4,16: 1, 4 and 16)")
	procsSystems     = flag.String("procs-systems", procsDBQueue+","+procsRiver, "procs: comma-separated systems, interleaved in every round: dbqueue, river (River on PostgreSQL only; on the other databases dbqueue runs alone)")
	procsConcurrency = flag.Int("procs-concurrency", 50, "procs: handlers in each process (dbqueue's worker Concurrency, River's MaxWorkers)")
	procsJobs        = flag.Int("procs-jobs", 100_000, "procs: jobs per measurement")
	procsChild       = flag.Bool("procs-child", false, "procs: run as one child worker process (started by -measure procs)")
	procsSystem      = flag.String("procs-system", procsDBQueue, "procs: the child's system, dbqueue or river (set by -measure procs)")
	procsDSN         = flag.String("procs-dsn", "", "procs: the child's DSN")
	procsMySQLConns  = flag.Int("procs-mysql-conns", 8, "procs: on MariaDB, each child's pool size (SetMaxOpenConns on a *sql.DB handed to dbqueue.New), so that 16 children stay under the server's max_connections of 151; 0: dbqueue.Open's own pool, unbounded")
)

// The systems procs measures.
const (
	procsDBQueue = "dbqueue"
	procsRiver   = "river"
)

// procsConfig is what one procs measurement runs: the flags', or a test's.
type procsConfig struct {
	counts      []int    // process counts, ascending, 1 first
	systems     []string // procsDBQueue and/or procsRiver, in the order given
	jobs        int
	concurrency int
	mysqlConns  int
}

// procsFlags reads procs' flags.
func procsFlags() (procsConfig, error) {
	pc := procsConfig{jobs: *procsJobs, concurrency: *procsConcurrency, mysqlConns: *procsMySQLConns}
	var err error
	if pc.counts, err = parseProcsCounts(*procsCounts); err != nil {
		return pc, err
	}
	if pc.systems, err = parseProcsSystems(*procsSystems); err != nil {
		return pc, err
	}
	if pc.jobs < 1 || pc.concurrency < 1 {
		return pc, errors.New("-procs-jobs and -procs-concurrency must be positive")
	}
	return pc, nil
}

// parseProcsCounts reads -procs: process counts, to which 1 is added
// (every ratio divides by it), sorted, each once.
func parseProcsCounts(s string) ([]int, error) {
	counts := []int{1}
	for f := range strings.SplitSeq(s, ",") {
		p, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || p < 1 {
			return nil, fmt.Errorf("-procs %q: want process counts of 1 or more, separated by commas (e.g. 1,4,16)", s)
		}
		counts = append(counts, p)
	}
	slices.Sort(counts)
	return slices.Compact(counts), nil
}

// parseProcsSystems reads -procs-systems.
func parseProcsSystems(s string) ([]string, error) {
	var systems []string
	for f := range strings.SplitSeq(s, ",") {
		f = strings.ToLower(strings.TrimSpace(f))
		if f != procsDBQueue && f != procsRiver {
			return nil, fmt.Errorf("-procs-systems %q: unknown system %q, use dbqueue, river", s, f)
		}
		if !slices.Contains(systems, f) {
			systems = append(systems, f)
		}
	}
	return systems, nil
}

// procsSchema is procs' own schema or database.
const procsSchema = "dbqueue_procs"

// procsApp is the application_name the children connect with on
// PostgreSQL, so their connections can be counted apart from everyone
// else's on the server.
const procsApp = "dbqueue-bench-procs"

// runProcsChild is one child: open the queue, say "ready", wait for "go"
// on stdin, work with StopWhenEmpty, print "done N" and exit. With
// -procs-system river it is a River child (runProcsRiverChild).
func runProcsChild(ctx context.Context, c *config) error {
	switch *procsSystem {
	case procsDBQueue:
	case procsRiver:
		return runProcsRiverChild(ctx)
	default:
		return fmt.Errorf("-procs-system %q: use dbqueue or river", *procsSystem)
	}
	q, err := openProcsQueue(ctx, *procsDSN, *procsMySQLConns)
	if err != nil {
		return err
	}
	defer q.Close()
	var done atomic.Int64
	errs := &countingHandler{}
	w, err := worker.New(q, worker.Options{
		Concurrency:   *procsConcurrency,
		Prefetch:      c.worker.Prefetch,
		Sleep:         c.worker.Sleep,
		StopWhenEmpty: true,
		Logger:        slog.New(errs),
	})
	if err != nil {
		return err
	}
	w.Handle(dbqueueq.JobName, func(context.Context, *dbqueue.Job) error {
		done.Add(1)
		return nil
	})
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return fmt.Errorf("waiting for go: %w", err)
	}
	if err := w.Run(ctx); err != nil {
		return err
	}
	if n := errs.n.Load(); n > 0 {
		return fmt.Errorf("%d warnings or errors logged, first: %s", n, errs.first())
	}
	fmt.Printf("done %d\n", done.Load())
	return nil
}

// openProcsQueue opens a child's queue: with dbqueue.Open, or on MySQL
// with conns > 0 on a pool of at most conns connections, as the docs tell
// an operator running many processes to do.
func openProcsQueue(ctx context.Context, dsn string, conns int) (*dbqueue.Queue, error) {
	parsed, err := dbqueue.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	if parsed.Dialect != dbqueue.MySQL || conns <= 0 {
		return dbqueue.Open(ctx, dsn)
	}
	db, err := sql.Open(parsed.Driver, parsed.Conn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	q, err := dbqueue.New(ctx, dbqmysql.New(db))
	if err != nil {
		db.Close()
		return nil, err
	}
	return q, nil
}

// countingHandler counts the worker's warnings and errors: a benchmark that
// retried or lost a reservation is not a clean number.
type countingHandler struct {
	n    atomic.Int64
	mu   sync.Mutex
	line string
}

func (h *countingHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	if h.n.Add(1) == 1 {
		var b strings.Builder
		b.WriteString(r.Message)
		r.Attrs(func(a slog.Attr) bool {
			b.WriteString(" " + a.String())
			return true
		})
		h.mu.Lock()
		h.line = b.String()
		h.mu.Unlock()
	}
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }
func (h *countingHandler) first() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.line
}

// procsResult is one measurement of P processes.
type procsResult struct {
	rate      float64
	done      int64 // jobs the children said they did
	peakConns int
	lockWait  float64 // PostgreSQL: mean backends waiting on a lock; MariaDB: row lock waits per 1,000 jobs
	cpu       bench.CPU
	failed    string // why the run failed (a child logged warnings, exited non-zero), or ""
}

// procsTarget is one system as procs runs it.
type procsTarget struct {
	system string // procsDBQueue or procsRiver
	label  string // its name in the table
	// prefill empties the system's tables and pushes n jobs.
	prefill func(ctx context.Context, n int) error
	// args start a child of the system.
	args []string
	// stops: the children work until the parent tells them to stop
	// (River, which has no StopWhenEmpty), reporting their counts on the
	// way; the run is timed to the last job done. Otherwise they stop when
	// the queue is empty and the run is timed to the last one's exit.
	stops bool
	// check says whether the tables hold what n jobs done leave.
	check func(ctx context.Context, n int) error
}

// procsReport is what one database's procs measurement found.
type procsReport struct {
	table   string
	targets []procsTarget
	res     [][][]procsResult // [target][count index][round]
}

// runProcs burns down the same backlog with one worker process and with
// each of -procs processes of -procs-concurrency handlers each, of every
// system of -procs-systems, on one database, and prints the table.
func runProcs(ctx context.Context, c *config, d string) error {
	pc, err := procsFlags()
	if err != nil {
		return err
	}
	rep, err := measureProcs(ctx, c, d, pc)
	if err != nil {
		return err
	}
	fmt.Println(rep.table)
	return nil
}

// measureProcs runs pc on database d: per round, per process count, each
// system in turn (the first of them alternating by round), so the load of
// the machine hits them alike. A system's 1-process baseline that fails
// stops the measurement; a larger count that fails is a finding, kept in
// the table.
func measureProcs(ctx context.Context, c *config, d string, pc procsConfig) (procsReport, error) {
	var rep procsReport
	systems := slices.Clone(pc.systems)
	if d != "pg" {
		systems = slices.DeleteFunc(systems, func(s string) bool { return s == procsRiver })
		if len(systems) == 0 {
			return rep, fmt.Errorf("River runs on PostgreSQL only: -procs-systems %s measures nothing on %s", strings.Join(pc.systems, ","), d)
		}
	}
	o := c.worker
	o.Schema = procsSchema
	sys, title, err := openDialect(ctx, c, d, o, soakSQLiteDSN(c.sqliteDSN))
	if err != nil {
		return rep, err
	}
	defer sys.Close()
	if err := sys.Setup(ctx); err != nil {
		return rep, err
	}
	version, err := sys.ServerVersion(ctx)
	if err != nil {
		return rep, err
	}
	childDSN, err := procsChildDSN(sys.DSN(), d)
	if err != nil {
		return rep, err
	}
	admin := sys.Admin()
	for _, s := range systems {
		switch s {
		case procsDBQueue:
			rep.targets = append(rep.targets, procsTarget{
				system: procsDBQueue,
				label:  "dbqueue",
				prefill: func(ctx context.Context, n int) error {
					if err := sys.Reset(ctx); err != nil {
						return err
					}
					return sys.Enqueue(ctx, n)
				},
				args: []string{"-measure", "procs", "-procs-child", "-procs-dsn", childDSN,
					"-procs-concurrency", strconv.Itoa(pc.concurrency), "-procs-mysql-conns", strconv.Itoa(pc.mysqlConns),
					"-prefetch", strconv.Itoa(c.worker.Prefetch), "-sleep", c.worker.Sleep.String()},
				check: func(ctx context.Context, _ int) error {
					return procsCheck(ctx, admin, "SELECT (SELECT count(*) FROM jobs), (SELECT count(*) FROM failed_jobs)", 0, 0)
				},
			})
		case procsRiver:
			t, closeRiver, err := procsRiverTarget(ctx, c.pgDSN, admin, pc)
			if err != nil {
				return rep, fmt.Errorf("river: %w", err)
			}
			defer closeRiver()
			rep.targets = append(rep.targets, t)
		}
	}
	began, loadBefore := time.Now(), bench.LoadAvg()
	rep.res = make([][][]procsResult, len(rep.targets))
	for k := range rep.targets {
		rep.res[k] = make([][]procsResult, len(pc.counts))
	}
	for round := range c.rounds {
		for i, p := range pc.counts {
			for j := range rep.targets {
				k := (j + round) % len(rep.targets)
				t := rep.targets[k]
				rctx, cancel := context.WithTimeout(ctx, c.timeout)
				r, err := procsOnce(rctx, d, admin, t, p, pc.jobs)
				cancel()
				if err != nil && (i == 0 || ctx.Err() != nil) {
					return rep, fmt.Errorf("%s, %d processes: %w", t.label, p, err)
				}
				if err != nil { // a finding, not a broken benchmark: keep it in the table
					r.failed = err.Error()
					fmt.Fprintf(os.Stderr, "%s %-8s %-7s round %d  %2d × %d  FAILED: %v\n", time.Now().Format("15:04:05"), d, t.label, round+1, p, pc.concurrency, err)
				}
				rep.res[k][i] = append(rep.res[k][i], r)
				fmt.Fprintf(os.Stderr, "%s %-8s %-7s round %d  %2d × %d  %8.0f jobs/s  peak connections %d  lock waits %.2f  load %s\n",
					time.Now().Format("15:04:05"), d, t.label, round+1, p, pc.concurrency, r.rate, r.peakConns, r.lockWait, bench.LoadAvg())
			}
		}
	}
	rep.table = procsTable(d, title, version, pc, c, rep, bench.Caption{
		Command: bench.CommandLine(), Began: began, Took: time.Since(began), LoadBefore: loadBefore, LoadAfter: bench.LoadAvg(),
	})
	return rep, nil
}

// procsTable is the markdown of a procs measurement: the setup, one row
// per process count and system, and the caption.
func procsTable(d, title, version string, pc procsConfig, c *config, rep procsReport, caption bench.Caption) string {
	var b strings.Builder
	both := len(rep.targets) > 1
	heading := fmt.Sprintf("Width: worker processes on one %s", title)
	switch {
	case both:
		heading = fmt.Sprintf("Width: dbqueue and River worker processes on one %s", title)
	case rep.targets[0].system == procsRiver:
		heading = fmt.Sprintf("Width: River worker processes on one %s", title)
	}
	fmt.Fprintf(&b, "### %s\n\n- server: %s\n", heading, version)
	for _, t := range rep.targets {
		switch t.system {
		case procsDBQueue:
			fmt.Fprintf(&b, "- dbqueue: %s; %d jobs per measurement, burned down by P processes (this binary, started as children) of one worker each, Concurrency %d, Prefetch %d, StopWhenEmpty; timed from \"go\" to the last process's exit\n",
				buildInfo(), pc.jobs, pc.concurrency, c.worker.Prefetch)
		case procsRiver:
			fmt.Fprintf(&b, "- River %s: the same %d jobs (kind \"benchmark\", inserted with InsertManyFast into schema %s, river_job truncated before each run) burned down by P processes of one River client each, MaxWorkers %d on the default queue, FetchCooldown %s and FetchPollInterval %s as `river bench` sets them, pgx's default pool; each child counts its completed-job events and tells the parent, which stops them all when the sum reaches the total (River has no StopWhenEmpty); timed from \"go\" to that last completed job\n",
				riverVersion(), pc.jobs, procsRiverSchema, pc.concurrency, riverq.FetchCooldown, riverq.FetchPollInterval)
		}
	}
	fmt.Fprintf(&b, "- medians of %d rounds", c.rounds)
	if both {
		b.WriteString("; every round runs each process count of both systems in turn, the first of them alternating by round")
	}
	b.WriteString("\n\n")
	lockHead := "lock waits"
	switch d {
	case "pg":
		lockHead = "backends waiting on a lock (mean of samples every 20ms)"
	case "mariadb":
		lockHead = "InnoDB row lock waits per 1,000 jobs (server-wide counter)"
	}
	if both {
		fmt.Fprintf(&b, "| processes × handlers | system | median jobs/s | min | max | × its 1 process | dbqueue ÷ River | peak connections | %s |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n", lockHead)
	} else {
		fmt.Fprintf(&b, "| processes × concurrency | median jobs/s | min | max | × 1 process | peak connections | %s |\n|---|---:|---:|---:|---:|---:|---:|\n", lockHead)
	}
	type cell struct {
		rates, conns, locks []float64
		failures            int
	}
	cells := make([][]cell, len(rep.targets))
	for k := range rep.targets {
		cells[k] = make([]cell, len(pc.counts))
		for i := range pc.counts {
			c := &cells[k][i]
			for _, r := range rep.res[k][i] {
				c.conns = append(c.conns, float64(r.peakConns))
				if r.failed != "" {
					c.failures++
					continue
				}
				c.rates, c.locks = append(c.rates, r.rate), append(c.locks, r.lockWait)
			}
		}
	}
	// vsRiver is dbqueue's median over River's at count index i, or "".
	vsRiver := func(i int) string {
		var dbq, rv float64
		for k, t := range rep.targets {
			switch t.system {
			case procsDBQueue:
				dbq = median(cells[k][i].rates)
			case procsRiver:
				rv = median(cells[k][i].rates)
			}
		}
		if dbq == 0 || rv == 0 {
			return "–"
		}
		return fmt.Sprintf("%.2f", dbq/rv)
	}
	for i, p := range pc.counts {
		for k, t := range rep.targets {
			c := cells[k][i]
			lead := fmt.Sprintf("%d × %d", p, pc.concurrency)
			if both {
				lead += " | " + t.label
			}
			if len(c.rates) == 0 {
				failed := ""
				for _, r := range rep.res[k][i] {
					if r.failed != "" {
						failed = r.failed
						break
					}
				}
				extra := ""
				if both {
					extra = " |"
				}
				fmt.Fprintf(&b, "| %s | failed in %d of %d rounds: %s | | | |%s %.0f | |\n", lead, c.failures, len(rep.res[k][i]), firstLine(failed), extra, slices.Max(c.conns))
				continue
			}
			connText, lockText := fmt.Sprintf("%.0f", slices.Max(c.conns)), fmt.Sprintf("%.2f", median(c.locks))
			if d == "sqlite" {
				connText, lockText = "– (a file)", "–"
			}
			ratio := ""
			if both {
				ratio = " | "
				if t.system == procsDBQueue {
					ratio += vsRiver(i)
				}
			}
			base := median(cells[k][0].rates)
			own := "–"
			if base > 0 {
				own = fmt.Sprintf("%.2f", median(c.rates)/base)
			}
			fmt.Fprintf(&b, "| %s | %.0f | %.0f | %.0f | %s%s | %s | %s |\n", lead, median(c.rates), slices.Min(c.rates), slices.Max(c.rates), own, ratio, connText, lockText)
		}
	}
	b.WriteString("\n")
	caption.WriteMarkdown(&b)
	return b.String()
}

// procsCheck runs q, which returns two counts, and says whether they are
// want0 and want1.
func procsCheck(ctx context.Context, admin *sql.DB, q string, want0, want1 int64) error {
	var n0, n1 int64
	if err := admin.QueryRowContext(ctx, q).Scan(&n0, &n1); err != nil {
		return fmt.Errorf("check: %w", err)
	}
	if n0 != want0 || n1 != want1 {
		return fmt.Errorf("check: %s found %d and %d, want %d and %d", q, n0, n1, want0, want1)
	}
	return nil
}

// procsChildDSN is the children's DSN: the system's, with an
// application_name of their own on PostgreSQL.
func procsChildDSN(dsn, d string) (string, error) {
	if d != "pg" {
		return dsn, nil
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set("application_name", procsApp)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// procsOnce prefills, starts p children of t, waits for each to say
// ready, tells them all to go and times the run (see procsTarget.stops),
// sampling connections and lock waits meanwhile.
func procsOnce(ctx context.Context, d string, admin *sql.DB, t procsTarget, p, jobs int) (procsResult, error) {
	var r procsResult
	if err := t.prefill(ctx, jobs); err != nil {
		return r, err
	}
	self, err := os.Executable()
	if err != nil {
		return r, err
	}
	baseConns, _, err := procsConns(ctx, admin, d) // the parent's own, on MariaDB
	if err != nil {
		return r, err
	}
	type child struct {
		cmd    *exec.Cmd
		stdin  io.WriteCloser
		out    *bufio.Reader
		stderr *tailBuffer
	}
	var kids []child
	defer func() {
		for _, k := range kids {
			if k.cmd.ProcessState == nil {
				_ = k.cmd.Process.Kill()
				_ = k.cmd.Wait()
			}
		}
	}()
	for range p {
		cmd := exec.CommandContext(ctx, self, t.args...)
		stderr := &tailBuffer{}
		cmd.Stderr = stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return r, err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return r, err
		}
		if err := cmd.Start(); err != nil {
			return r, err
		}
		kids = append(kids, child{cmd, stdin, bufio.NewReader(stdout), stderr})
	}
	for i, k := range kids {
		if line, err := k.out.ReadString('\n'); err != nil || strings.TrimSpace(line) != "ready" {
			return r, fmt.Errorf("child %d: %q, %v: %s", i, line, err, k.stderr.last())
		}
	}
	rowLocks0, err := rowLockWaits(ctx, admin, d)
	if err != nil {
		return r, err
	}
	sampler, stopSampling := context.WithCancel(ctx)
	var conns, waiting, samples atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() { sampleProcs(sampler, admin, d, &conns, &waiting, &samples) })
	// Children that stop when told (River) report "n K", the jobs done so
	// far, as their counts grow; when the sum reaches jobs the run is over
	// and all are told to stop. A child that ends before stops the others:
	// the sum can no longer be reached.
	var (
		progress atomic.Int64
		reached  atomic.Bool
		lastDone time.Time // when the sum reached jobs
		stopOnce sync.Once
	)
	stopAll := func() {
		stopOnce.Do(func() {
			for _, k := range kids {
				_, _ = io.WriteString(k.stdin, "stop\n")
				_ = k.stdin.Close()
			}
		})
	}
	mark := bench.MarkCPU()
	start := time.Now()
	for _, k := range kids {
		if _, err := io.WriteString(k.stdin, "go\n"); err != nil {
			stopSampling()
			wg.Wait()
			return r, err
		}
	}
	finals := make([]string, len(kids))
	var readers sync.WaitGroup
	for i, k := range kids {
		readers.Go(func() {
			var last int64
			for {
				line, err := k.out.ReadString('\n')
				if err != nil {
					break
				}
				line = strings.TrimSpace(line)
				if s, ok := strings.CutPrefix(line, "n "); ok && t.stops {
					n, err := strconv.ParseInt(s, 10, 64)
					if err != nil {
						continue // the final count says what went wrong
					}
					if sum := progress.Add(n - last); sum >= int64(jobs) && reached.CompareAndSwap(false, true) {
						lastDone = time.Now()
						stopAll()
					}
					last = n
					continue
				}
				finals[i] = line
			}
			if t.stops {
				stopAll()
			}
		})
	}
	readers.Wait()
	var total int64
	var errs []error
	for i, k := range kids {
		if err := k.cmd.Wait(); err != nil {
			errs = append(errs, fmt.Errorf("child %d: %w: %s", i, err, k.stderr.last()))
			continue
		}
		n, err := strconv.ParseInt(strings.TrimPrefix(finals[i], "done "), 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("child %d said %q", i, finals[i]))
		}
		total += n
	}
	elapsed := time.Since(start)
	if t.stops && reached.Load() {
		elapsed = lastDone.Sub(start)
	}
	r.cpu = mark.Since()
	stopSampling()
	wg.Wait()
	r.peakConns = int(conns.Load() - baseConns)
	r.done = total
	if err := errors.Join(errs...); err != nil {
		return r, err
	}
	if total != int64(jobs) {
		return r, fmt.Errorf("children ran %d jobs, want %d", total, jobs)
	}
	if err := t.check(ctx, jobs); err != nil {
		return r, err
	}
	r.rate = float64(total) / elapsed.Seconds()
	switch d {
	case "pg":
		if s := samples.Load(); s > 0 {
			r.lockWait = float64(waiting.Load()) / float64(s)
		}
	case "mariadb":
		after, err := rowLockWaits(ctx, admin, d)
		if err != nil {
			return r, err
		}
		r.lockWait = float64(after-rowLocks0) / float64(total) * 1_000
	}
	return r, nil
}

// sampleProcs keeps the peak of the children's connections and, on
// PostgreSQL, adds up their backends waiting on a lock, every 20ms.
func sampleProcs(ctx context.Context, admin *sql.DB, d string, peak, waiting, samples *atomic.Int64) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		if n, w, err := procsConns(ctx, admin, d); err == nil {
			peak.Store(max(peak.Load(), n))
			waiting.Add(w)
			samples.Add(1)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// procsConns counts the connections of the children (on PostgreSQL by
// their application_name; on MariaDB every connection to procs' database
// but the one asking, the parent's own included) and, on PostgreSQL, how
// many of them wait on a lock. SQLite has neither: 0.
func procsConns(ctx context.Context, admin *sql.DB, d string) (conns, waiting int64, err error) {
	var q string
	switch d {
	case "pg":
		q = `SELECT count(*), count(*) FILTER (WHERE wait_event_type = 'Lock') FROM pg_stat_activity WHERE application_name = '` + procsApp + `'`
	case "mariadb":
		q = `SELECT count(*), 0 FROM information_schema.PROCESSLIST WHERE DB = '` + procsSchema + `' AND ID <> CONNECTION_ID()`
	default:
		return 0, 0, nil
	}
	err = admin.QueryRowContext(ctx, q).Scan(&conns, &waiting)
	return conns, waiting, err
}

// rowLockWaits is MariaDB's Innodb_row_lock_waits counter (0 elsewhere).
func rowLockWaits(ctx context.Context, admin *sql.DB, d string) (int64, error) {
	if d != "mariadb" {
		return 0, nil
	}
	var name string
	var v int64
	err := admin.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Innodb_row_lock_waits'").Scan(&name, &v)
	return v, err
}

// firstLine is an error's first line, for a table cell.
func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return strings.ReplaceAll(s, "|", "/")
}

// tailBuffer keeps the last 4 KB a child wrote to its stderr, for the
// error that says why it failed.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 4096 {
		t.buf = t.buf[len(t.buf)-4096:]
	}
	return len(p), nil
}

// last is the last non-empty line written.
func (t *tailBuffer) last() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(string(t.buf)), "\n")
	return lines[len(lines)-1]
}
