package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// ErrWedged is returned by Run when every goroutine is stuck in a handler
// that ignored its context past its timeout: the process should exit so a
// supervisor restarts it (Laravel's worker kills itself in this case).
var ErrWedged = errors.New("worker: every goroutine is stuck in a handler that ignores its context; restart the process")

// Worker runs jobs from one queue connection. Register handlers, then Run.
type Worker struct {
	q    *dbqueue.Queue
	ops  queueOps
	opts Options
	log  *slog.Logger
	// weights orders each claim's queues when QueueWeights is set.
	weights *weights
	// adaptive: Options.Prefetch was left at 0, so the prefetch follows
	// the rate jobs finish at (prefetcher), up to opts.Prefetch.
	adaptive bool

	mu sync.Mutex
	// handlers is replaced, never changed, under mu (Handle), so runners
	// read it without a lock.
	handlers atomic.Pointer[map[string]*handler]
	// batchCallbacks by batch name (OnBatch), under mu; cancelledBatches
	// caches the ids of batches seen cancelled.
	batchCallbacks   map[string]BatchCallbacks
	cancelledBatches sync.Map
}

// New returns a worker for q. It refuses options that cannot work, above all
// a Timeout that is not TimeoutMargin shorter than the queue's retry_after.
func New(q *dbqueue.Queue, opts Options) (*Worker, error) {
	if q == nil {
		return nil, errors.New("worker: nil queue")
	}
	adaptive := opts.Prefetch == 0
	opts = opts.withDefaults()
	if err := opts.validate(q.RetryAfter()); err != nil {
		return nil, err
	}
	if len(opts.Queues) == 0 && len(opts.QueueWeights) > 0 {
		opts.Queues = weightedQueues(opts.QueueWeights)
	}
	if len(opts.Queues) == 0 {
		opts.Queues = []string{q.DefaultQueue()}
	}
	return &Worker{
		q: q, ops: opsOf(q), opts: opts, weights: newWeights(opts), adaptive: adaptive,
		log: opts.Logger.With("worker", opts.Name),
	}, nil
}

// handlerFor finds the handler of a job: by its name, then, for Laravel
// string jobs ("Class@method"), by the class alone.
func (w *Worker) handlerFor(job *dbqueue.Job) *handler {
	handlers := w.handlerMap()
	if h, ok := handlers[job.Name()]; ok {
		return h
	}
	if d := job.Payload.DisplayName; d != "" {
		return handlers[d]
	}
	return nil
}

// handlerMap is the handlers registered so far.
func (w *Worker) handlerMap() map[string]*handler {
	if m := w.handlers.Load(); m != nil {
		return *m
	}
	return nil
}

// run is the state of one Run call.
type run struct {
	w       *Worker
	started time.Time

	ready    chan *dbqueue.Job // reserved jobs waiting for a goroutine
	freed    chan struct{}     // a goroutine finished a job
	inFlight atomic.Int64      // reserved and not yet finished
	// limitedSeen: a claim returned a job under a concurrency limit, so
	// the loop's idle waits end once a batch of handlers is free.
	limitedSeen atomic.Bool
	// wakeAt is the in-flight count at or below which a finished job
	// wakes the loop (signal); MaxInt64 wakes it for every job.
	wakeAt    atomic.Int64
	reserved  atomic.Int64 // reserved in all
	processed atomic.Int64 // finished in all
	stuck     atomic.Int64 // goroutines held by handlers past their timeout
	stopping  atomic.Bool

	jobCtx     context.Context // parent of every handler's context
	cancelJobs context.CancelFunc
	// slots are where handlers run, one per runner goroutine: cancelling
	// running jobs cancels each slot's attempt (cancelRunning).
	slotsMu sync.Mutex
	slots   []*slot

	restartAt atomic.Int64
	paused    atomic.Pointer[map[string]bool]
	// active caches the active queues of the paused set it was made for.
	active atomic.Pointer[activeQueues]
	// readySet is the queues to claim from when more than manyQueues
	// are active (ready.go).
	readySet readySet
	overMem  atomic.Bool

	done     *completer
	releases *releaser
	wake     <-chan struct{} // PostgreSQL notifications of new jobs

	// halt is closed as the loop stops: claims stop retrying a database
	// that does not answer, and runners resting (Options.Rest) stop
	// resting. nil in RunOnce.
	halt chan struct{}
	// writes bounds the writing of outcomes as Run stops, and keeps the
	// jobs it gave up (unwritten.go).
	writes writes
	// claiming and reading follow outages of the claims and of the
	// signal readings, so each is logged once as it starts and once as
	// it ends.
	claiming, reading outage

	// closed is set, under closeMu, as Run returns: from then on the
	// worker writes nothing and calls no hook for a job whose handler
	// returns late; the job stays reserved until retry_after. Everything
	// that finishes a job holds closeMu's read lock, so Run waits for
	// writes already under way.
	closeMu sync.RWMutex
	closed  bool

	// stats counts what the run did for the metrics table; nil when
	// Options.MetricsInterval is negative (or in RunOnce).
	stats *recorder

	// record, when set (by RunOnce), hears every job's outcome as it is
	// logged.
	record func(job *dbqueue.Job, outcome string, err error, extra []any)
}

// finish runs fn, which writes a job's outcome and calls its hooks, unless
// Run has returned.
func (r *run) finish(job *dbqueue.Job, fn func()) {
	r.closeMu.RLock()
	defer r.closeMu.RUnlock()
	if r.closed {
		r.w.log.Warn("job finished after Run returned: nothing written, the job stays reserved until retry_after", "id", job.ID, "name", job.Name())
		return
	}
	fn()
}

func (r *run) isClosed() bool {
	r.closeMu.RLock()
	defer r.closeMu.RUnlock()
	return r.closed
}

// Run works jobs until a stop condition is met or ctx ends, then stops
// gracefully: no new jobs are taken; running jobs get GracePeriod to
// finish; those still running then have their contexts cancelled and are
// given back to the queue at once, without counting the attempt.
// Reserved jobs that never started are given back too.
//
// It returns nil on an orderly stop (including ctx ending), ErrWedged, or
// an error that working cannot get past (the tables are missing, the
// queue was closed). Database trouble is logged and retried with backoff,
// never returned, except as the worker stops: outcomes not written by the
// end of the grace period (and one more try, cut after lastWrite) are
// given up, and Run returns an *UnwrittenError naming their jobs.
func (w *Worker) Run(ctx context.Context) (err error) {
	if len(w.handlerMap()) == 0 {
		return errors.New("worker: no handlers registered: call Handle or HandleJSON before Run")
	}
	r := &run{
		w:       w,
		started: time.Now(),
		ready:   make(chan *dbqueue.Job, w.opts.Prefetch),
		freed:   make(chan struct{}, 1),
	}
	r.wakeAt.Store(math.MaxInt64)
	r.jobCtx, r.cancelJobs = context.WithCancel(context.WithoutCancel(ctx))
	defer r.cancelJobs()
	r.paused.Store(&map[string]bool{})
	r.halt = make(chan struct{})
	defer r.openWrites(ctx)()
	r.claiming = outage{log: w.log, stopped: "reserving jobs stopped: the database fails or cannot be reached",
		resumed: "reserving jobs resumed", doing: "claims are retried with backoff until it answers; running jobs go on, and their outcomes are retried"}
	r.reading = outage{log: w.log, stopped: "cannot read worker signals",
		resumed: "worker signals read again", doing: "retried every SignalInterval; restarts and pauses are seen once it works"}

	sig, err := r.firstSignals(ctx)
	if err != nil {
		return err
	}
	r.restartAt.Store(sig.restart)
	stopReporting, err := r.startReporting(ctx)
	if err != nil {
		return err
	}

	wake, unsubscribe := w.ops.Wakeups(w.opts.Queues...)
	defer unsubscribe()
	r.wake = wake
	r.done = newCompleter(r)
	r.releases = newReleaser(w.q, func() (context.Context, context.CancelFunc) { return r.writeCtx(ctx) })
	var runners sync.WaitGroup
	for range w.opts.Concurrency {
		runners.Add(1)
		go r.runner(r.newSlot(), runners.Done)
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		r.watch(watchCtx, sig.restart)
	}()

	reason, loopErr := r.loop(ctx)
	stopWatch()
	// Run leaves no goroutine of its own behind: the watcher may be in the
	// middle of reading the signals, which its context ends.
	<-watched
	r.stopping.Store(true)
	close(r.ready)

	// Let running jobs finish; after the grace period, or at once if ctx
	// ends meanwhile, cancel them, and wait for their handlers only a
	// moment longer. Outcomes that cannot be written are retried until
	// the grace period is over, even when the jobs finished before it.
	finished := make(chan struct{})
	go func() { runners.Wait(); close(finished) }()
	var cut <-chan struct{}
	if ctx.Err() == nil {
		cut = ctx.Done()
		defer context.AfterFunc(ctx, r.writes.endRetrying)()
	}
	if n := r.inFlight.Load(); n > 0 {
		w.log.Info("worker stopping: waiting for running jobs", "reason", string(reason), "running", n, "grace", w.opts.GracePeriod)
	}
	grace := time.AfterFunc(w.opts.GracePeriod, r.writes.endRetrying)
	defer grace.Stop()
	select {
	case <-finished:
	case <-r.writes.retrying.Done():
		if cut != nil && ctx.Err() != nil {
			w.log.Warn("context ended during the grace period: cancelling running jobs", "running", r.inFlight.Load())
		} else {
			w.log.Warn("grace period over: cancelling running jobs", "running", r.inFlight.Load())
		}
	}
	r.cancelRunning()
	select {
	case <-finished:
	case <-time.After(abandonAfter):
		w.log.Error("handlers ignored cancellation; their jobs stay reserved until retry_after", "jobs", r.inFlight.Load())
		// Every runner may be held: give back what still waits in the
		// prefetch buffer (a runner that frees up may take some too).
		for job := range r.ready {
			r.finish(job, func() { r.giveBack(job, "worker stopping before the job started") })
		}
	}
	r.closeMu.Lock()
	r.closed = true
	r.closeMu.Unlock()
	r.done.close()
	r.releases.close()
	stopReporting()
	err = errors.Join(loopErr, r.unwritten())
	w.log.Info("worker stopping", "reason", string(reason), "processed", r.processed.Load(), "error", err)
	if fn := w.opts.Events.WorkerStopping; fn != nil {
		fn(reason, err)
	}
	return err
}

// abandonAfter is how long a handler past its timeout (or past the end of
// the grace period) is waited for before the worker moves on without it.
const abandonAfter = 2 * time.Second

// firstSignals reads the signals before work starts; it is where missing
// tables are found.
func (r *run) firstSignals(ctx context.Context) (signals, error) {
	for wait := 100 * time.Millisecond; ; wait = min(wait*2, 30*time.Second) {
		sig, err := readSignals(ctx, r.w.ops, r.w.opts.Queues)
		if err == nil {
			r.paused.Store(&sig.paused)
			return sig, nil
		}
		if sqldb.MissingTable(err) || sqldb.IsClosed(err) || ctx.Err() != nil {
			return signals{}, err
		}
		r.w.log.Warn("database unreachable; retrying", "in", wait, "error", err)
		if !sleep(ctx, wait) {
			return signals{}, ctx.Err()
		}
	}
}

// watch polls the restart and pause signals and the memory limit.
func (r *run) watch(ctx context.Context, restartAt int64) {
	t := time.NewTicker(r.w.opts.SignalInterval)
	defer t.Stop()
	memSample := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// Wake the loop only for news: waking it on every tick would make an
		// idle worker poll the jobs table every SignalInterval, however
		// long its Sleep.
		news := false
		if sig, err := readSignals(ctx, r.w.ops, r.w.opts.Queues); err == nil {
			if sig.restart != restartAt && r.restartAt.Load() != -1 {
				r.restartAt.Store(-1) // changed: stop
				news = true
			}
			if !maps.Equal(*r.paused.Load(), sig.paused) {
				news = true
				// Stored only when changed: the active queues, and the
				// ready set read for them, are kept until then.
				r.paused.Store(&sig.paused)
			}
			r.reading.ok()
		} else if ctx.Err() == nil {
			r.reading.failed(err)
		}
		if limit := r.w.opts.MemoryLimitMB; limit > 0 && !r.overMem.Load() {
			metrics.Read(memSample)
			used := memSample[0].Value.Uint64() - memSample[1].Value.Uint64()
			if used > uint64(limit)<<20 {
				r.overMem.Store(true)
				news = true
			}
		}
		if o := r.w.opts; o.MaxTime > 0 && time.Since(r.started) >= o.MaxTime {
			news = true
		}
		if news {
			r.signal()
		}
		if afterSignals != nil {
			afterSignals()
		}
	}
}

// afterSignals, when a test sets it, is called after each reading of the
// signals, so the test can count them instead of sleeping.
var afterSignals func()

// signal wakes the loop if it waits.
func (r *run) signal() {
	select {
	case r.freed <- struct{}{}:
	default:
	}
}

// stopReason is Laravel's stopIfNecessary.
func (r *run) stopReason(ctx context.Context) StopReason {
	o := r.w.opts
	switch {
	case ctx.Err() != nil:
		return StopCancelled
	case r.restartAt.Load() == -1:
		return StopRestart
	case r.overMem.Load():
		return StopMemory
	case o.MaxTime > 0 && time.Since(r.started) >= o.MaxTime:
		return StopMaxTime
	case o.MaxJobs > 0 && r.processed.Load() >= int64(o.MaxJobs):
		return StopMaxJobs
	case r.stuck.Load() >= int64(o.Concurrency):
		return StopWedged
	}
	return ""
}

// busy is how many reserved jobs may still come back to the queue through
// this worker: those in flight, less those abandoned to handlers that
// ignore their context (failed, or left reserved until retry_after).
func (r *run) busy() int64 {
	return r.inFlight.Load() - r.stuck.Load()
}

// claim is one claim's outcome, sent back to the loop.
type claim struct {
	n    int64 // slots it asked for
	jobs []*dbqueue.Job
	err  error
	// idleBefore: nothing was in flight or being claimed when it began, so
	// no job could have been released back while it ran; reservedBefore
	// and failedBefore are how many jobs had been delivered and how many
	// claims had failed then. A claim that failed beside it may have held
	// rows it skipped, so its "empty" proves nothing.
	idleBefore     bool
	reservedBefore int64
	failedBefore   int
}

// loop reserves jobs while there is room and hands them to the runners,
// keeping up to Options.Claims claims in flight: one batch is claimed
// while the last is still being worked.
func (r *run) loop(ctx context.Context) (StopReason, error) {
	o := r.w.opts
	pf := newPrefetcher(o, r.w.adaptive, time.Now())
	capacity, minBatch := pf.capacity()
	results := make(chan claim, o.Claims)
	var (
		outstanding int
		claiming    int64  // slots asked for by claims in flight
		empty       *claim // the last claim found nothing; none is sent until the poll wait
		failed      int    // claims that returned an error
		idle        = minPoll
		trouble     time.Duration
	)
	deliver := func(c claim) {
		outstanding--
		claiming -= c.n
		for _, j := range c.jobs {
			r.inFlight.Add(1)
			r.reserved.Add(1)
			if j.Limited() {
				r.limitedSeen.Store(true)
			}
			r.ready <- j
		}
	}
	// takeResult handles a claim that came back while the loop was busy
	// elsewhere (waiting out database trouble): its jobs go to the runners
	// at once, before their reservations age.
	takeResult := func(c claim) {
		deliver(c)
		if c.err != nil {
			failed++
		} else if len(c.jobs) > 0 {
			empty, idle = nil, minPoll
		}
	}
	// Claims still in flight when the loop stops are waited for and their
	// jobs delivered; stopping is set first, so the runners give them back
	// instead of starting them. halt stops a claim retrying a database
	// that does not answer (a statement under way is not cut: its reply
	// may carry jobs it reserved).
	defer func() {
		r.stopping.Store(true)
		close(r.halt)
		for outstanding > 0 {
			deliver(<-results)
		}
	}()
	// A claim retries a refused connection inside (sqldb.Retry) for up to
	// 30s before its error comes back: the hooks tell the outage at its
	// first failure.
	claimCtx := sqldb.WithRetryHooks(ctx, &sqldb.RetryHooks{Failed: r.claiming.retried, Stop: r.halt})
	for {
		if reason := r.stopReason(ctx); reason != "" {
			if reason == StopWedged {
				return reason, ErrWedged
			}
			return reason, nil
		}
		if fn := o.Events.Looping; fn != nil {
			fn(ctx)
		}
		active := r.activeQueues()
		queues := *active
		if pf.update(r.processed.Load(), time.Now()) {
			capacity, minBatch = pf.capacity()
		}
		want := capacity - r.inFlight.Load() - claiming
		if o.MaxJobs > 0 {
			want = min(want, int64(o.MaxJobs)-r.reserved.Load()-claiming)
		}
		if empty == nil && len(queues) > 0 && want > 0 && outstanding < o.Claims && (outstanding == 0 || want >= minBatch) {
			n := min(want, 1000)
			c := claim{n: n, idleBefore: r.busy() == 0 && outstanding == 0, reservedBefore: r.reserved.Load(), failedBefore: failed}
			outstanding++
			claiming += n
			var order []string
			if len(queues) <= manyQueues {
				order = r.w.weights.order(queues)
			} else {
				select {
				case <-r.wake:
					r.readySet.wake()
				default:
				}
			}
			go func() {
				c.jobs, c.err = r.claim(claimCtx, int(n), active, order)
				results <- c
			}()
			continue
		}
		if outstanding == 0 {
			if empty == nil {
				// No room, or every queue paused.
				r.wait(ctx, o.Sleep)
				continue
			}
			if o.StopWhenEmpty && empty.idleBefore && r.reserved.Load() == empty.reservedBefore && failed == empty.failedBefore {
				return StopEmpty, nil
			}
			empty = nil
			if r.limitedSeen.Load() {
				// Jobs under a limit are claimed a batch of handlers at a
				// time (limitedBatch): wake when that many are free.
				r.wakeAt.Store(int64(o.Concurrency - limitedBatch(o)))
			}
			r.wait(ctx, idle)
			r.wakeAt.Store(math.MaxInt64)
			idle = min(idle*2, o.Sleep)
			continue
		}
		// Wait for a claim to come back, or for room for another. Runners
		// wake the loop only once there is room for a batch: waking it for
		// every job that finished cost a goroutine switch per job.
		if o.MaxJobs == 0 {
			wakeAt := int64(-1) // no claim can start: wait for a result
			if empty == nil && len(queues) > 0 && outstanding < o.Claims {
				wakeAt = capacity - claiming - minBatch
			}
			r.wakeAt.Store(wakeAt)
			if r.inFlight.Load() <= wakeAt {
				r.wakeAt.Store(math.MaxInt64)
				continue // room came while the threshold was set
			}
		} // with MaxJobs, every finished job wakes it: it stops on their count
		var c claim
		select {
		case c = <-results:
		case <-r.freed:
		case <-ctx.Done():
		}
		r.wakeAt.Store(math.MaxInt64)
		if c.n == 0 {
			continue // woken, not a claim
		}
		deliver(c)
		if c.err != nil {
			failed++
			if ctx.Err() != nil {
				continue
			}
			if errors.Is(c.err, sqldb.ErrNoTables) {
				return StopError, c.err
			}
			if sqldb.IsClosed(c.err) {
				return StopError, fmt.Errorf("worker: the queue's database handle was closed while the worker ran (close the queue after Run returns): %w", c.err)
			}
			r.claiming.failed(c.err)
			trouble = min(max(trouble*2, 100*time.Millisecond), 30*time.Second)
			r.w.log.Debug("cannot reserve jobs; retrying", "in", trouble, "error", c.err)
			t := time.NewTimer(trouble)
		rest:
			for {
				select {
				case c := <-results:
					takeResult(c)
				case <-t.C:
					break rest
				case <-ctx.Done():
					t.Stop()
					break rest
				}
			}
			continue
		}
		r.claiming.ok()
		trouble = 0
		if len(c.jobs) > 0 {
			empty, idle = nil, minPoll
			continue
		}
		empty = &c
	}
}

// claim reserves up to n jobs from the active queues: from order, the
// weights' order of all of them, when they are few (manyQueues or fewer);
// otherwise from the ready set (ready.go) alone, in the weights' order of
// the queues in it. A claim that takes nothing from a set it did not read
// itself reads the set and claims again, so an empty claim means that no
// active queue held a job a claim would take.
func (r *run) claim(ctx context.Context, n int, active *[]string, order []string) ([]*dbqueue.Job, error) {
	if len(*active) <= manyQueues {
		return r.reserve(ctx, n, order, nil)
	}
	force := false
	for {
		queues, gen, fresh, err := r.readySet.take(ctx, active, force, r.readyQueues)
		if err != nil {
			return nil, err
		}
		if len(queues) > 0 {
			jobs, err := r.reserve(ctx, n, r.w.weights.order(queues), func(q string) { r.readySet.drop(gen, q) })
			if err != nil || len(jobs) > 0 {
				return jobs, err
			}
		}
		if fresh {
			return nil, nil
		}
		force = true
	}
}

// readyQueues reads which of queues hold a job a claim would take.
func (r *run) readyQueues(ctx context.Context, queues []string) ([]string, error) {
	rctx, cancel := context.WithTimeout(ctx, reserveTimeout)
	defer cancel()
	return r.w.ops.ReadyQueues(rctx, queues)
}

// reserve claims jobs without letting a cancellation cut the claim short:
// a claim cancelled mid-flight may commit on the server with its reply
// lost, leaving jobs held until retry_after. Jobs claimed as the worker
// stops are given back at once instead. short, when not nil, hears each
// queue whose claim came back short.
func (r *run) reserve(ctx context.Context, n int, queues []string, short func(queue string)) ([]*dbqueue.Job, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reserveTimeout)
	defer cancel()
	// Jobs under a concurrency limit: no more than the handlers free now,
	// so none waits here holding a place of its limit; and none until a
	// batch of handlers is free, so a limit's jobs are not claimed one
	// claim each as handlers free one by one.
	limited := int(int64(r.w.opts.Concurrency) - r.inFlight.Load())
	if limited < limitedBatch(r.w.opts) {
		limited = 0
	}
	return r.w.ops.Reserve(rctx, n, limited, queues, r.claimFailed, short)
}

// limitedBatch is the fewest jobs under concurrency limits a claim asks
// for: a quarter of the handlers.
func limitedBatch(o Options) int { return max(1, o.Concurrency/4) }

// claimFailed reports a job the claim moved to failed_jobs without running
// it — its payload does not decode, or dbqueue.ErrAttemptsExhausted — as
// any failed job is: a log line, the handler's failure callback (when the
// payload names a handler here) and JobFailed. A malformed job carries
// what its row gave: ID, Queue, Attempts, RawPayload, and as much of
// Payload as decoded (its Name may be empty).
func (r *run) claimFailed(job *dbqueue.Job, cause error) {
	r.logJob(job, 0, "failed at claim, without running", cause)
	r.count(job, countFailed, 0, false)
	r.failed(job, r.w.handlerFor(job), cause)
}

// reserveTimeout bounds one claim on an unresponsive database.
const reserveTimeout = 30 * time.Second

// minPoll is the first wait after a poll that found nothing.
const minPoll = 10 * time.Millisecond

// wait sleeps up to d, waking early when a job finishes, a job is pushed
// (PostgreSQL), or ctx ends.
func (r *run) wait(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-r.freed:
	case <-r.wake:
		r.readySet.wake()
	}
}

// activeQueues are the queues of Options.Queues not paused, for one set
// of paused queues.
type activeQueues struct {
	paused *map[string]bool
	queues []string
}

// activeQueues returns the queues not paused, in Options.Queues order: the
// same pointer until the paused queues change, which tells the ready set
// that its queues are still the ones to serve.
func (r *run) activeQueues() *[]string {
	paused := r.paused.Load()
	if a := r.active.Load(); a != nil && a.paused == paused {
		return &a.queues
	}
	a := &activeQueues{paused: paused, queues: r.w.opts.Queues}
	if len(*paused) > 0 {
		a.queues = nil
		for _, q := range r.w.opts.Queues {
			if !(*paused)[q] {
				a.queues = append(a.queues, q)
			}
		}
	}
	r.active.Store(a)
	return &a.queues
}

// runner runs jobs from the ready channel on runnerSlot until it is closed, then
// calls done. A handler that ends the goroutine (runtime.Goexit) hands
// the runner on to a new goroutine, which finishes that job first.
func (r *run) runner(runnerSlot *slot, done func()) {
	defer func() {
		if exited := runnerSlot.exited; exited != nil {
			runnerSlot.exited = nil
			go r.finishExitedCall(runnerSlot, exited, done)
			return
		}
		runnerSlot.retire()
		done()
	}()
	for job := range r.ready {
		counted := false
		if r.stopping.Load() {
			r.finish(job, func() { r.giveBack(job, "worker stopping before the job started") })
		} else {
			counted = r.process(runnerSlot, job)
		}
		r.jobDone(counted)
	}
}

// finishExitedCall finishes the job whose handler ended its runner's goroutine,
// then runs as that runner. Deferred, so a hook that ends this goroutine
// too still leaves the job counted and a runner running.
func (r *run) finishExitedCall(runnerSlot *slot, exited *exitedCall, done func()) {
	counted := false
	defer func() {
		r.jobDone(counted)
		go r.runner(runnerSlot, done)
	}()
	counted = r.afterCall(runnerSlot, exited.attempt, exited.result)
}

// jobDone accounts for a job its runner is done with.
func (r *run) jobDone(counted bool) {
	if !counted {
		r.processed.Add(1)
	}
	// Counted before the loop is told, which reads the counts.
	n := r.inFlight.Add(-1)
	if rest := r.w.opts.Rest; rest > 0 && !r.stopping.Load() {
		t := time.NewTimer(rest)
		select {
		case <-t.C:
		case <-r.halt: // the worker stops: no rest to wait out
			t.Stop()
		}
	}
	if n <= r.wakeAt.Load() {
		r.signal()
	}
}

// giveBack returns a job without counting its attempt.
func (r *run) giveBack(job *dbqueue.Job, why string) {
	ctx := context.WithoutCancel(r.jobCtx)
	// Retried while the grace period lasts; once running jobs are
	// cancelled, one try, so Run is not held: a job not given back comes
	// back after retry_after.
	err := r.persist(ctx, job, func(ctx context.Context) error { return r.w.ops.Unreserve(ctx, job) })
	r.logJob(job, 0, "given back", err, "why", why)
	switch ev := r.w.opts.Events; {
	case err != nil:
	case ev.JobGivenBack != nil:
		ev.JobGivenBack(ctx, job)
	case ev.JobReleased != nil:
		ev.JobReleased(ctx, job, 0)
	}
}

// persist runs a finishing statement, retrying database trouble with backoff
// until it succeeds, the job's reservation is about to expire (then the
// job comes back after retry_after: run twice at worst, never lost) or the
// grace period of a stopping worker is over (r.jobCtx ends). An error that
// comes from the job itself (recurs) is returned at once: retrying it
// would only run the job again when its reservation ran out; so is one no
// retry can cure (a closed pool). op runs with a context of
// run.writeCtx, whose values are ctx's.
func (r *run) persist(ctx context.Context, job *dbqueue.Job, op func(ctx context.Context) error) error {
	deadline := job.ExpiresAt().Add(-time.Second)
	wait := 50 * time.Millisecond
	for try := 0; ; try++ {
		wctx, cancel := r.writeCtx(ctx)
		err := op(wctx)
		cancel()
		if err == nil || errors.Is(err, dbqueue.ErrNotHeld) || r.w.recurs(err) {
			return err
		}
		// Once running jobs are cancelled, the try just made was the last.
		if sqldb.IsClosed(err) || time.Now().Add(wait).After(deadline) || r.jobCtx.Err() != nil {
			r.gaveUp(err, job)
			return err
		}
		level := slog.LevelWarn
		if try > 0 {
			level = slog.LevelDebug // one line per job and outage, not per retry
		}
		r.w.log.Log(ctx, level, "cannot finish job; retrying", "id", job.ID, "in", wait, "error", err)
		sleep(r.jobCtx, wait) // cut short when running jobs are cancelled: one more try
		wait = min(wait*2, 5*time.Second)
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// logJob writes a job's outcome: a failure, release or give-back at Info
// (Warn with an error), one line each, for an operator to see.
func (r *run) logJob(job *dbqueue.Job, took time.Duration, outcome string, err error, extra ...any) {
	r.logJobAt(slog.LevelInfo, job, took, outcome, err, extra...)
}

// logDone writes a success at Debug: a busy worker's default log would
// otherwise be one line per job, and drown what needs looking at. A
// success whose write failed is at Warn.
func (r *run) logDone(job *dbqueue.Job, took time.Duration, outcome string, err error, extra ...any) {
	r.logJobAt(slog.LevelDebug, job, took, outcome, err, extra...)
}

func (r *run) logJobAt(level slog.Level, job *dbqueue.Job, took time.Duration, outcome string, err error, extra ...any) {
	if r.record != nil {
		r.record(job, outcome, err, extra)
	}
	if err != nil {
		level = slog.LevelWarn
	}
	if !r.w.log.Enabled(context.Background(), level) {
		return
	}
	args := []any{"name", job.Name(), "id", job.ID, "queue", job.Queue, "attempt", job.Attempts,
		"duration", took.Round(time.Microsecond), "outcome", outcome}
	args = append(args, extra...)
	if err != nil {
		args = append(args, "error", err)
	}
	r.w.log.Log(context.Background(), level, "job", args...)
}
