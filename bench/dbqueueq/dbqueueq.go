// Package dbqueueq runs dbqueue (github.com/dbqueue/dbqueue) as a
// bench.System on PostgreSQL, MariaDB and SQLite.
//
// Each system keeps its tables apart from River's and the ceiling's: the
// PostgreSQL schema dbqueue_bench (through search_path), the MariaDB
// database dbqueue_bench, or its own SQLite file. Setup creates that place
// and runs dbqueue's own migrations (migrations.Up) in it.
//
// The queue is opened with dbqueue.Open and worked by worker.Worker with a
// no-op handler, exactly as an application would, with only the worker's
// Concurrency, Prefetch and Sleep set (and its logger discarding job lines).
// A run counts jobs from the worker's JobProcessed event; when the n-th
// job has run it stops the workers, whose Run returns only after the
// completer has deleted every finished job, so Wait's time is when the n-th
// job left the jobs table, not when its handler returned.
package dbqueueq

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx" for migrations and admin statements

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/bench"
	_ "github.com/dbqueue/dbqueue/driver/dbqmysql" // the benchmarks open all three
	_ "github.com/dbqueue/dbqueue/driver/dbqpgx"
	_ "github.com/dbqueue/dbqueue/driver/dbqsqlite"
	"github.com/dbqueue/dbqueue/migrations"
	"github.com/dbqueue/dbqueue/worker"
)

// The systems' names.
const (
	NamePG      = "dbqueue-pg"
	NameMariaDB = "dbqueue-mariadb"
	NameSQLite  = "dbqueue-sqlite"
)

// Schema is the PostgreSQL schema and the MariaDB database dbqueue's tables
// live in during the benchmark.
const Schema = "dbqueue_bench"

// JobName is the handler name every bench job carries.
const JobName = "Bench@handle"

// pushBatch is how many jobs one PushMany call carries (dbqueue writes
// them as one multi-row INSERT).
const pushBatch = 1_000

// Defaults of Options, chosen by measurement on a 2-core machine (see
// bench/README.md): a claim takes at most 1,000 jobs per round trip and a
// worker keeps two claims in flight (worker.Options.Claims), so
// Concurrency+Prefetch = 2,000 lets both be full: 0.86/0.90 of the MariaDB
// ceiling against 0.76/0.80 with 1,000. More workers in one process only add
// contention on 2 cores. Sleep matters only to an idle worker (PostgreSQL
// wakes on NOTIFY anyway); River's bench polls every 20ms, the ceiling
// every 5ms.
const (
	DefaultConcurrency = 100
	DefaultPrefetch    = 1900
	DefaultWorkers     = 1
	DefaultSleep       = 50 * time.Millisecond
)

// Options tune the workers. Zero values take the defaults above.
type Options struct {
	// Concurrency is worker.Options.Concurrency: jobs run at once per worker.
	Concurrency int
	// Prefetch is worker.Options.Prefetch: reserved jobs waiting in memory.
	// Negative: none. A worker claims up to Concurrency+Prefetch jobs per
	// round trip, so this also sets the claim's batch size.
	Prefetch int
	// Claims is worker.Options.Claims: claims in flight at once per
	// worker. 0: the library's default.
	Claims int
	// Workers is how many worker.Worker instances run, each on its own
	// dbqueue.Queue (its own pool), as separate processes would.
	Workers int
	// Sleep is worker.Options.Sleep: the longest wait between polls of an
	// empty queue.
	Sleep time.Duration
	// LibraryDefaults runs the workers with worker.Options' tuning fields
	// left at their zero values (Concurrency 10, the adaptive Prefetch, 2
	// claims, Sleep 3s) instead of the fields above: what a user who tunes
	// nothing gets.
	LibraryDefaults bool
	// OTel runs the system with OpenTelemetry on (package dbqotel), as an
	// application that traces and meters it would: an SDK that samples
	// every span and exports nowhere (see otelSDK). The system's name
	// gets OTelSuffix.
	OTel bool
	// NoMetrics runs the workers with the metrics and heartbeat of
	// worker.Options.MetricsInterval off (negative), where they are on by
	// default. The system's name gets NoMetricsSuffix.
	NoMetrics bool
	// History runs the workers with worker.Options.HistoryRetention set:
	// a row of the job history per finished job. The system's name gets
	// HistorySuffix.
	History bool
	// Handler is what each job's handler does: HandlerNoop (""),
	// HandlerInsertTx or HandlerInsert (see insert.go).
	Handler string
	// Schema is the PostgreSQL schema or MariaDB database the tables go
	// to; "" is Schema. A long-running measurement (dbqbench's soak) takes
	// its own, so a compare run beside it does not truncate its jobs.
	Schema string
	// Queues and QueueWeights are worker.Options' own: the queues the
	// workers read, and their shares (dbqbench's width-queues).
	Queues       []string
	QueueWeights map[string]int
}

// NoMetricsSuffix and HistorySuffix end the names of systems run with
// Options.NoMetrics and Options.History.
const (
	NoMetricsSuffix = "-nometrics"
	HistorySuffix   = "-history"
)

// MaxClaim is the most jobs one claim of dbqueue's worker takes
// (worker/worker.go: min(want, 1000)).
const MaxClaim = 1_000

// ClaimSize is how many jobs one full claim of a worker with these options
// takes: min(MaxClaim, Concurrency+Prefetch), as worker.Worker computes it
// (capacity Concurrency+Prefetch, each claim capped at 1,000). cmd/compare
// gives the ceiling loops this batch by default.
func (o Options) ClaimSize() int {
	if o.LibraryDefaults {
		return min(MaxClaim, 10+worker.AdaptivePrefetchMax)
	}
	o = o.withDefaults()
	return min(MaxClaim, o.Concurrency+max(o.Prefetch, 0))
}

// LibraryClaims is worker.Options.Claims when left 0: claims in flight
// per worker.
const LibraryClaims = 2

// ClaimsInFlight is how many claims all workers keep in flight at most:
// Workers × Claims. cmd/compare runs this many ceiling goroutines, so both
// sides have as many claim statements in the database at once.
func (o Options) ClaimsInFlight() int {
	o = o.withDefaults()
	c := o.Claims
	if c <= 0 {
		c = LibraryClaims
	}
	return o.Workers * c
}

func (o Options) withDefaults() Options {
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.Prefetch == 0 {
		o.Prefetch = DefaultPrefetch
	}
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	if o.Sleep <= 0 {
		o.Sleep = DefaultSleep
	}
	if o.Schema == "" {
		o.Schema = Schema
	}
	return o
}

// System is dbqueue on one database.
type System struct {
	name    string
	db      bench.Database
	dialect dbqueue.Dialect
	dsn     string // dbqueue DSN of the bench schema, database or file
	prepare func(ctx context.Context) error
	o       Options

	admin      *sql.DB          // migrations, TRUNCATE, version
	push       *dbqueue.Queue   // producer side
	queues     []*dbqueue.Queue // one per worker
	jobs       []dbqueue.NewJob // a batch of no-op jobs
	handler    worker.HandlerFunc
	workQueues []string  // worker.Options.Queues of the runs started from now on (nil: the default queue)
	overshoot  bool      // runs started from now on may process more than their n
	otel       *otelSDK  // with Options.OTel
	effects    effectsDB // with Options.Handler HandlerInsert
}

var _ bench.System = (*System)(nil)

// NewPG prepares dbqueue on PostgreSQL at dsn (a postgres:// URL or a
// keyword/value string); its tables go to the schema dbqueue_bench.
func NewPG(ctx context.Context, dsn string, o Options) (*System, error) {
	o = o.withDefaults()
	benchDSN, err := withPGParams(dsn, map[string]string{"search_path": o.Schema, "application_name": "dbqueue bench"})
	if err != nil {
		return nil, err
	}
	s := &System{name: NamePG, db: bench.Postgres, dialect: dbqueue.Postgres, dsn: benchDSN, o: o}
	s.prepare = func(ctx context.Context) error {
		return execOnce(ctx, "pgx", dsn, "CREATE SCHEMA IF NOT EXISTS "+o.Schema)
	}
	return s, s.open(ctx)
}

// NewMariaDB prepares dbqueue on MariaDB or MySQL at dsn (go-sql-driver
// form or mysql:// URL); its tables go to the database dbqueue_bench.
func NewMariaDB(ctx context.Context, dsn string, o Options) (*System, error) {
	parsed, err := dbqueue.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	cfg, err := mysql.ParseDSN(parsed.Conn)
	if err != nil {
		return nil, err
	}
	o = o.withDefaults()
	cfg.DBName = o.Schema
	s := &System{name: NameMariaDB, db: bench.MariaDB, dialect: dbqueue.MySQL, dsn: cfg.FormatDSN(), o: o}
	s.prepare = func(ctx context.Context) error {
		return execOnce(ctx, "mysql", parsed.Conn, "CREATE DATABASE IF NOT EXISTS "+o.Schema)
	}
	return s, s.open(ctx)
}

// NewSQLite prepares dbqueue on the SQLite file a dsn (sqlite:PATH) names.
func NewSQLite(ctx context.Context, dsn string, o Options) (*System, error) {
	if strings.Contains(dsn, ":memory:") {
		return nil, errors.New("dbqueue-sqlite: use a file, not :memory: (the worker's and the producer's pools must see one database)")
	}
	s := &System{name: NameSQLite, db: bench.SQLite, dialect: dbqueue.SQLite, dsn: dsn, o: o.withDefaults()}
	s.prepare = func(context.Context) error { return nil }
	return s, s.open(ctx)
}

// withPGParams adds run-time parameters to a PostgreSQL DSN.
func withPGParams(dsn string, params map[string]string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("dbqueue-pg: parse dsn: %w", err)
		}
		q := u.Query()
		for k, v := range params {
			q.Set(k, v)
		}
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	for k, v := range params {
		dsn += " " + k + "='" + v + "'"
	}
	return dsn, nil
}

func execOnce(ctx context.Context, driver, dsn, stmt string) error {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, stmt)
	return err
}

// open makes the schema or database and the admin connection; the queues
// are opened by Setup, after the migrations (Open checks the tables).
func (s *System) open(ctx context.Context) error {
	switch s.o.Handler {
	case HandlerNoop:
	case HandlerInsertTx, HandlerInsert:
		if s.dialect == dbqueue.SQLite {
			return fmt.Errorf("%s: the %s handler is measured on PostgreSQL and MariaDB only", s.name, s.o.Handler)
		}
		s.name += "-" + s.o.Handler
	default:
		return fmt.Errorf("%s: unknown handler %q (have %q, %q, %q)", s.name, s.o.Handler, HandlerNoop, HandlerInsertTx, HandlerInsert)
	}
	if s.o.NoMetrics {
		s.name += NoMetricsSuffix
	}
	if s.o.History {
		s.name += HistorySuffix
	}
	if s.o.OTel {
		s.name += OTelSuffix
		var err error
		if s.otel, err = newOTelSDK(); err != nil {
			return err
		}
	}
	if err := s.prepare(ctx); err != nil {
		return fmt.Errorf("%s: create %s: %w", s.name, s.o.Schema, err)
	}
	parsed, err := dbqueue.ParseDSN(s.dsn)
	if err != nil {
		return err
	}
	s.admin, err = sql.Open(parsed.Driver, parsed.Conn)
	if err != nil {
		return err
	}
	s.admin.SetMaxOpenConns(2)
	if err := s.admin.PingContext(ctx); err != nil {
		s.admin.Close()
		return fmt.Errorf("%s: connect: %w", s.name, err)
	}
	s.jobs = make([]dbqueue.NewJob, pushBatch)
	for i := range s.jobs {
		s.jobs[i] = dbqueue.NewJob{Name: JobName, Data: json.RawMessage(fmt.Sprintf(`{"num":%d}`, i))}
	}
	return nil
}

func (s *System) Name() string             { return s.name }
func (s *System) Database() bench.Database { return s.db }

// Dialect is the queue's SQL dialect.
func (s *System) Dialect() dbqueue.Dialect { return s.dialect }

// Options are the worker settings in use, defaults filled in.
func (s *System) Options() Options { return s.o }

// Queue is the producer's queue (Push, PushMany); valid after Setup.
func (s *System) Queue() *dbqueue.Queue { return s.push }

// Admin is the system's own database/sql pool on the bench schema (two
// connections): for statistics a measurement reads beside the queue.
func (s *System) Admin() *sql.DB { return s.admin }

// DSN is the dbqueue DSN of the bench schema, database or file, for a
// process of its own (dbqbench's procs children) to open.
func (s *System) DSN() string { return s.dsn }

// SetHandler replaces the no-op handler for the runs started from now on
// (nil: the no-op again).
func (s *System) SetHandler(h worker.HandlerFunc) { s.handler = h }

// SetQueues sets the queues the workers of the runs started from now on
// read (nil: the queue's default queue).
func (s *System) SetQueues(queues ...string) { s.workQueues = queues }

// SetOvershoot lets the runs started from now on process more jobs than
// their n: a worker on a backlog longer than n still runs the jobs it had
// claimed when the n-th ran, and Wait returns once they are done.
func (s *System) SetOvershoot(on bool) { s.overshoot = on }

// ServerVersion is the database's SELECT version() (sqlite_version()).
func (s *System) ServerVersion(ctx context.Context) (string, error) {
	q := "SELECT version()"
	if s.dialect == dbqueue.SQLite {
		q = "SELECT 'SQLite ' || sqlite_version()"
	}
	var v string
	err := s.admin.QueryRowContext(ctx, q).Scan(&v)
	return v, err
}

// Setup migrates the tables with migrations.Up and opens the queues. On
// PostgreSQL it also gives the jobs table statistics (20,000 rows,
// ANALYZE, TRUNCATE keeps them), as the ceiling does, so the planner's
// choice does not depend on when autovacuum last ran.
func (s *System) Setup(ctx context.Context) error {
	if err := migrations.Up(ctx, s.admin, s.dialect); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if s.push == nil {
		var opts []dbqueue.Option
		if s.otel != nil {
			opts = append(opts, dbqueue.WithPushMiddleware(s.otel.inst.PushMiddleware()))
		}
		var err error
		if s.push, err = dbqueue.Open(ctx, s.dsn, opts...); err != nil {
			return err
		}
		if s.otel != nil {
			if err := s.otel.observe(s.push); err != nil {
				return err
			}
		}
		for range s.o.Workers {
			q, err := dbqueue.Open(ctx, s.dsn, opts...)
			if err != nil {
				return err
			}
			s.queues = append(s.queues, q)
		}
	}
	if err := s.setupEffects(ctx); err != nil {
		return err
	}
	if s.dialect == dbqueue.Postgres {
		if err := s.Reset(ctx); err != nil {
			return err
		}
		if err := s.Enqueue(ctx, 20_000); err != nil {
			return err
		}
		if _, err := s.admin.ExecContext(ctx, "ANALYZE jobs"); err != nil {
			return err
		}
	}
	return s.Reset(ctx)
}

// Reset empties jobs and failed_jobs.
func (s *System) Reset(ctx context.Context) error {
	var stmts []string
	switch s.dialect {
	case dbqueue.Postgres:
		stmts = []string{"TRUNCATE jobs, failed_jobs RESTART IDENTITY"}
		if s.o.Handler != HandlerNoop {
			stmts = []string{"TRUNCATE jobs, failed_jobs, " + Effects + " RESTART IDENTITY"}
		}
	case dbqueue.MySQL:
		stmts = []string{"TRUNCATE TABLE jobs", "TRUNCATE TABLE failed_jobs"}
		if s.o.Handler != HandlerNoop {
			stmts = append(stmts, "TRUNCATE TABLE "+Effects)
		}
	default:
		stmts = []string{"DELETE FROM jobs", "DELETE FROM failed_jobs"}
	}
	for _, q := range stmts {
		if _, err := s.admin.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("reset: %w", err)
		}
	}
	return nil
}

// Enqueue pushes n no-op jobs with PushMany, 1,000 per call.
func (s *System) Enqueue(ctx context.Context, n int) error {
	for n > 0 {
		k := min(n, pushBatch)
		if _, err := s.push.PushMany(ctx, s.jobs[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// fillBatch is how many jobs one PushMany call of Fill carries: one
// transaction of fifty 1,000-row INSERTs.
const fillBatch = 50_000

// Fill pushes n no-op jobs to queue ("": the default queue) with delay,
// in PushMany calls of fillBatch: the fastest path a producer has, for
// prefilling backlogs of millions.
func (s *System) Fill(ctx context.Context, n int, queue string, delay time.Duration) error {
	batch := make([]dbqueue.NewJob, min(n, fillBatch))
	for i := range batch {
		batch[i] = s.jobs[i%len(s.jobs)]
		batch[i].Queue, batch[i].Delay = queue, delay
	}
	for n > 0 {
		k := min(n, len(batch))
		if _, err := s.push.PushMany(ctx, batch[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// Start runs Options.Workers workers until n jobs have been processed.
func (s *System) Start(ctx context.Context, n int) (bench.Run, error) {
	return s.StartRun(ctx, n)
}

// StartRun is Start with the concrete type.
func (s *System) StartRun(ctx context.Context, n int) (*Run, error) {
	ctx, cancel := context.WithCancel(ctx)
	r := &Run{n: int64(n), overshoot: s.overshoot, cancel: cancel, done: make(chan struct{}), errs: &errorLog{}}
	h := s.handler
	if h == nil {
		h = func(context.Context, *dbqueue.Job) error { return nil }
	}
	logger := slog.New(r.errs)
	queues := s.workQueues // SetQueues, else Options.Queues
	if queues == nil {
		queues = s.o.Queues
	}
	for i, q := range s.queues {
		o := worker.Options{
			Concurrency:  s.o.Concurrency,
			Prefetch:     s.o.Prefetch,
			Claims:       s.o.Claims,
			Sleep:        s.o.Sleep,
			Name:         fmt.Sprintf("bench-%d", i),
			Queues:       queues,
			QueueWeights: s.o.QueueWeights,
			Logger:       logger,
			Events: worker.Events{
				JobProcessed: func(context.Context, *dbqueue.Job, time.Duration) {
					if r.processed.Add(1) == r.n {
						close(r.done)
					}
				},
				JobFailed: func(_ context.Context, job *dbqueue.Job, err error) {
					r.errs.add(fmt.Sprintf("job %d failed: %v", job.ID, err))
				},
				JobReleasedAfterException: func(_ context.Context, job *dbqueue.Job, _ time.Duration) {
					r.errs.add(fmt.Sprintf("job %d released after an error", job.ID))
				},
			},
		}
		if s.o.LibraryDefaults {
			o.Concurrency, o.Prefetch, o.Claims, o.Sleep = 0, 0, 0, 0
		}
		if s.otel != nil {
			o = s.otel.inst.WorkerOptions(o)
		}
		if s.o.NoMetrics {
			o.MetricsInterval = -1
		}
		if s.o.History {
			o.HistoryRetention = time.Hour
		}
		w, err := worker.New(q, o)
		if err != nil {
			cancel()
			r.wg.Wait()
			return nil, err
		}
		s.register(w, h)
		r.wg.Go(func() {
			if err := w.Run(ctx); err != nil {
				r.errs.add("worker: " + err.Error())
			}
		})
	}
	return r, nil
}

// Run is the set of workers of one measurement.
type Run struct {
	n         int64
	overshoot bool
	processed atomic.Int64
	cancel    context.CancelFunc
	done      chan struct{}
	wg        sync.WaitGroup
	errs      *errorLog
}

// Done is closed when the n-th job has run.
func (r *Run) Done() <-chan struct{} { return r.done }

// Processed is how many jobs have run so far.
func (r *Run) Processed() int64 { return r.processed.Load() }

// Wait waits for the n-th job to run, stops the workers and returns when
// every worker's Run has returned: by then the completer has deleted all
// finished jobs.
func (r *Run) Wait(ctx context.Context) (time.Time, error) {
	var waitErr error
	select {
	case <-r.done:
	case <-ctx.Done():
		waitErr = ctx.Err()
	}
	r.cancel()
	r.wg.Wait()
	last := time.Now()
	if got := r.processed.Load(); waitErr == nil && (got < r.n || got > r.n && !r.overshoot) {
		waitErr = fmt.Errorf("processed %d jobs, want exactly %d", got, r.n)
	}
	return last, errors.Join(waitErr, r.errs.err())
}

// Stop stops the workers without waiting for a count: for runs started
// with more jobs than will ever come (a soak). It returns the warnings and
// errors the workers logged.
func (r *Run) Stop() error {
	r.cancel()
	r.wg.Wait()
	return r.errs.err()
}

// Close closes the queues and the admin connection.
func (s *System) Close() error {
	var errs []error
	if s.otel != nil {
		errs = append(errs, s.otel.shutdown()) // before the queue its gauges read
	}
	for _, q := range append(s.queues, s.push) {
		if q != nil {
			errs = append(errs, q.Close())
		}
	}
	if s.effects != nil {
		errs = append(errs, s.effects.Close())
	}
	if s.admin != nil {
		errs = append(errs, s.admin.Close())
	}
	return errors.Join(errs...)
}

// errorLog is a slog.Handler that drops info lines (one per job) and keeps
// warnings and errors, which make the measurement fail: a benchmark that
// retried, lost a reservation or failed a job is not a clean number.
type errorLog struct {
	mu    sync.Mutex
	lines []string
	count int
}

func (e *errorLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (e *errorLog) Handle(_ context.Context, rec slog.Record) error {
	var b strings.Builder
	b.WriteString(rec.Level.String() + " " + rec.Message)
	rec.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	e.add(b.String())
	return nil
}

func (e *errorLog) WithAttrs([]slog.Attr) slog.Handler { return e }
func (e *errorLog) WithGroup(string) slog.Handler      { return e }

func (e *errorLog) add(line string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.count++
	if len(e.lines) < 5 {
		e.lines = append(e.lines, line)
	}
}

func (e *errorLog) err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.count == 0 {
		return nil
	}
	return fmt.Errorf("%d warnings/errors, first: %s", e.count, strings.Join(e.lines, "; "))
}
