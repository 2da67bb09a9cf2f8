package worker

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/dbqueue/dbqueue"
)

// TimeoutMargin is how much shorter than the queue's retry_after a job
// timeout must be: a job still running when retry_after passes would be
// taken by another worker and run twice.
const TimeoutMargin = 5 * time.Second

// MaxDelay is the longest duration a worker accepts or writes: 100 years.
// Option durations above it are refused by New; a payload's backoff or
// timeout above it fails that job; ReleaseAfter clamps to it. Keeping every
// duration this far below time.Duration's 292-year range means adding a
// margin or converting to seconds can never wrap.
const MaxDelay = dbqueue.MaxDelay

// AdaptivePrefetchMax bounds the default, adaptive Prefetch: at most this
// many reserved jobs wait in memory (or Concurrency, if larger). It matches
// the largest claim, so a worker of quick jobs claims full batches.
const AdaptivePrefetchMax = 1000

// maxSlots bounds Concurrency and Prefetch, so their sum and the buffers
// they size stay sane.
const maxSlots = 1 << 20

// Options configure a Worker. The zero value of each field takes Laravel's
// queue:work default; docs/workers.md has the flag each mirrors.
// Durations must be from 0 to MaxDelay; New refuses others.
type Options struct {
	// Queues are read in priority order (--queue=high,default). Default:
	// the queue's default queue.
	//
	// With more than 16 active queues (of Queues, or of QueueWeights), a
	// claim does not read them one by one: the worker reads which of them
	// hold a job a claim would take, in one statement, and claims from
	// those only (see docs/measurements/width.md, "Many queues under one weighted
	// worker"). A job pushed by another process to a queue that set left
	// out is claimed within max(500 ms, 20 × that read's time) while the
	// worker is busy, and at the next poll when it is idle.
	Queues []string
	// QueueWeights turns Queues' strict priority into shares: each claim
	// reads first a queue picked in proportion to its weight (a:3, b:1 puts
	// a first in 3 claims of every 4, b in the other), then the others, so
	// no queue starves behind a busy one and an empty one costs nothing. A
	// queue of Queues with no weight weighs 1; with Queues empty, the
	// weighted queues are served. Queues that hold no job a claim would
	// take (paused or empty ones, the latter known as such above 16
	// active queues) take no turn: the others share the claims by their
	// own weights. Default: none, strict priority (Laravel's
	// --queue=high,default).
	QueueWeights map[string]int
	// Concurrency is how many jobs run at once (Laravel runs one per
	// process). Default 10.
	Concurrency int
	// Prefetch is how many reserved jobs may wait in memory for a free
	// goroutine, so no goroutine waits on the database while jobs are
	// ready. Default: it adapts, between Concurrency and
	// AdaptivePrefetchMax, to what the goroutines finish in about a
	// second: quick jobs are claimed in large batches (a claim of 1,000
	// costs the database little more than a claim of 20), slow ones are
	// not held in memory while their reservations age. A positive value
	// fixes it; negative: none.
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
	// AbandonedRetries is how many more runs a job gets, past its tries,
	// when attempts were abandoned by workers that stopped while running
	// it (killed, crashed, a deploy that did not wait): the claim that
	// takes over the expired reservation says so. A job reserved past its
	// tries after a release on its last try is no such job: it fails with
	// ErrMaxAttempts without running. Laravel fails both at once, without
	// running them again (MaxAttemptsExceededException), so with its
	// default of one try every job in flight on a killed worker is lost to
	// failed_jobs. A job that keeps killing its worker still ends: once
	// abandoned more than this many times it is failed, saying so
	// (ErrAbandoned). Default 2; LaravelAbandoned (or any negative value)
	// for Laravel's exact rule. A PHP worker sharing the queue keeps
	// Laravel's rule.
	AbandonedRetries int
	// Backoff lists delays before retries when the payload has none
	// (--backoff); the last repeats. Default: retry at once.
	Backoff []time.Duration
	// Timeout is how long one attempt may run when the payload does not say
	// (--timeout, 60s). It must be TimeoutMargin shorter than retry_after.
	Timeout time.Duration
	// UnknownKindBackoff is how long a job whose name has no handler on
	// this worker waits before it is tried again. During a rolling deploy,
	// workers of the old version see jobs of kinds only the new version
	// handles: releasing them, rather than failing them at once, lets a
	// new worker take them. The release gives the attempt back, so the job
	// reaches the worker with its handler with all its tries. Default 30s.
	UnknownKindBackoff time.Duration
	// UnknownKindWait bounds that wait: a job whose name has no handler on
	// this worker, pushed (its created_at, by the database's clock) longer
	// ago than this, is failed with ErrUnknownJob, naming its kind — no
	// worker with its handler came, so deploy one or register the handler,
	// then retry it from failed_jobs. A job whose retryUntil passes fails
	// then. Default 24h: longer than a rolling or staged deploy takes, and
	// short enough that a misnamed job is seen the next day.
	UnknownKindWait time.Duration
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
	// GracePeriod is how long running jobs may go on once the worker stops
	// (for any reason: Run's context ended, MaxJobs, MaxTime, a restart...)
	// before their contexts are cancelled too and their jobs given back.
	// Cancelling Run's context during a stop for another reason ends the
	// grace period at once. Default 10s.
	GracePeriod time.Duration
	// SignalInterval is how often the restart and pause signals and the
	// memory limit are checked. Default 1s.
	SignalInterval time.Duration
	// Logger gets one line per failure, release and give-back (Info, or
	// Warn with an error), the worker's own notices, and one line per
	// successful job at Debug, so a busy worker's log shows what needs
	// looking at. Default slog.Default().
	Logger *slog.Logger
	// Events are hooks called as jobs move; all optional.
	Events Events
	// MetricsInterval is how often the worker writes what it did to the
	// metrics table (counts, runtimes and queue waits per queue, job name
	// and minute; dbqueue.Queue.Metrics reads them) and its heartbeat row
	// to the workers table (dbqueue.Queue.Workers, `dbqueue workers`).
	// Counts are kept in memory between writes; a write that fails is
	// carried to the next, and Run writes once more as it returns.
	// Default 10s; a negative value turns both off (for tables migrated
	// before migration 00009, or a database that must see no writes but
	// the jobs').
	MetricsInterval time.Duration
	// MetricsRetention is how long minutes of metrics are kept: workers
	// delete older ones, a bounded batch at a time, every few minutes.
	// Default 7 days.
	MetricsRetention time.Duration
	// HistoryRetention, when positive, makes the worker record every job
	// that finishes here (done or failed) in the history table
	// (dbqueue.Queue.History), written in batches with the metrics, and
	// delete entries older than this. Default 0: no history (it costs a
	// row per job).
	HistoryRetention time.Duration
	// Middleware wrap every handler of the worker, outside each
	// handler's own (WithMiddleware); the first is the outermost. See
	// Middleware.
	Middleware []Middleware
}

// maxMemoryMB bounds MemoryLimitMB so converting it to bytes cannot wrap
// (1 PiB).
const maxMemoryMB = 1 << 30

// Unlimited, as Options.Tries, gives jobs unlimited attempts (--tries=0).
const Unlimited = -1

// LaravelAbandoned, as Options.AbandonedRetries, is Laravel's rule: a job
// reserved again past its tries after its worker died is failed without
// running again.
const LaravelAbandoned = -1

// defaultAbandonedRetries is Options.AbandonedRetries' default.
const defaultAbandonedRetries = 2

// defaultUnknownKindWait is Options.UnknownKindWait's default.
const defaultUnknownKindWait = 24 * time.Hour

func (o Options) withDefaults() Options {
	if o.Concurrency == 0 {
		o.Concurrency = 10
	}
	if o.Prefetch == 0 {
		o.Prefetch = max(AdaptivePrefetchMax, o.Concurrency) // the bound; see prefetcher
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
	switch {
	case o.AbandonedRetries == 0:
		o.AbandonedRetries = defaultAbandonedRetries
	case o.AbandonedRetries < 0:
		o.AbandonedRetries = 0 // Laravel's
	}
	if o.Timeout == 0 {
		o.Timeout = 60 * time.Second
	}
	if o.UnknownKindBackoff == 0 {
		o.UnknownKindBackoff = 30 * time.Second
	}
	if o.UnknownKindWait == 0 {
		o.UnknownKindWait = defaultUnknownKindWait
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
	if o.MetricsInterval == 0 {
		o.MetricsInterval = defaultMetricsInterval
	}
	if o.MetricsRetention == 0 {
		o.MetricsRetention = defaultMetricsRetention
	}
	return o
}

// validate refuses impossible options, saying what to change.
func (o Options) validate(retryAfter time.Duration) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if o.Concurrency < 0 || o.Concurrency > maxSlots {
		bad("Concurrency %d: must be from 1 to %d", o.Concurrency, maxSlots)
	}
	if o.Prefetch > maxSlots {
		bad("Prefetch %d: must be at most %d (negative: none)", o.Prefetch, maxSlots)
	}
	if o.Claims < 0 || o.Claims > maxSlots {
		bad("Claims %d: must be from 1 to %d (0 takes the default, 2)", o.Claims, maxSlots)
	}
	if o.Tries < 0 {
		bad("Tries %d: use worker.Unlimited for no limit, or a positive count", o.Tries)
	}
	for _, d := range o.Backoff {
		if d < 0 || d > MaxDelay {
			bad("Backoff %v: each delay must be from 0 to %v (100 years)", d, MaxDelay)
		}
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{
		{"Timeout", o.Timeout}, {"UnknownKindBackoff", o.UnknownKindBackoff}, {"UnknownKindWait", o.UnknownKindWait}, {"Sleep", o.Sleep}, {"MaxTime", o.MaxTime}, {"Rest", o.Rest},
		{"GracePeriod", o.GracePeriod}, {"SignalInterval", o.SignalInterval},
		{"MetricsRetention", o.MetricsRetention}, {"HistoryRetention", o.HistoryRetention},
	} {
		if f.d < 0 || f.d > MaxDelay {
			bad("%s %v: must be from 0 (the default) to %v (100 years)", f.name, f.d, MaxDelay)
		}
	}
	if o.MetricsInterval > MaxDelay {
		bad("MetricsInterval %v: must be at most %v (negative: off)", o.MetricsInterval, MaxDelay)
	}
	if o.MaxJobs < 0 {
		bad("MaxJobs %d: must not be negative (0: no limit)", o.MaxJobs)
	}
	if o.MemoryLimitMB < 0 || o.MemoryLimitMB > maxMemoryMB {
		bad("MemoryLimitMB %d: must be from 0 (no limit) to %d", o.MemoryLimitMB, maxMemoryMB)
	}
	// Timeout is at most MaxDelay here, so adding the margin cannot wrap.
	if o.Timeout >= 0 && o.Timeout <= MaxDelay && o.Timeout+TimeoutMargin > retryAfter {
		bad("Timeout %v must be at least %v shorter than the queue's retry_after %v, or a slow job is taken by a second worker while the first still runs it: lower Timeout or raise dbqueue.WithRetryAfter", o.Timeout, TimeoutMargin, retryAfter)
	}
	validateWeights(o, bad)
	for _, q := range o.Queues {
		if q == "" || strings.TrimSpace(q) != q || len(q) > 255 {
			bad("queue name %q: must be 1 to 255 bytes with no surrounding spaces", q)
		}
	}
	if slices.ContainsFunc(o.Middleware, isNilMiddleware) {
		bad("Middleware: a nil middleware")
	}
	if len(errs) > 0 {
		return fmt.Errorf("worker: %w", errors.Join(errs...))
	}
	return nil
}

// The defaults of Options.MetricsInterval and MetricsRetention.
const (
	defaultMetricsInterval  = 10 * time.Second
	defaultMetricsRetention = 7 * 24 * time.Hour
)
