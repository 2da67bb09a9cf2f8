// Package periodic enqueues jobs on a schedule — cron expressions or
// fixed intervals — exactly once per tick however many processes run the
// same schedule, with no leader: every process tries every tick, and lock
// rows in the database, written with the job, let exactly one of them
// through. A process that dies costs no tick while another runs.
//
// Run a Scheduler beside each worker (or anywhere that opens the queue):
//
//	s, err := periodic.New(q, []periodic.Job{{
//		Name:     "nightly-report",
//		Schedule: periodic.MustCron("0 3 * * *"),
//		New:      func(tick time.Time) dbqueue.NewJob { return dbqueue.NewJob{Name: "report", Data: tick.Unix()} },
//	}}, periodic.Options{})
//	go s.Run(ctx)
//
// Ticks are read from the database's clock, so processes whose clocks
// disagree still agree on them. A scheduler enqueues the ticks that fall
// while it runs, in order; ticks from before it started (every process
// was down) are not made up for.
//
// # Daylight saving
//
// A cron expression with CRON_TZ names wall-clock times in that zone. On
// the day the clocks go back, a wall time that occurs twice runs once, at
// its first occurrence; on the day they go forward, a wall time that does
// not exist runs once, at the first instant after the gap (02:30 in
// America/New_York runs at 03:00 EDT). An expression whose hour field is a
// wildcard (*, */2, @hourly) follows real time instead, as Vixie cron
// does: 0 * * * * runs every real hour, so both 01:00s of an autumn change,
// and nothing in a spring gap, where no hour passes.
//
// # Deploys
//
// A tick is identified by its schedule's Name and by the job it pushes, so
// a rolling deploy, where old and new processes run side by side, pushes
// each tick once when it changes one of them: the spec (*/5 to */10), the
// job, queue or data (same Name), or the Name (same job). While both run,
// each instant is pushed at most once and never one older than the newest
// pushed under that Name. A change of Name and job at once is a new
// schedule. Two schedules that push the very same job (queue, name, data)
// at the same instant push it once.
//
// # Listing
//
// Every scheduler writes its schedules (name, spec, next tick) to the
// schedules table (migration 00013) when it starts and every few minutes,
// and the process whose push took a tick records it; Queue.Schedules,
// `dbqueue schedules` and the dashboard read it. The table only reports:
// without it, ticks are pushed all the same. Job.RunAtStart pushes a job
// once more when schedulers start, once across processes.
//
// # Locks
//
// Tick locks live in the unique-lock table (dbqueue_unique). A scheduler
// never pushes a tick older than MaxCatchUp+1 periods (at least an hour, at
// most a week) by the database's clock, and deletes, every few minutes, the
// locks that only such ticks could need: those of schedules that have not
// ticked for more than a week, so removed or renamed schedules leave
// nothing behind.
package periodic

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/queueside"
)

// Schedule says when a job is due. Every process must compute the same
// ticks from the same time, so a schedule depends on the time given and
// nothing else (no "since this process started").
type Schedule interface {
	// Next is the first tick strictly after t.
	Next(t time.Time) time.Time
	// String names the schedule. Processes with the same Job.Name and
	// String share every lock; see Deploys in the package documentation
	// for what happens when they differ.
	String() string
}

// Cron parses a standard five-field cron expression ("*/5 * * * *") or a
// descriptor (@hourly, @daily, …), with robfig/cron. Times are UTC unless
// the expression starts with CRON_TZ=Zone/Name; on that zone's
// daylight-saving days a tick keeps the rule in the package documentation.
// @every is refused: it counts from when each process starts, so processes
// would disagree; use Every. So is an expression that never matches a date
// (0 0 30 2 *).
func Cron(expr string) (Schedule, error) { return newCron(expr) }

// MustCron is Cron that panics on a bad expression, for schedules written
// in the program.
func MustCron(expr string) Schedule {
	s, err := Cron(expr)
	if err != nil {
		panic(err)
	}
	return s
}

type every time.Duration

// Every ticks every d, at the multiples of d since the Unix epoch (so
// every process agrees on the ticks): Every(time.Hour) ticks on the hour
// UTC. d is whole seconds, at least one; New refuses others.
func Every(d time.Duration) Schedule { return every(d) }

func (e every) Next(t time.Time) time.Time {
	s := int64(time.Duration(e) / time.Second)
	u := t.Unix()
	return time.Unix(u-mod(u, s)+s, 0).UTC()
}

func (e every) String() string { return "every " + time.Duration(e).String() }

func mod(a, b int64) int64 { return (a%b + b) % b }

// Job is one periodic job.
type Job struct {
	// Name identifies the schedule across processes: every process must
	// give the same job the same name, and no two jobs may share one. It
	// is half of a tick's identity; the job pushed is the other (see
	// Deploys in the package documentation).
	Name string
	// Schedule says when it is due.
	Schedule Schedule
	// New builds the job to push for a tick.
	New func(tick time.Time) dbqueue.NewJob
	// RunAtStart pushes the job once more when a scheduler starts, beside
	// its ticks: New gets the database time the scheduler started. It is
	// pushed once across processes: a scheduler that starts before the
	// schedule's next tick (and less than a minute after the start that
	// pushed) pushes nothing, so several processes starting together, or
	// one after another in a rolling deploy, push it once. It is for jobs
	// that should not wait for a distant first tick after a deploy (a
	// daily cache warm-up); the next tick is pushed as usual.
	RunAtStart bool
}

// Options configure a Scheduler.
type Options struct {
	// Logger receives push failures and skipped ticks (slog.Default()).
	Logger *slog.Logger
	// MaxCatchUp bounds how many ticks a late scheduler (a stalled
	// process, a database that was away) pushes one after another before
	// it skips to the newest one (default 10). The skip steps over at
	// most 10,000 ticks; a scheduler further behind goes on from the
	// first tick after now. Ticks older than MaxCatchUp+1 periods (at
	// least an hour, at most a week) are never pushed.
	MaxCatchUp int
}

// Scheduler pushes its jobs at their ticks.
type Scheduler struct {
	pusher tickPusher
	jobs   []Job
	log    *slog.Logger
	catch  int
	offset time.Duration // best known database clock minus local clock
	known  bool          // offset was measured
	// unrecorded is set once writing the schedules table failed and was
	// logged, until a write works again.
	unrecorded bool
}

type tickPusher interface {
	PushScheduledTick(ctx context.Context, job dbqueue.NewJob, schedule, spec string, tick, next, window int64) (int64, bool, error)
	PushScheduleStart(ctx context.Context, job dbqueue.NewJob, schedule string, at, until int64) (int64, bool, error)
	PruneTickLocks(ctx context.Context, grace int64, limit int) (int64, error)
	DBNow(ctx context.Context) (int64, error)
	// The schedules table, which reports and decides nothing.
	SeeSchedules(ctx context.Context, list []dbqueue.ScheduleInfo) error
	RecordScheduleTick(ctx context.Context, s dbqueue.ScheduleInfo) error
	PruneSchedules(ctx context.Context, age int64, limit int) (int64, error)
}

// New checks jobs and returns a Scheduler on q. Run it in every process
// that should keep the schedule going.
func New(q *dbqueue.Queue, jobs []Job, opts Options) (*Scheduler, error) {
	if q == nil {
		return nil, errors.New("periodic: New: nil queue")
	}
	seen := map[string]bool{}
	now := time.Now()
	for i, j := range jobs {
		switch {
		case j.Name == "":
			return nil, fmt.Errorf("periodic: job %d has no Name: name it, the same in every process", i)
		case strings.ContainsRune(j.Name, 0):
			return nil, fmt.Errorf("periodic: job %q: a Name may not contain a NUL byte (it separates the name from the spec in the lock's key): rename it", j.Name)
		case seen[j.Name]:
			return nil, fmt.Errorf("periodic: two jobs are named %q: names must be unique", j.Name)
		case j.Schedule == nil || j.New == nil:
			return nil, fmt.Errorf("periodic: job %q needs a Schedule and a New", j.Name)
		}
		if e, ok := j.Schedule.(every); ok && (time.Duration(e) < time.Second || time.Duration(e)%time.Second != 0) {
			return nil, fmt.Errorf("periodic: job %q: Every(%v): use whole seconds, at least 1s (the database's clock counts seconds)", j.Name, time.Duration(e))
		}
		if _, ok := following(j.Schedule, now.Unix()); !ok {
			return nil, fmt.Errorf("periodic: job %q: schedule %q has no tick in the next ten years: fix its expression", j.Name, j.Schedule.String())
		}
		seen[j.Name] = true
	}
	s := &Scheduler{pusher: queueside.Of(q), jobs: jobs, log: opts.Logger, catch: opts.MaxCatchUp}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.catch <= 0 {
		s.catch = 10
	}
	return s, nil
}

// poll is how often a scheduler looks at the database's clock while it
// waits for a tick it expects any moment, and how long it waits after the
// database failed it.
const poll = 50 * time.Millisecond

// never is the next tick of a job whose schedule has none left.
const never = int64(math.MaxInt64)

// Lateness and pruning. A tick is never pushed more than window(tick) after
// it (by the database's clock), and window is at most maxLate. The job lock
// of a tick outlives that by margin (a stall between reading the clock and
// committing), and the tick locks of schedules that have not ticked for
// maxLate+margin are deleted: no push can need them.
const (
	maxLate    = 7 * 24 * time.Hour
	minLate    = time.Hour
	margin     = time.Hour
	pruneEvery = 5 * time.Minute
	pruneBatch = 1000
	// maxSteps bounds the ticks one skip steps over; a scheduler further
	// behind than that goes straight to the first tick from now.
	maxSteps = 10_000
)

// following is s's first tick strictly after u, and false when there is
// none a sane way ahead: the zero time, one not after u, or one beyond the
// horizon (a Schedule that would make a scheduler spin or push year 1).
func following(s Schedule, u int64) (int64, bool) {
	n := s.Next(time.Unix(u, 0).UTC())
	if n.IsZero() || n.Unix() <= u || n.Unix()-u > int64(horizon/time.Second) {
		return never, false
	}
	return n.Unix(), true
}

// window is how late tick, followed by next, may still be pushed.
func (s *Scheduler) window(tick, next int64) int64 {
	lo, hi := int64(minLate/time.Second), int64(maxLate/time.Second)
	period := next - tick
	if period <= 0 || int64(s.catch+1) > hi/period {
		return hi
	}
	return min(max(int64(s.catch+1)*period, lo), hi)
}

// Run pushes each job at each of its ticks until ctx ends, then returns
// nil. Database errors are logged and retried; a tick is never skipped for
// one unless the scheduler falls more than MaxCatchUp ticks behind. A job
// whose schedule yields no sane next tick is logged and stops.
func (s *Scheduler) Run(ctx context.Context) error {
	var now int64
	for {
		var err error
		if now, err = s.now(ctx); err == nil {
			break
		}
		s.log.Warn("periodic: cannot read the database clock; retrying", "error", err)
		if !sleep(ctx, time.Second) {
			return nil
		}
	}
	next := make([]int64, len(s.jobs))
	starting := make([]bool, len(s.jobs)) // a RunAtStart push is due
	for i, j := range s.jobs {
		next[i] = s.following(j, now)
		starting[i] = j.RunAtStart
	}
	s.see(ctx, next)
	started := now   // the instant a RunAtStart push is for
	var pruned int64 // database time of the last prune
	for {
		startFailed := false
		for i, j := range s.jobs {
			if starting[i] {
				starting[i] = !s.pushStart(ctx, j, started, next[i])
				startFailed = startFailed || starting[i]
			}
		}
		due := never
		for _, n := range next {
			due = min(due, n)
		}
		wait := pruneEvery
		if due != never {
			wait = min(wait, time.Until(time.Unix(due, 0).Add(-s.offset)))
		}
		if startFailed {
			wait = min(wait, time.Second)
		}
		if !sleep(ctx, max(wait, poll)) {
			return nil
		}
		now, err := s.now(ctx)
		if err != nil {
			s.log.Warn("periodic: cannot read the database clock; retrying", "error", err)
			continue
		}
		failed := false
		for i := range s.jobs {
			var ok bool
			next[i], ok = s.pushDue(ctx, s.jobs[i], next[i], now)
			failed = failed || !ok
		}
		if now-pruned >= int64(pruneEvery/time.Second) {
			if pruned != 0 {
				s.see(ctx, next)
			}
			pruned = now
			s.prune(ctx)
		}
		if ctx.Err() != nil {
			return nil
		}
		if failed && !sleep(ctx, time.Second) {
			return nil
		}
	}
}

// following is j's next tick after u, or never, logged, when it has none.
func (s *Scheduler) following(j Job, u int64) int64 {
	n, ok := following(j.Schedule, u)
	if !ok {
		s.log.Error("periodic: schedule has no next tick; the job stops", "job", j.Name, "schedule", j.Schedule.String(), "after", time.Unix(u, 0).UTC())
	}
	return n
}

// pushDue pushes j's ticks from tick up to now, in order, and returns the
// next tick to push, and false when a push failed. In order matters: a
// tick's lock is taken over only by a later tick, so a scheduler that
// pushed tick t+1 has already seen tick t pushed, by itself or another.
// It pushes at most MaxCatchUp+1 ticks and steps over at most maxSteps,
// and stops when ctx ends.
func (s *Scheduler) pushDue(ctx context.Context, j Job, tick, now int64) (int64, bool) {
	at := func(u int64) time.Time { return time.Unix(u, 0).UTC() }
	for n := 0; tick <= now; n++ {
		if ctx.Err() != nil {
			return tick, false
		}
		next := s.following(j, tick)
		if n == s.catch || now-tick > s.window(tick, next) {
			skipped := tick
			tick, next = s.skip(ctx, j, tick, next, now)
			if tick > now || now-tick > s.window(tick, next) {
				s.log.Warn("periodic: fell behind; skipping to the next tick", "job", j.Name, "from", at(skipped), "to", at(next))
				return next, true
			}
			s.log.Warn("periodic: fell behind; skipping to the newest tick", "job", j.Name, "from", at(skipped), "to", at(tick))
		}
		until := next // the end of this tick's lock
		if next == never {
			until = tick + 1
		}
		job := j.New(at(tick))
		id, pushed, err := s.pusher.PushScheduledTick(ctx, job, j.Name, j.Schedule.String(), tick, until, s.window(tick, until)+int64(margin/time.Second))
		if err != nil {
			if ctx.Err() == nil {
				s.log.Error("periodic: push failed; retrying", "job", j.Name, "tick", at(tick), "error", err)
			}
			return tick, false
		}
		if pushed {
			s.record(ctx, j, job, id, tick, next)
		}
		tick = next
	}
	return tick, true
}

// startGrace is how long after a RunAtStart push another scheduler's
// start pushes nothing, however close the schedule's next tick.
const startGrace = time.Minute

// pushStart makes j's RunAtStart push for a scheduler that started at
// the database time started, whose next tick is next, unless another
// start took it; it returns false when the push failed (to retry).
func (s *Scheduler) pushStart(ctx context.Context, j Job, started, next int64) bool {
	until := max(next, started+int64(startGrace/time.Second))
	if next == never {
		until = started + int64(startGrace/time.Second)
	}
	job := j.New(time.Unix(started, 0).UTC())
	id, pushed, err := s.pusher.PushScheduleStart(ctx, job, j.Name, started, until)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("periodic: push at start failed; retrying", "job", j.Name, "error", err)
		}
		return false
	}
	if !pushed {
		s.log.Debug("periodic: the push at start was made by another scheduler", "job", j.Name, "holder", id)
		return true
	}
	s.log.Info("periodic: pushed at start", "job", j.Name, "id", id)
	s.record(ctx, j, job, id, started, next)
	return true
}

// record writes the tick this process pushed to the schedules table.
func (s *Scheduler) record(ctx context.Context, j Job, job dbqueue.NewJob, id, tick, next int64) {
	s.recorded(ctx, s.pusher.RecordScheduleTick(ctx, dbqueue.ScheduleInfo{
		Name: j.Name, Spec: j.Schedule.String(), NextTick: tickTime(next),
		LastTick: time.Unix(tick, 0), LastJobID: id, LastQueue: job.Queue, LastJob: job.Name,
	}))
}

// see writes every schedule's spec and next tick to the schedules table.
func (s *Scheduler) see(ctx context.Context, next []int64) {
	list := make([]dbqueue.ScheduleInfo, len(s.jobs))
	for i, j := range s.jobs {
		list[i] = dbqueue.ScheduleInfo{Name: j.Name, Spec: j.Schedule.String(), NextTick: tickTime(next[i])}
	}
	s.recorded(ctx, s.pusher.SeeSchedules(ctx, list))
}

// recorded logs the first failure to write the schedules table, which
// only reports the schedules: the ticks are pushed all the same.
func (s *Scheduler) recorded(ctx context.Context, err error) {
	switch {
	case err == nil:
		s.unrecorded = false
	case !s.unrecorded && ctx.Err() == nil:
		s.unrecorded = true
		s.log.Warn("periodic: cannot write the schedules table, which only reports the schedules (it comes with migration 00013: run migrate up if it is missing); ticks are pushed all the same, and this is logged again only after a write worked", "error", err)
	}
}

// tickTime is a tick as a time, zero for never.
func tickTime(u int64) time.Time {
	if u == never {
		return time.Time{}
	}
	return time.Unix(u, 0)
}

// skip returns the newest tick at or before now, from tick (whose
// successor is next), and its successor, stepping over at most maxSteps
// ticks; further behind, it returns the first tick after now (as tick and
// next).
func (s *Scheduler) skip(ctx context.Context, j Job, tick, next, now int64) (int64, int64) {
	for range maxSteps {
		if next > now || next == never || ctx.Err() != nil {
			return tick, next
		}
		tick, next = next, s.following(j, next)
	}
	n := s.following(j, now)
	return n, n
}

// prune deletes the tick locks nothing can need any more, a batch at a
// time, and logs a failure: pruning can wait for the next pass.
func (s *Scheduler) prune(ctx context.Context) {
	grace := int64((maxLate + margin) / time.Second)
	for range 100 {
		n, err := s.pusher.PruneTickLocks(ctx, grace, pruneBatch)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("periodic: cannot prune old tick locks; will try again", "error", err)
			}
			return
		}
		if n < pruneBatch {
			break
		}
	}
	// The rows of schedules no process has kept for as long.
	for range 100 {
		n, err := s.pusher.PruneSchedules(ctx, grace, pruneBatch)
		if err != nil {
			s.recorded(ctx, err)
			return
		}
		if n < pruneBatch {
			return
		}
	}
}

// now reads the database's clock, and keeps the best estimate of how far
// it is ahead of the local one. The database counts whole seconds, so each
// reading can only show the offset too small: the largest seen is the best.
func (s *Scheduler) now(ctx context.Context) (int64, error) {
	local := time.Now()
	now, err := s.pusher.DBNow(ctx)
	if err != nil {
		return 0, err
	}
	if off := time.Unix(now, 0).Sub(local); off > s.offset || !s.known {
		s.offset, s.known = off, true
	}
	return now, nil
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
