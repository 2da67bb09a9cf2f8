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
	"github.com/dbqueue/dbqueue/worker"
)

// procs' flags. -procs-child and -procs-dsn are how the parent starts its
// children (the benchmark binary itself); a user gives neither.
var (
	procsN           = flag.Int("procs", 16, "procs: worker processes beside the 1-process baseline")
	procsConcurrency = flag.Int("procs-concurrency", 50, "procs: worker Concurrency in each process")
	procsJobs        = flag.Int("procs-jobs", 100_000, "procs: jobs per measurement")
	procsChild       = flag.Bool("procs-child", false, "procs: run as one child worker process (started by -measure procs)")
	procsDSN         = flag.String("procs-dsn", "", "procs: the child's dbqueue DSN")
	procsMySQLConns  = flag.Int("procs-mysql-conns", 8, "procs: on MariaDB, each child's pool size (SetMaxOpenConns on a *sql.DB handed to dbqueue.New), so that 16 children stay under the server's max_connections of 151; 0: dbqueue.Open's own pool, unbounded")
)

// procsSchema is procs' own schema or database.
const procsSchema = "dbqueue_procs"

// procsApp is the application_name the children connect with on
// PostgreSQL, so their connections can be counted apart from everyone
// else's on the server.
const procsApp = "dbqueue-bench-procs"

// runProcsChild is one child: open the queue, say "ready", wait for "go"
// on stdin, work with StopWhenEmpty, print "done N" and exit.
func runProcsChild(ctx context.Context, c *config) error {
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
	peakConns int
	lockWait  float64 // PostgreSQL: mean backends waiting on a lock; MariaDB: row lock waits per 1,000 jobs
	cpu       bench.CPU
	failed    string // why the run failed (a child logged warnings, exited non-zero), or ""
}

// runProcs burns down the same backlog with one worker process and with
// -procs processes of -procs-concurrency each, on one database: jobs/s,
// the most connections seen and how much the claims waited on locks.
func runProcs(ctx context.Context, c *config, d string) error {
	o := c.worker
	o.Schema = procsSchema
	sys, title, err := openDialect(ctx, c, d, o, soakSQLiteDSN(c.sqliteDSN))
	if err != nil {
		return err
	}
	defer sys.Close()
	if err := sys.Setup(ctx); err != nil {
		return err
	}
	version, err := sys.ServerVersion(ctx)
	if err != nil {
		return err
	}
	childDSN, err := procsChildDSN(sys.DSN(), d)
	if err != nil {
		return err
	}
	began, loadBefore := time.Now(), bench.LoadAvg()
	counts := []int{1, *procsN}
	res := make([][]procsResult, len(counts))
	for round := range c.rounds {
		for i, p := range counts {
			rctx, cancel := context.WithTimeout(ctx, c.timeout)
			r, err := procsOnce(rctx, c, d, sys, childDSN, p)
			cancel()
			if err != nil && (i == 0 || ctx.Err() != nil) {
				return fmt.Errorf("%d processes: %w", p, err)
			}
			if err != nil { // a finding, not a broken benchmark: keep it in the table
				r.failed = err.Error()
				fmt.Fprintf(os.Stderr, "%s %-8s round %d  %2d × %d  FAILED: %v\n", time.Now().Format("15:04:05"), d, round+1, p, *procsConcurrency, err)
			}
			res[i] = append(res[i], r)
			fmt.Fprintf(os.Stderr, "%s %-8s round %d  %2d × %d  %8.0f jobs/s  peak connections %d  lock waits %.2f  load %s\n",
				time.Now().Format("15:04:05"), d, round+1, p, *procsConcurrency, r.rate, r.peakConns, r.lockWait, bench.LoadAvg())
		}
	}
	var b strings.Builder
	b.WriteString(reportHead(fmt.Sprintf("Width: worker processes on one %s", title), version, began, loadBefore))
	lockHead := "lock waits"
	switch d {
	case "pg":
		lockHead = "backends waiting on a lock (mean of samples every 20ms)"
	case "mariadb":
		lockHead = "InnoDB row lock waits per 1,000 jobs (server-wide counter)"
	}
	fmt.Fprintf(&b, "- %d jobs per measurement, burned down by P processes (this binary, started as children) of one worker each, Concurrency %d, Prefetch %d, StopWhenEmpty; timed from \"go\" to the last process's exit; medians of %d rounds\n\n",
		*procsJobs, *procsConcurrency, c.worker.Prefetch, c.rounds)
	fmt.Fprintf(&b, "| processes × concurrency | median jobs/s | min | max | × 1 process | peak connections | %s |\n|---|---:|---:|---:|---:|---:|---:|\n", lockHead)
	base := 0.0
	for i, p := range counts {
		var rates, conns, locks []float64
		failures := 0
		for _, r := range res[i] {
			conns = append(conns, float64(r.peakConns))
			if r.failed != "" {
				failures++
				continue
			}
			rates, locks = append(rates, r.rate), append(locks, r.lockWait)
		}
		if i == 0 {
			base = median(rates)
		}
		if len(rates) == 0 {
			fmt.Fprintf(&b, "| %d × %d | failed in %d of %d rounds: %s | | | | %.0f | |\n", p, *procsConcurrency, failures, len(res[i]), firstLine(res[i][0].failed), slices.Max(conns))
			continue
		}
		connText, lockText := fmt.Sprintf("%.0f", slices.Max(conns)), fmt.Sprintf("%.2f", median(locks))
		if d == "sqlite" {
			connText, lockText = "– (a file)", "–"
		}
		fmt.Fprintf(&b, "| %d × %d | %.0f | %.0f | %.0f | %.2f | %s | %s |\n", p, *procsConcurrency, median(rates), slices.Min(rates), slices.Max(rates), median(rates)/base, connText, lockText)
	}
	fmt.Println(b.String())
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

// procsOnce prefills, starts p children, waits for each to say ready,
// tells them all to go and times until the last exits, sampling
// connections and lock waits meanwhile.
func procsOnce(ctx context.Context, c *config, d string, sys *dbqueueq.System, dsn string, p int) (procsResult, error) {
	var r procsResult
	admin := sys.Admin()
	if err := sys.Reset(ctx); err != nil {
		return r, err
	}
	if err := sys.Enqueue(ctx, *procsJobs); err != nil {
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
		cmd := exec.CommandContext(ctx, self, "-measure", "procs", "-procs-child", "-procs-dsn", dsn,
			"-procs-concurrency", strconv.Itoa(*procsConcurrency), "-procs-mysql-conns", strconv.Itoa(*procsMySQLConns), "-prefetch", strconv.Itoa(c.worker.Prefetch), "-sleep", c.worker.Sleep.String())
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
			return r, fmt.Errorf("child %d: %q, %v", i, line, err)
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
	mark := bench.MarkCPU()
	start := time.Now()
	for _, k := range kids {
		if _, err := io.WriteString(k.stdin, "go\n"); err != nil {
			stopSampling()
			wg.Wait()
			return r, err
		}
	}
	var total int64
	var errs []error
	for i, k := range kids {
		line, _ := k.out.ReadString('\n')
		if err := k.cmd.Wait(); err != nil {
			errs = append(errs, fmt.Errorf("child %d: %w: %s", i, err, k.stderr.last()))
			continue
		}
		n, err := strconv.ParseInt(strings.TrimPrefix(strings.TrimSpace(line), "done "), 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("child %d said %q", i, line))
		}
		total += n
	}
	elapsed := time.Since(start)
	r.cpu = mark.Since()
	stopSampling()
	wg.Wait()
	r.peakConns = int(conns.Load() - baseConns)
	if err := errors.Join(errs...); err != nil {
		return r, err
	}
	if total != int64(*procsJobs) {
		return r, fmt.Errorf("children ran %d jobs, want %d", total, *procsJobs)
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
