//go:build linux

package worker_test

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/worker"
)

// The fault tests run the exactly-once ledger of TestExactlyOnceAcrossProcesses
// while the database misbehaves: the connections of a random worker process
// are killed every few hundred milliseconds (TestLedgerSurvivesKilledConnections),
// or the server itself crashes and restarts (TestLedgerSurvivesServerRestart).
// Every job must run to success; a job may run twice only when a fault hit
// the process holding it while it was reserved, because then the reply to
// its handler's write or to its delete may have been lost.
//
// Half the jobs are transactional (faultChildTx, worker.HandleTx): their
// handler writes its effect, a row of fault_effects, in the job's own
// transaction, so it may run again but its effect must be there exactly
// once. The other half (faultChild) write their effect with a statement of
// their own, where a fault between it and the job's delete runs the job,
// and so the effect, again. Every run of either is also recorded in
// fault_ledger (a plain job's) or in its process's runs file (a
// transactional job's: a write outside the job's transaction would wait
// on SQLite for the one writer, which that transaction is), so reruns are
// counted apart from duplicate effects.

// faultChild is the DBQUEUE_CHILD mode of a fault-test worker process. Its
// dispatch lives here, in init, so TestMain stays as it is.
const faultChild = "fault-ledger"

// faultChildTx is the job name of the transactional half of the ledger.
const faultChildTx = "fault-ledger-tx"

func init() {
	if os.Getenv("DBQUEUE_CHILD") == faultChild {
		_ = mysql.SetLogger(log.New(io.Discard, "", 0))
		os.Exit(faultChildMain())
	}
}

// faultChildMain is a worker process that records each run of a job in the
// fault_ledger table with the reservation it ran under and when it began,
// and logs every job and every database error to DBQUEUE_CHILD_LOG. It runs
// until SIGTERM: under faults an empty poll proves nothing (claims whose
// reply was lost hold jobs until retry_after), so the test decides when the
// work is done.
func faultChildMain() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	env := func(key string) int { n, _ := strconv.Atoi(os.Getenv(key)); return n }
	dsn := os.Getenv("DBQUEUE_CHILD_DSN")
	retryAfter := time.Duration(env("DBQUEUE_CHILD_RETRY_AFTER")) * time.Second
	work := time.Duration(env("DBQUEUE_CHILD_WORK_MS")) * time.Millisecond

	logFile, err := os.Create(os.Getenv("DBQUEUE_CHILD_LOG"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer logFile.Close()
	logger := slog.New(slog.NewJSONHandler(logFile, nil)).With("pid", os.Getpid())

	// A fault may hit while the process starts: keep trying, as a
	// supervisor restarting it would.
	var q *dbqueue.Queue
	for deadline := time.Now().Add(60 * time.Second); ; {
		q, err = dbqueue.Open(ctx, dsn, dbqueue.WithRetryAfter(retryAfter))
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			// Stopped while starting (a process restarted after a SIGKILL
			// moments before the run ended): it claimed nothing, and a
			// SIGTERM is a clean stop.
			return 0
		}
		logger.Warn("open queue; retrying", "error", err)
		if time.Now().After(deadline) {
			fmt.Fprintln(os.Stderr, "open queue:", err)
			return 2
		}
		time.Sleep(100 * time.Millisecond) // the worker process's own retry while the server restarts
	}
	defer q.Close()
	parsed, _ := dbqueue.ParseDSN(dsn)
	ledger, err := sql.Open(parsed.Driver, parsed.Conn)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer ledger.Close()
	ledger.SetMaxOpenConns(2)
	runsFile, err := os.OpenFile(os.Getenv("DBQUEUE_CHILD_RUNS"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer runsFile.Close()
	insert := parsed.Dialect.Rebind("INSERT INTO fault_ledger (job_id, attempt, pid, reserved_at, started_ns) VALUES (?, ?, ?, ?, ?)")
	effect := parsed.Dialect.Rebind("INSERT INTO fault_effects (job_id, attempt, pid) VALUES (?, ?, ?)")

	w, err := worker.New(q, worker.Options{
		Concurrency: env("DBQUEUE_CHILD_CONCURRENCY"),
		Timeout:     time.Duration(env("DBQUEUE_CHILD_TIMEOUT_MS")) * time.Millisecond,
		// A handler whose ledger write was cut returns an error; that is
		// the fault's doing, so it must never fail the job.
		Tries:  worker.Unlimited,
		Sleep:  200 * time.Millisecond,
		Logger: logger,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	pause := func(ctx context.Context) {
		t := time.NewTimer(work)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
	w.Handle(faultChild, func(ctx context.Context, job *dbqueue.Job) error {
		started := time.Now().UnixNano()
		if _, err := ledger.ExecContext(ctx, insert, job.ID, job.Attempts, os.Getpid(), job.ReservedAt.Unix(), started); err != nil {
			return fmt.Errorf("ledger insert: %w", err)
		}
		// The run's effect is committed; the job is still in flight until
		// the worker's delete lands.
		pause(ctx)
		return nil
	})
	// The transactional half records the run first, in its runs file (one
	// unbuffered append, which a SIGKILL after it does not undo), then
	// writes its effect in the transaction, which the worker commits with
	// the job's end.
	runTx := func(ctx context.Context, job *dbqueue.Job, write func() error) error {
		line := fmt.Sprintf("%d %d %d %d %d\n", job.ID, job.Attempts, os.Getpid(), job.ReservedAt.Unix(), time.Now().UnixNano())
		if _, err := runsFile.WriteString(line); err != nil {
			return fmt.Errorf("runs file: %w", err)
		}
		if err := write(); err != nil {
			return fmt.Errorf("effect insert: %w", err)
		}
		pause(ctx)
		return nil
	}
	if os.Getenv("DBQUEUE_CHILD_PGX") == "1" {
		worker.HandleTx(w, faultChildTx, func(ctx context.Context, tx pgx.Tx, job *dbqueue.Job) error {
			return runTx(ctx, job, func() error {
				_, err := tx.Exec(ctx, effect, job.ID, job.Attempts, os.Getpid())
				return err
			})
		})
	} else {
		worker.HandleTx(w, faultChildTx, func(ctx context.Context, tx *sql.Tx, job *dbqueue.Job) error {
			return runTx(ctx, job, func() error {
				_, err := tx.ExecContext(ctx, effect, job.ID, job.Attempts, os.Getpid())
				return err
			})
		})
	}
	if err := w.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// fault is one injected fault: the process whose connections were killed
// (0: every process, a server restart), and when, in Unix nanoseconds.
type fault struct {
	pid      int
	from, to int64
	conns    int  // connections killed
	reserved int  // for a restart, jobs reserved just before it
	killed   bool // the process pid was killed with SIGKILL
}

// ledgerRun is one row of fault_ledger: one run of a job.
type ledgerRun struct {
	job        int64
	attempt    int
	pid        int
	reservedAt int64 // Unix seconds, the database's clock at the claim
	started    int64 // Unix nanoseconds, when the handler began
	tx         bool  // a transactional job's run
}

// faultLedger is one fault-test run.
type faultLedger struct {
	t       *testing.T
	db      *dbtest.DB
	variant string // names the run in its summary lines
	// jobs is how many jobs of each half, transactional and not, run.
	jobs       int
	procs      int
	concurrent int
	work       time.Duration
	retryAfter int // seconds
	timeout    time.Duration
	// inject injects faults until ctx ends, recording each with record;
	// fl.living lists the worker processes, fl.spawn starts another.
	inject func(ctx context.Context, fl *faultLedger, record func(fault))
	// minFaults is how many faults must have been injected for the run to
	// prove anything.
	minFaults int

	// maxWait bounds the run; 150s when zero.
	maxWait time.Duration

	mu       sync.Mutex
	faults   []fault
	children []*faultProc
	dir, tag string
}

type faultProc struct {
	cmd     *exec.Cmd
	appName string
	log     string
	runs    string // the runs of its transactional jobs, one per line
	exited  chan struct{}
	// killed: the test killed it; its exit is not a failure.
	killed atomic.Bool
}

// wait is how long the run may take to empty the queue.
func (fl *faultLedger) wait() time.Duration {
	if fl.maxWait > 0 {
		return fl.maxWait
	}
	return 150 * time.Second
}

// spawn starts another worker process.
func (fl *faultLedger) spawn() *faultProc {
	t, db := fl.t, fl.db
	fl.mu.Lock()
	i := len(fl.children)
	fl.mu.Unlock()
	p := &faultProc{
		appName: fmt.Sprintf("dbqf_%s_%d", fl.tag, i),
		log:     filepath.Join(fl.dir, fmt.Sprintf("worker-%d.log", i)),
		runs:    filepath.Join(fl.dir, fmt.Sprintf("runs-%d.txt", i)),
		exited:  make(chan struct{}),
	}
	p.cmd = exec.Command(os.Args[0], "-test.run=^$")
	p.cmd.Env = append(os.Environ(),
		"DBQUEUE_CHILD="+faultChild,
		"DBQUEUE_CHILD_DSN="+dbtest.WithAppName(db.Dialect, db.DSN, p.appName),
		"DBQUEUE_CHILD_RETRY_AFTER="+strconv.Itoa(fl.retryAfter),
		"DBQUEUE_CHILD_CONCURRENCY="+strconv.Itoa(fl.concurrent),
		"DBQUEUE_CHILD_TIMEOUT_MS="+strconv.Itoa(int(fl.timeout/time.Millisecond)),
		"DBQUEUE_CHILD_WORK_MS="+strconv.Itoa(int(fl.work/time.Millisecond)),
		"DBQUEUE_CHILD_LOG="+p.log,
		"DBQUEUE_CHILD_RUNS="+p.runs)
	if db.Dialect == dbqueue.Postgres && i%2 == 1 {
		// Every other PostgreSQL process gives its handlers a pgx.Tx.
		p.cmd.Env = append(p.cmd.Env, "DBQUEUE_CHILD_PGX=1")
	}
	p.cmd.Stderr = os.Stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cmd, exited := p.cmd, p.exited
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	fl.mu.Lock()
	fl.children = append(fl.children, p)
	fl.mu.Unlock()
	return p
}

// living returns the worker processes the test has not killed.
func (fl *faultLedger) living() []*faultProc {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	var out []*faultProc
	for _, c := range fl.children {
		if !c.killed.Load() {
			out = append(out, c)
		}
	}
	return out
}

// all returns every worker process started, killed or not.
func (fl *faultLedger) all() []*faultProc {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return slices.Clone(fl.children)
}

func (fl *faultLedger) record(f fault) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	fl.faults = append(fl.faults, f)
}

func (fl *faultLedger) run() {
	t, db := fl.t, fl.db
	dbtest.Heavy(t, db.Dialect)
	// No unique key on either table: a duplicate must show, not be hidden.
	db.Exec(t, "CREATE TABLE fault_ledger (job_id BIGINT NOT NULL, attempt INTEGER NOT NULL, pid INTEGER NOT NULL, reserved_at BIGINT NOT NULL, started_ns BIGINT NOT NULL)")
	db.Exec(t, "CREATE TABLE fault_effects (job_id BIGINT NOT NULL, attempt INTEGER NOT NULL, pid INTEGER NOT NULL)")
	q := db.Queue(t)
	// Both halves interleaved, so that faults land on both alike.
	batch := make([]dbqueue.NewJob, 2*fl.jobs)
	for i := range batch {
		batch[i] = dbqueue.NewJob{Name: faultChild}
		if i%2 == 1 {
			batch[i].Name = faultChildTx
		}
	}
	ids, err := q.PushMany(context.Background(), batch)
	if err != nil {
		t.Fatal(err)
	}
	q.Close()
	txJobs := map[int64]bool{}
	for i, id := range ids {
		if i%2 == 1 {
			txJobs[id] = true
		}
	}

	fl.dir = t.TempDir()
	fl.tag = strconv.FormatInt(rand.Int64N(1<<40), 36)
	for range fl.procs {
		fl.spawn()
	}

	start := time.Now()
	ctx, stopFaults := context.WithCancel(context.Background())
	injected := make(chan struct{})
	go func() {
		defer close(injected)
		fl.inject(ctx, fl, fl.record)
	}()

	// Wait for the queue to empty: every job deleted (or failed). Under
	// faults the poll itself may fail; it just tries again.
	deadline := time.Now().Add(fl.wait())
	for {
		var left int
		err := db.SQL.QueryRow("SELECT (SELECT COUNT(*) FROM jobs) + (SELECT COUNT(*) FROM failed_jobs)").Scan(&left)
		if err == nil && left == 0 {
			break
		}
		for i, c := range fl.living() {
			select {
			case <-c.exited:
				if c.killed.Load() {
					continue
				}
				stopFaults()
				<-injected
				t.Fatalf("worker process %d exited before the queue was empty: %v", i, c.cmd.ProcessState)
			default:
			}
		}
		if time.Now().After(deadline) {
			stopFaults()
			<-injected
			fl.dumpLeft()
			for _, c := range fl.living() {
				data, _ := os.ReadFile(c.log)
				t.Logf("the last lines of %s:\n%s", filepath.Base(c.log), tail(string(data), 10))
			}
			t.Fatalf("the queue did not empty in %v: %d rows left in jobs and failed_jobs (err %v)", fl.wait(), left, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	took := time.Since(start)
	stopFaults()
	<-injected
	for i, c := range fl.living() {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.exited:
			if !c.cmd.ProcessState.Success() {
				t.Errorf("worker process %d: %v", i, c.cmd.ProcessState)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("worker process %d did not stop within 30s of SIGTERM", i)
		}
	}
	fl.check(ids, txJobs, fl.all(), took)
}

// dumpLeft logs the rows still in jobs.
func (fl *faultLedger) dumpLeft() {
	rows, err := fl.db.SQL.Query("SELECT id, attempts, reserved_at, available_at FROM jobs ORDER BY id")
	if err != nil {
		fl.t.Logf("list jobs: %v", err)
		return
	}
	defer rows.Close()
	for n := 0; rows.Next() && n < 20; n++ {
		var id, attempts, available int64
		var reserved sql.NullInt64
		_ = rows.Scan(&id, &attempts, &reserved, &available)
		fl.t.Logf("left in jobs: id=%d attempts=%d reserved_at=%v available_at=%d", id, attempts, reserved, available)
	}
}

// check holds the ledger to its promise: no job lost, none failed, and a
// job run twice only where a fault hit its earlier holder between that
// run's reservation and the rerun's start.
func (fl *faultLedger) check(ids []int64, txJobs map[int64]bool, children []*faultProc, took time.Duration) {
	t, db := fl.t, fl.db
	rows, err := db.SQL.Query("SELECT job_id, attempt, pid, reserved_at, started_ns FROM fault_ledger ORDER BY job_id, started_ns")
	if err != nil {
		t.Fatal(err)
	}
	runs := map[int64][]ledgerRun{}
	total := 0
	pids := map[int]bool{}
	for rows.Next() {
		var r ledgerRun
		if err := rows.Scan(&r.job, &r.attempt, &r.pid, &r.reservedAt, &r.started); err != nil {
			t.Fatal(err)
		}
		runs[r.job] = append(runs[r.job], r)
		pids[r.pid] = true
		total++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, c := range children {
		data, err := os.ReadFile(c.runs)
		if err != nil {
			continue // killed before its first run
		}
		for line := range strings.SplitSeq(strings.TrimSpace(string(data)), "\n") {
			if line == "" {
				continue
			}
			r := ledgerRun{tx: true}
			if _, err := fmt.Sscan(line, &r.job, &r.attempt, &r.pid, &r.reservedAt, &r.started); err != nil {
				t.Fatalf("%s: %q: %v", c.runs, line, err)
			}
			runs[r.job] = append(runs[r.job], r)
			pids[r.pid] = true
			total++
		}
	}
	for _, rs := range runs {
		slices.SortFunc(rs, func(a, b ledgerRun) int { return cmp.Compare(a.started, b.started) })
	}

	fl.mu.Lock()
	faults := slices.Clone(fl.faults)
	fl.mu.Unlock()
	conns, hits := 0, 0
	for _, f := range faults {
		conns += f.conns
		if f.conns > 0 || f.pid == 0 || f.killed {
			hits++
		}
	}

	// A transactional job's effect is its row in fault_effects; a plain
	// job's is its run in fault_ledger.
	effects := map[int64]int{}
	erows, err := db.SQL.Query("SELECT job_id FROM fault_effects")
	if err != nil {
		t.Fatal(err)
	}
	for erows.Next() {
		var id int64
		if err := erows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		effects[id]++
	}
	erows.Close()
	if err := erows.Err(); err != nil {
		t.Fatal(err)
	}
	type side struct {
		jobs, runs, reruns, dupJobs, dupEffects int
		lost                                    []int64
		dups                                    []int64
	}
	var tx, plain side
	for _, id := range ids {
		s, n := &plain, len(runs[id])
		if txJobs[id] {
			s, n = &tx, effects[id]
		}
		s.jobs++
		s.runs += len(runs[id])
		s.reruns += max(0, len(runs[id])-1)
		switch {
		case n == 0:
			s.lost = append(s.lost, id)
		case n > 1:
			s.dupJobs++
			s.dupEffects += n - 1
			s.dups = append(s.dups, id)
		}
	}
	for id := range effects {
		if !txJobs[id] {
			t.Errorf("fault_effects has a row for job %d, which is not a transactional job", id)
		}
	}
	kills := 0
	for _, f := range faults {
		if f.killed {
			kills++
		}
	}
	// One grep-able line per half: "fault ledger:" variant database side.
	for _, l := range []struct {
		name string
		s    side
	}{{"tx", tx}, {"plain", plain}} {
		t.Logf("fault ledger: variant=%s db=%s side=%s jobs=%d faults=%d (killed conns %d, processes killed %d) lost=%d runs=%d reruns=%d duplicate_effects=%d (jobs %d)",
			fl.variant, db.Dialect, l.name, l.s.jobs, len(faults), conns, kills, len(l.s.lost), l.s.runs, l.s.reruns, l.s.dupEffects, l.s.dupJobs)
	}
	if len(tx.dups) > 0 {
		t.Errorf("%d transactional jobs applied their effect more than once (%d extra), e.g. %v; the workers' log lines about the first few:\n%s",
			tx.dupJobs, tx.dupEffects, tx.dups[:min(len(tx.dups), 10)], grepLogs(children, tx.dups[:min(len(tx.dups), 3)]))
		for _, id := range tx.dups[:min(len(tx.dups), 3)] {
			t.Error(describeRuns(fmt.Sprintf("transactional job %d, %d effects:", id, effects[id]), runs[id], faults, hitByOf(faults)))
		}
	}
	if len(tx.lost) > 0 {
		t.Errorf("%d transactional jobs have no effect, e.g. %v", len(tx.lost), tx.lost[:min(len(tx.lost), 10)])
	}
	lost := append(slices.Clone(tx.lost), plain.lost...)
	// hitBy returns the faults that hit process pid between from (Unix
	// seconds, floored: the database's clock at the claim) and to (Unix
	// nanoseconds).
	hitBy := hitByOf(faults)
	// explainers are the faults that can explain a rerun after run prev:
	// those that hit prev's process while prev's reservation stood (from
	// its claim until retry_after had passed, after which the job was
	// anyone's) and before the rerun began.
	explainers := func(prev, next ledgerRun) []fault {
		end := min(next.started, (prev.reservedAt+int64(fl.retryAfter)+1)*int64(time.Second))
		return hitBy(prev.pid, prev.reservedAt, end)
	}
	// Runs that a fault on their process hit while they ran or in the half
	// second after, their delete likely still to come (approximate: the
	// delete's own time is not recorded).
	hitRuns := 0
	for _, rs := range runs {
		for _, r := range rs {
			if slices.ContainsFunc(faults, func(f fault) bool {
				return (f.pid == 0 || f.pid == r.pid) && f.to >= r.started && f.from <= r.started+int64(fl.work+500*time.Millisecond)
			}) {
				hitRuns++
			}
		}
	}
	var (
		twice, extra, explained, beforeStart int
		unexplained                          []string
		gaps                                 []time.Duration
		badIDs                               []int64
	)
	for _, id := range ids {
		rs := runs[id]
		if len(rs) < 2 {
			continue
		}
		twice++
		extra += len(rs) - 1
		for i := 1; i < len(rs); i++ {
			gaps = append(gaps, time.Duration(rs[i].started-rs[i-1].started))
		}
		ok, early := true, false
		for i := 1; i < len(rs); i++ {
			prev, next := rs[i-1], rs[i]
			hit := explainers(prev, next)
			if len(hit) == 0 {
				ok = false
				continue
			}
			// Did any of them come after the earlier run began, or only
			// between its claim and its start?
			if !slices.ContainsFunc(hit, func(f fault) bool { return f.to >= prev.started }) {
				early = true
			}
		}
		if ok {
			explained++
			if early {
				beforeStart++
			}
			if explained <= 3 && testing.Verbose() {
				t.Logf("%s\n%s", describeRuns(fmt.Sprintf("job %d ran %d times, after a fault on its holder:", id, len(rs)), rs, faults, hitBy),
					grepLogs(children, []int64{id}))
			}
			continue
		}
		badIDs = append(badIDs, id)
		unexplained = append(unexplained, describeRuns(fmt.Sprintf("job %d ran %d times with no fault on its holder in between:", id, len(rs)), rs, faults, hitBy))
	}

	t.Logf("%s: %d processes × %d goroutines, %d jobs in %v; runs %d; faults injected %d (%d killed connections, %d rounds that found some); runs a fault hit while running or finishing (approx.) %d; lost %d; jobs run twice %d (%d extra runs); run twice where a fault hit in flight %d (%d of them only between claim and start); unexplained %d",
		db.Dialect, fl.procs, fl.concurrent, 2*fl.jobs, took.Round(time.Millisecond), total, len(faults), conns, hits, hitRuns, len(lost), twice, extra, explained, beforeStart, len(unexplained))

	// The worker warns when a completed job's delete found it no longer
	// held. Under faults that is mostly a delete that landed with its reply
	// lost and was sent again: such a job does not run again.
	notHeld := notHeldIDs(children)
	rerun := 0
	for id := range notHeld {
		if len(runs[id]) > 1 {
			rerun++
		}
	}
	t.Logf("workers warned %d completed jobs were no longer held at their delete; %d of those ran again", len(notHeld), rerun)
	if len(gaps) > 0 {
		slices.Sort(gaps)
		t.Logf("reruns began %v to %v (median %v) after the run before them", gaps[0].Round(time.Millisecond),
			gaps[len(gaps)-1].Round(time.Millisecond), gaps[len(gaps)/2].Round(time.Millisecond))
	}
	if len(faults) < fl.minFaults {
		t.Errorf("only %d faults were injected, want at least %d: the run proves nothing", len(faults), fl.minFaults)
	}
	if hits == 0 {
		t.Errorf("no fault found a connection to kill: the run proves nothing")
	}
	if len(pids) < 2 {
		t.Errorf("only %d process did the work", len(pids))
	}
	if len(lost) > 0 {
		t.Errorf("%d jobs never ran or left no effect, e.g. %v", len(lost), lost[:min(len(lost), 10)])
		fl.dumpLeft()
	}
	if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 0 {
		t.Errorf("%d rows left in jobs", n)
		fl.dumpLeft()
	}
	if n := db.Count(t, "SELECT COUNT(*) FROM failed_jobs"); n != 0 {
		var exception string
		_ = db.SQL.QueryRow("SELECT exception FROM failed_jobs").Scan(&exception)
		t.Errorf("%d jobs in failed_jobs, e.g. %s", n, exception)
	}
	pushed := map[int64]bool{}
	for _, id := range ids {
		pushed[id] = true
	}
	for id := range runs {
		if !pushed[id] {
			t.Errorf("the ledger has runs of job %d, which was never pushed", id)
		}
	}
	if len(unexplained) > 0 {
		for _, u := range unexplained[:min(len(unexplained), 10)] {
			t.Error(u)
		}
		t.Errorf("%d jobs ran twice with no fault to explain it; the workers' log lines about the first few:\n%s",
			len(unexplained), grepLogs(children, badIDs[:min(len(badIDs), 3)]))
	}
}

// hitByOf returns a function giving the faults that hit process pid
// between from (Unix seconds, floored: the database's clock at the claim)
// and to (Unix nanoseconds).
func hitByOf(faults []fault) func(pid int, fromSec, to int64) []fault {
	return func(pid int, fromSec, to int64) []fault {
		var out []fault
		for _, f := range faults {
			if (f.pid == 0 || f.pid == pid) && f.to >= fromSec*int64(time.Second) && f.from <= to {
				out = append(out, f)
			}
		}
		return out
	}
}

// describeRuns lists a job's runs and the faults on their processes from
// five seconds before the first to five after the last.
func describeRuns(head string, rs []ledgerRun, faults []fault, hitBy func(pid int, fromSec, to int64) []fault) string {
	var b strings.Builder
	b.WriteString(head)
	for _, r := range rs {
		fmt.Fprintf(&b, "\n    attempt %d pid %d reserved_at %s started %s", r.attempt, r.pid,
			time.Unix(r.reservedAt, 0).Format("15:04:05"), time.Unix(0, r.started).Format("15:04:05.000000"))
	}
	seen := map[fault]bool{}
	for _, r := range rs {
		for _, f := range hitBy(r.pid, r.reservedAt-5, rs[len(rs)-1].started+int64(5*time.Second)) {
			if seen[f] {
				continue
			}
			seen[f] = true
			who := "every process (restart)"
			switch {
			case f.killed:
				who = "pid " + strconv.Itoa(f.pid) + " (SIGKILL)"
			case f.pid != 0:
				who = "pid " + strconv.Itoa(f.pid)
			}
			fmt.Fprintf(&b, "\n    fault on %s at %s..%s (%d connections)", who,
				time.Unix(0, f.from).Format("15:04:05.000000"), time.Unix(0, f.to).Format("15:04:05.000000"), f.conns)
		}
	}
	return b.String()
}

// notHeldIDs returns the jobs the workers logged as no longer held when
// their completed run was deleted.
func notHeldIDs(children []*faultProc) map[int64]bool {
	re := regexp.MustCompile(`"msg":"completed job was no longer held[^"]*".*"id":(\d+)[,}]`)
	ids := map[int64]bool{}
	for _, c := range children {
		data, err := os.ReadFile(c.log)
		if err != nil {
			continue
		}
		for _, m := range re.FindAllSubmatch(data, -1) {
			id, _ := strconv.ParseInt(string(m[1]), 10, 64)
			ids[id] = true
		}
	}
	return ids
}

// grepLogs returns the worker log lines that name one of the jobs, up to 100.
func grepLogs(children []*faultProc, ids []int64) string {
	var alts []string
	for _, id := range ids {
		alts = append(alts, strconv.FormatInt(id, 10))
	}
	re := regexp.MustCompile(`"id":(` + strings.Join(alts, "|") + `)[,}]`)
	var b strings.Builder
	lines := 0
	for _, c := range children {
		data, err := os.ReadFile(c.log)
		if err != nil {
			continue
		}
		for line := range strings.SplitSeq(string(data), "\n") {
			if re.MatchString(line) {
				b.WriteString(line)
				b.WriteByte('\n')
				if lines++; lines == 100 {
					return b.String() + "…\n"
				}
			}
		}
	}
	return b.String()
}

// nextVictim waits base plus up to spread, then picks a living worker
// process at random; nil when ctx ended first.
func (fl *faultLedger) nextVictim(ctx context.Context, base, spread time.Duration) *faultProc {
	timer := time.NewTimer(base + rand.N(spread))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return nil
	case <-timer.C:
	}
	children := fl.living()
	return children[rand.IntN(len(children))]
}

// killConnections injects faults until ctx ends: every 150–450ms it kills
// every database connection of one worker process, chosen at random.
func killConnections(t *testing.T, db *dbtest.DB) func(context.Context, *faultLedger, func(fault)) {
	return func(ctx context.Context, fl *faultLedger, record func(fault)) {
		for {
			c := fl.nextVictim(ctx, 150*time.Millisecond, 300*time.Millisecond)
			if c == nil {
				return
			}
			from := time.Now().UnixNano()
			kctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			n, err := db.KillConnections(kctx, c.cmd.Process.Pid, c.appName)
			cancel()
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("kill the connections of pid %d: %v", c.cmd.Process.Pid, err)
				}
				return
			}
			record(fault{pid: c.cmd.Process.Pid, from: from, to: time.Now().UnixNano(), conns: n})
		}
	}
}

// TestLedgerSurvivesKilledConnections runs the exactly-once ledger while the
// database connections of a random worker process are killed on the
// server every few hundred milliseconds.
func TestLedgerSurvivesKilledConnections(t *testing.T) {
	t.Parallel()
	for _, d := range []dbqueue.Dialect{dbqueue.Postgres, dbqueue.MySQL} {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			db := dbtest.New(t, d)
			fl := &faultLedger{
				t: t, db: db, variant: "killed-connections", jobs: 2000, procs: 4, concurrent: 8,
				work: 30 * time.Millisecond, retryAfter: 8, timeout: 3 * time.Second,
				inject: killConnections(t, db), minFaults: 10,
			}
			if testing.Short() {
				fl.jobs /= 3
			}
			fl.run()
		})
	}
}

// EnvFaults runs the tests that start their own database servers.
const EnvFaults = "DBQUEUE_TEST_FAULTS"

// TestLedgerSurvivesServerRestart runs the exactly-once ledger on a private
// PostgreSQL and a private MariaDB server, each crashed (immediate shutdown)
// and restarted once mid-run. It starts its own servers in temporary
// directories, so it runs only with DBQUEUE_TEST_FAULTS=1 or under CI.
func TestLedgerSurvivesServerRestart(t *testing.T) {
	t.Parallel()
	if os.Getenv(EnvFaults) != "1" && os.Getenv("CI") == "" {
		t.Skipf("starts and crashes its own PostgreSQL and MariaDB servers: set %s=1 to run it", EnvFaults)
	}
	for _, d := range []dbqueue.Dialect{dbqueue.Postgres, dbqueue.MySQL} {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			began := time.Now()
			server := dbtest.StartServer(t, d)
			db := dbtest.NewOn(t, server)
			t.Logf("private %s server initialised, started and migrated in %v", d, time.Since(began).Round(time.Millisecond))
			const jobs = 6000
			fl := &faultLedger{
				t: t, db: db, variant: "server-restart", jobs: jobs / 2, procs: 4, concurrent: 8,
				work: 30 * time.Millisecond, retryAfter: 8, timeout: 3 * time.Second,
				minFaults: 1,
			}
			fl.inject = func(ctx context.Context, _ *faultLedger, record func(fault)) {
				// Crash once a third of the jobs have run (a third of the
				// plain half, which records its runs in fault_ledger).
				for countOr(ctx, db, "SELECT COUNT(DISTINCT job_id) FROM fault_ledger") < jobs/6 {
					select {
					case <-ctx.Done():
						return
					case <-time.After(50 * time.Millisecond):
					}
				}
				reserved := countOr(ctx, db, "SELECT COUNT(*) FROM jobs WHERE reserved_at IS NOT NULL")
				from := time.Now().UnixNano()
				server.Restart()
				to := time.Now().UnixNano()
				t.Logf("%s crashed with %d jobs reserved and restarted in %v", d, reserved, time.Duration(to-from).Round(time.Millisecond))
				if reserved <= 0 {
					t.Errorf("no job was reserved when %s crashed (%d): the crash hit nothing in flight", d, reserved)
				}
				record(fault{from: from, to: to, reserved: reserved})
			}
			fl.run()
			if t.Failed() {
				t.Logf("server log:\n%s", tail(server.Logs(), 40))
			}
		})
	}
}

// countOr runs a COUNT query, returning -1 when it fails.
func countOr(ctx context.Context, db *dbtest.DB, query string) int {
	var n int
	if err := db.SQL.QueryRowContext(ctx, query).Scan(&n); err != nil {
		return -1
	}
	return n
}

func tail(s string, lines int) string {
	all := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}

// killProcesses injects faults until ctx ends: every 300–900ms it kills a
// worker process, chosen at random, with SIGKILL, mid-job, and starts
// another in its place, as a supervisor would. The jobs the killed one
// held come back after retry_after.
func killProcesses(t *testing.T) func(context.Context, *faultLedger, func(fault)) {
	return func(ctx context.Context, fl *faultLedger, record func(fault)) {
		for {
			c := fl.nextVictim(ctx, 300*time.Millisecond, 600*time.Millisecond)
			if c == nil {
				return
			}
			from := time.Now().UnixNano()
			c.killed.Store(true)
			if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Errorf("kill pid %d: %v", c.cmd.Process.Pid, err)
				return
			}
			<-c.exited
			record(fault{pid: c.cmd.Process.Pid, from: from, to: time.Now().UnixNano(), killed: true})
			fl.spawn()
		}
	}
}

// TestLedgerSurvivesKilledProcesses runs the exactly-once ledger while
// worker processes are killed with SIGKILL every few hundred milliseconds
// and replaced, on every database.
func TestLedgerSurvivesKilledProcesses(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		fl := &faultLedger{
			t: t, db: db, variant: "killed-processes", jobs: 1500, procs: 3, concurrent: 4,
			work: 30 * time.Millisecond, retryAfter: 7, timeout: 2 * time.Second,
			inject: killProcesses(t), minFaults: 4, maxWait: 40 * time.Second,
		}
		if db.Dialect == dbqueue.SQLite {
			// One file, one writer at a time: a transactional handler holds
			// it from its begin to its commit, so its work is short.
			fl.jobs, fl.concurrent, fl.work = 600, 2, 10*time.Millisecond
		}
		if testing.Short() {
			fl.jobs /= 3
		}
		fl.run()
	})
}
