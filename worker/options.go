package worker

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// TimeoutMargin is how much shorter than the queue's retry_after a job
// timeout must be: a job still running when retry_after passes would be
// taken by another worker and run twice.
const TimeoutMargin = 5 * time.Second

// Options configure a Worker. The zero value of each field takes Laravel's
// queue:work default; see the README's table for the flag each mirrors.
type Options struct {
	// Queues are read in priority order (--queue=high,default). Default:
	// the queue's default queue.
	Queues []string
	// Concurrency is how many jobs run at once (Laravel runs one per
	// process). Default 10.
	Concurrency int
	// Prefetch is how many reserved jobs may wait in memory for a free
	// goroutine, so no goroutine waits on the database while jobs are
	// ready. Default: Concurrency. Negative: none.
	Prefetch int
	// Claims is how many claims may be in flight at once, so the next
	// batch is on its way while the last is still being read and worked,
	// and the database spreads claims over more than one of its threads.
	// Default 2; 1 claims one batch at a time.
	Claims int
	// Sleep is the longest wait between polls when no job is ready
	// (--sleep, 3s). Polling starts at 10ms after work and backs off to it.
	Sleep time.Duration
	// Tries is how many attempts a job gets when its payload does not say
	// (--tries, 1). Use Unlimited for no limit.
	Tries int
	// Backoff lists delays before retries when the payload has none
	// (--backoff); the last repeats. Default: retry at once.
	Backoff []time.Duration
	// Timeout is how long one attempt may run when the payload does not say
	// (--timeout, 60s). It must be TimeoutMargin shorter than retry_after.
	Timeout time.Duration
	// MaxJobs stops the worker after this many jobs (--max-jobs). 0: no limit.
	MaxJobs int
	// MaxTime stops the worker after this long (--max-time). 0: no limit.
	MaxTime time.Duration
	// MemoryLimitMB stops the worker when the Go runtime holds more than
	// this many MiB (--memory). 0: no limit.
	MemoryLimitMB int
	// StopWhenEmpty stops the worker when no job is ready (--stop-when-empty).
	StopWhenEmpty bool
	// Rest pauses a goroutine after each job (--rest). Default 0.
	Rest time.Duration
	// Name names the worker in logs and events (--name, "default").
	Name string
	// GracePeriod is how long running jobs may go on after Run's context is
	// cancelled before their contexts are cancelled too and their jobs
	// released. Default 10s.
	GracePeriod time.Duration
	// SignalInterval is how often the restart and pause signals and the
	// memory limit are checked. Default 1s.
	SignalInterval time.Duration
	// Logger gets one line per job and the worker's own notices. Default
	// slog.Default().
	Logger *slog.Logger
	// Events are hooks called as jobs move; all optional.
	Events Events
}

// Unlimited, as Options.Tries, gives jobs unlimited attempts (--tries=0).
const Unlimited = -1

func (o Options) withDefaults() Options {
	if o.Concurrency == 0 {
		o.Concurrency = 10
	}
	if o.Prefetch == 0 {
		o.Prefetch = o.Concurrency
	}
	if o.Prefetch < 0 {
		o.Prefetch = 0
	}
	if o.Claims == 0 {
		o.Claims = 2
	}
	if o.Sleep == 0 {
		o.Sleep = 3 * time.Second
	}
	if o.Tries == 0 {
		o.Tries = 1
	}
	if o.Tries == Unlimited {
		o.Tries = 0 // Laravel's 0
	}
	if o.Timeout == 0 {
		o.Timeout = 60 * time.Second
	}
	if o.Name == "" {
		o.Name = "default"
	}
	if o.GracePeriod == 0 {
		o.GracePeriod = 10 * time.Second
	}
	if o.SignalInterval == 0 {
		o.SignalInterval = time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// validate refuses impossible options, saying what to change.
func (o Options) validate(retryAfter time.Duration) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if o.Concurrency < 0 {
		bad("Concurrency %d: must be at least 1", o.Concurrency)
	}
	if o.Claims < 0 {
		bad("Claims %d: must be at least 1 (0 takes the default, 2)", o.Claims)
	}
	if o.Tries < 0 {
		bad("Tries %d: use worker.Unlimited for no limit, or a positive count", o.Tries)
	}
	for _, d := range o.Backoff {
		if d < 0 {
			bad("Backoff %v: delays must not be negative", d)
		}
	}
	if o.Timeout < 0 || o.Sleep < 0 || o.MaxTime < 0 || o.Rest < 0 || o.GracePeriod < 0 || o.MaxJobs < 0 || o.MemoryLimitMB < 0 {
		bad("Timeout, Sleep, MaxTime, Rest, GracePeriod, MaxJobs and MemoryLimitMB must not be negative")
	}
	if o.Timeout+TimeoutMargin > retryAfter {
		bad("Timeout %v must be at least %v shorter than the queue's retry_after %v, or a slow job is taken by a second worker while the first still runs it: lower Timeout or raise dbqueue.WithRetryAfter", o.Timeout, TimeoutMargin, retryAfter)
	}
	for _, q := range o.Queues {
		if q == "" || strings.TrimSpace(q) != q || len(q) > 255 {
			bad("queue name %q: must be 1 to 255 bytes with no surrounding spaces", q)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("worker: %w", errors.Join(errs...))
	}
	return nil
}
