// Package riverq runs River (github.com/riverqueue/river) as a bench.System,
// configured the way River's own `river bench` command configures it
// (cmd/river/riverbench/river_bench.go in River's repository):
//
//   - FetchCooldown 2ms and FetchPollInterval 20ms ("much better than the
//     client's default values" of 100ms and 1s, per River's comment);
//   - one queue, river.QueueDefault, with MaxWorkers 2_000;
//   - a no-op worker for args of kind "benchmark" ({"num": N});
//   - jobs inserted with client.InsertMany in batches of 5_000;
//   - a fresh client per run, the jobs table truncated before it;
//   - completion counted from a subscription to completed/failed/cancelled
//     events (so the completer's work counts, not just the worker's), and the
//     run timed until the last completed event;
//   - the pgxpool at pgx's defaults (River's CLI sets only application_name
//     and timeouts).
//
// River runs in its own PostgreSQL schema, created and migrated here with
// rivermigrate, so it never touches dbqueue's or the ceiling's tables.
package riverq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	"github.com/dbqueue/dbqueue/bench"
)

// Settings copied from River's bench command.
const (
	FetchCooldown     = 2 * time.Millisecond
	FetchPollInterval = 20 * time.Millisecond
	MaxWorkers        = 2_000
	InsertBatchSize   = 5_000
)

// Options tune the River system. The zero value mirrors `river bench`.
type Options struct {
	// Schema River's tables live in. Default "river_bench".
	Schema string
	// MaxConns of the pgxpool; 0 keeps pgx's default (max(4, NumCPU)), as
	// River's CLI does.
	MaxConns int32
	// Fast inserts with InsertManyFast (COPY FROM) instead of InsertMany.
	Fast bool
	// Logger for River; default discards everything below warn.
	Logger *slog.Logger
}

// System is River on PostgreSQL.
type System struct {
	opts   Options
	pool   *pgxpool.Pool
	driver *riverpgxv5.Driver
	client *river.Client[pgx.Tx]
	args   []river.InsertManyParams
}

var _ bench.System = (*System)(nil)

// New connects to PostgreSQL at dsn.
func New(ctx context.Context, dsn string, opts Options) (*System, error) {
	if opts.Schema == "" {
		opts.Schema = "river_bench"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("river: parse dsn: %w", err)
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = "dbqueue bench river"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("river: connect: %w", err)
	}
	args := make([]river.InsertManyParams, InsertBatchSize)
	for i := range args {
		args[i].Args = BenchmarkArgs{Num: i}
	}
	return &System{opts: opts, pool: pool, driver: riverpgxv5.New(pool), args: args}, nil
}

func (s *System) Name() string             { return bench.RiverName }
func (s *System) Database() bench.Database { return bench.Postgres }

// Setup creates River's schema and migrates it to the latest version.
func (s *System) Setup(ctx context.Context) error {
	if _, err := s.pool.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{s.opts.Schema}.Sanitize()); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	m, err := rivermigrate.New(s.driver, &rivermigrate.Config{Schema: s.opts.Schema, Logger: s.opts.Logger})
	if err != nil {
		return err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// Reset truncates river_job and builds a fresh client, as River's bench does
// per run (it also runs VACUUM FULL, which after TRUNCATE has nothing to do).
func (s *System) Reset(ctx context.Context) error {
	if s.client != nil {
		_ = s.client.Stop(ctx)
		s.client = nil
	}
	if _, err := s.pool.Exec(ctx, "TRUNCATE "+pgx.Identifier{s.opts.Schema, "river_job"}.Sanitize()); err != nil {
		return fmt.Errorf("truncate: %w", err)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &BenchmarkWorker{})
	client, err := river.NewClient(s.driver, &river.Config{
		FetchCooldown:     FetchCooldown,
		FetchPollInterval: FetchPollInterval,
		Logger:            s.opts.Logger,
		Queues: map[string]river.QueueConfig{
			river.QueueDefault: {MaxWorkers: MaxWorkers},
		},
		Schema:  s.opts.Schema,
		Workers: workers,
	})
	if err != nil {
		return err
	}
	s.client = client
	return nil
}

// Enqueue inserts n jobs with InsertMany (or InsertManyFast) in batches of at
// most InsertBatchSize.
func (s *System) Enqueue(ctx context.Context, n int) error {
	for n > 0 {
		k := min(n, InsertBatchSize)
		var err error
		if s.opts.Fast {
			_, err = s.client.InsertManyFast(ctx, s.args[:k])
		} else {
			_, err = s.client.InsertMany(ctx, s.args[:k])
		}
		if err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// Start subscribes to job events and starts the client.
func (s *System) Start(ctx context.Context, n int) (bench.Run, error) {
	client := s.client
	events, unsubscribe := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: n + 1_000, // never drop an event: it is how we count
		Kinds: []river.EventKind{
			river.EventKindJobCancelled,
			river.EventKindJobCompleted,
			river.EventKindJobFailed,
		},
	})
	r := &run{client: client, unsubscribe: unsubscribe, done: make(chan struct{})}
	go r.count(events, n)
	if err := client.Start(ctx); err != nil {
		unsubscribe()
		return nil, err
	}
	return r, nil
}

type run struct {
	client      *river.Client[pgx.Tx]
	unsubscribe func()
	done        chan struct{}

	mu   sync.Mutex
	last time.Time
	err  error
}

func (r *run) count(events <-chan *river.Event, n int) {
	worked := 0
	for ev := range events {
		if ev == nil {
			break
		}
		switch {
		case ev.Kind == river.EventKindJobCompleted:
		case ev.Kind == river.EventKindJobFailed && ev.Job.State != rivertype.JobStateDiscarded:
			continue // will be retried
		default:
			r.mu.Lock()
			r.err = errors.Join(r.err, fmt.Errorf("job %d: unexpected event %s", ev.Job.ID, ev.Kind))
			r.mu.Unlock()
		}
		worked++
		if worked == n {
			r.mu.Lock()
			r.last = time.Now()
			r.mu.Unlock()
			close(r.done)
			return
		}
	}
}

func (r *run) Wait(ctx context.Context) (time.Time, error) {
	var waitErr error
	select {
	case <-r.done:
	case <-ctx.Done():
		waitErr = ctx.Err()
	}
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	stopErr := r.client.Stop(stopCtx)
	r.unsubscribe()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last, errors.Join(waitErr, r.err, stopErr)
}

// Close closes the pool.
func (s *System) Close() error {
	if s.client != nil {
		_ = s.client.Stop(context.Background())
	}
	s.pool.Close()
	return nil
}

// BenchmarkArgs are the args of River's bench job.
type BenchmarkArgs struct {
	Num int `json:"num"`
}

// Kind is the same kind River's bench uses.
func (BenchmarkArgs) Kind() string { return "benchmark" }

// BenchmarkWorker does nothing, as River's bench worker.
type BenchmarkWorker struct {
	river.WorkerDefaults[BenchmarkArgs]
}

// Work returns at once.
func (w *BenchmarkWorker) Work(context.Context, *river.Job[BenchmarkArgs]) error { return nil }
