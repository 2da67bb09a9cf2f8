// Package asynqq runs asynq (github.com/hibiken/asynq), the most used Go
// job queue, as a bench.System on a Redis server of its own: what a user
// who asks "why not Redis?" would pick instead of a queue in SQL.
//
// The system starts a private redis-server (the Debian package's binary,
// /usr/bin/redis-server, or REDIS_SERVER) on a free loopback port with a
// data directory of its own, and stops it in Close; it never touches a
// Redis already running on the machine. Redis runs with its built-in
// defaults (no config file: RDB snapshots on their default schedule, no
// append-only file), as the Debian package's redis.conf also leaves
// appendonly off. Options.AppendFsync turns the append-only file on
// ("everysec" or "always") for a durability closer to a committed row.
//
// asynq is set up as its README sets it up: one asynq.Server with
// Concurrency workers on the "default" queue, polling an empty queue every
// TaskCheckInterval, asynq.Client.Enqueue for
// each task (asynq has no batch enqueue; Enqueue runs EnqueueWorkers
// calls at once, as a producer with that many goroutines would), a no-op
// handler. A run counts handler returns; after the n-th it waits until
// the queue holds no pending or active task, i.e. until asynq has
// deleted the last one from Redis, which is the time Wait reports.
package asynqq

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/dbqueue/dbqueue/bench"
)

// Name is the system's name in compare's table.
const Name = "asynq-redis"

// TaskType is the no-op task every job is.
const TaskType = "bench:noop"

// TaskCheckInterval is how long an asynq worker that found the queue empty
// sleeps before asking again: asynq's default is a second, which would
// charge an end-to-end run up to a second of idle start; 20ms is what
// River's bench polls at (riverq.FetchPollInterval).
const TaskCheckInterval = 20 * time.Millisecond

// Defaults: the concurrency the other systems run with, and enough
// concurrent Enqueue calls to keep one Redis busy.
const (
	DefaultConcurrency    = 100
	DefaultEnqueueWorkers = 16
)

// Options tune the asynq system.
type Options struct {
	// Concurrency is asynq.Config.Concurrency. 0: DefaultConcurrency.
	Concurrency int
	// EnqueueWorkers is how many Enqueue calls run at once. 0:
	// DefaultEnqueueWorkers.
	EnqueueWorkers int
	// AppendFsync, when set ("everysec", "always"), runs Redis with the
	// append-only file on and that appendfsync policy.
	AppendFsync string
	// Server is the redis-server binary; "" is $REDIS_SERVER or
	// /usr/bin/redis-server.
	Server string
}

// System is asynq on a private Redis.
type System struct {
	o       Options
	redis   *exec.Cmd
	dir     string
	addr    string
	rdb     *redis.Client
	client  *asynq.Client
	payload []byte
}

var _ bench.System = (*System)(nil)

// ErrNoRedis is returned by New when no redis-server binary is installed.
var ErrNoRedis = errors.New("asynq: redis-server not found (apt-get install redis-server, or set REDIS_SERVER)")

// New starts a private redis-server and connects asynq's client to it.
func New(ctx context.Context, o Options) (*System, error) {
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.EnqueueWorkers <= 0 {
		o.EnqueueWorkers = DefaultEnqueueWorkers
	}
	if o.Server == "" {
		o.Server = os.Getenv("REDIS_SERVER")
	}
	if o.Server == "" {
		o.Server = "/usr/bin/redis-server"
	}
	if _, err := os.Stat(o.Server); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoRedis, err)
	}
	s := &System{o: o, payload: []byte(`{"num":0}`)}
	if err := s.startRedis(ctx); err != nil {
		s.Close()
		return nil, err
	}
	s.client = asynq.NewClientFromRedisClient(s.rdb)
	return s, nil
}

// startRedis runs redis-server on a free loopback port and waits until
// it answers PING.
func (s *System) startRedis(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "asynq-bench-redis-")
	if err != nil {
		return err
	}
	s.dir = dir
	port, err := freePort()
	if err != nil {
		return err
	}
	s.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir, "--daemonize", "no", "--logfile", dir + "/redis.log"}
	if s.o.AppendFsync != "" {
		args = append(args, "--appendonly", "yes", "--appendfsync", s.o.AppendFsync)
	}
	s.redis = exec.Command(s.o.Server, args...)
	if err := s.redis.Start(); err != nil {
		return fmt.Errorf("asynq: start %s: %w", s.o.Server, err)
	}
	s.rdb = redis.NewClient(&redis.Options{Addr: s.addr, PoolSize: 4 * (s.o.Concurrency + s.o.EnqueueWorkers)})
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := s.rdb.Ping(ctx).Err()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			log, _ := os.ReadFile(dir + "/redis.log")
			return fmt.Errorf("asynq: redis-server on %s did not answer: %w; its log: %s", s.addr, err, log)
		}
		time.Sleep(20 * time.Millisecond) // polling a starting server: nothing to wait on instead
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *System) Name() string             { return Name }
func (s *System) Database() bench.Database { return bench.Redis }

// Addr is the private Redis's host:port.
func (s *System) Addr() string { return s.addr }

// Setup has nothing to create: asynq keeps its keys as it goes.
func (s *System) Setup(ctx context.Context) error { return s.Reset(ctx) }

// Reset empties the private Redis.
func (s *System) Reset(ctx context.Context) error {
	return s.rdb.FlushAll(ctx).Err()
}

// Enqueue enqueues n no-op tasks, EnqueueWorkers calls at once.
func (s *System) Enqueue(ctx context.Context, n int) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, s.o.EnqueueWorkers)
	for w := range s.o.EnqueueWorkers {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if _, err := s.client.EnqueueContext(ctx, asynq.NewTask(TaskType, s.payload), asynq.MaxRetry(0)); err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Start runs an asynq.Server until n tasks have been handled.
func (s *System) Start(ctx context.Context, n int) (bench.Run, error) {
	r := &run{s: s, n: int64(n), done: make(chan struct{})}
	r.srv = asynq.NewServerFromRedisClient(s.rdb, asynq.Config{
		Concurrency:       s.o.Concurrency,
		TaskCheckInterval: TaskCheckInterval,
		LogLevel:          asynq.WarnLevel,
		ErrorHandler: asynq.ErrorHandlerFunc(func(_ context.Context, t *asynq.Task, err error) {
			r.fail(fmt.Errorf("task %s failed: %w", t.Type(), err))
		}),
	})
	mux := asynq.HandlerFunc(func(context.Context, *asynq.Task) error {
		if r.handled.Add(1) == r.n {
			close(r.done)
		}
		return nil
	})
	if err := r.srv.Start(mux); err != nil {
		return nil, err
	}
	return r, nil
}

type run struct {
	s       *System
	srv     *asynq.Server
	n       int64
	handled atomic.Int64
	done    chan struct{}

	mu  sync.Mutex
	err error
}

func (r *run) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.err = errors.Join(r.err, err)
}

// Wait waits for the n-th handler to return, then for asynq to delete the
// last task (no pending or active task left), and shuts the server down.
func (r *run) Wait(ctx context.Context) (time.Time, error) {
	var waitErr error
	select {
	case <-r.done:
		waitErr = r.drained(ctx)
	case <-ctx.Done():
		waitErr = ctx.Err()
	}
	last := time.Now()
	r.srv.Shutdown()
	r.mu.Lock()
	defer r.mu.Unlock()
	return last, errors.Join(waitErr, r.err)
}

// drained polls the queue until asynq has removed every task: the handler
// returning is not the task being done, the Done call to Redis is.
func (r *run) drained(ctx context.Context) error {
	for {
		// asynq's own key names (internal/base: PendingKey, ActiveKey);
		// its Inspector does not know a queue the client registered
		// before Reset flushed Redis.
		var pending, active *redis.IntCmd
		_, err := r.s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			pending, active = p.LLen(ctx, "asynq:{default}:pending"), p.LLen(ctx, "asynq:{default}:active")
			return nil
		})
		if err != nil {
			return err
		}
		if pending.Val() == 0 && active.Val() == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

// Close closes the client and stops the private Redis.
func (s *System) Close() error {
	var errs []error // the client and inspector share rdb: closing it closes them
	if s.rdb != nil {
		errs = append(errs, s.rdb.Close())
	}
	if s.redis != nil && s.redis.Process != nil {
		_ = s.redis.Process.Kill()
		_ = s.redis.Wait()
	}
	if s.dir != "" {
		errs = append(errs, os.RemoveAll(s.dir))
	}
	return errors.Join(errs...)
}
