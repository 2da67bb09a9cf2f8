// Package bench measures job queues kept in SQL databases against each other.
//
// It lives in its own module (github.com/dbqueue/dbqueue/bench) so that the
// queues it compares with, River above all, never enter dbqueue's own
// dependency graph.
//
// Every queue under test is a System. The harness owns the clock: it calls
// Enqueue and Start and reads the time of the last completed job from Run.Wait,
// so every system is timed the same way. Two measurements are defined:
//
//   - BurnDown: prefill n jobs (not timed), start workers, time until the n-th
//     job is done. This is what River's own `river bench -n N` measures.
//   - EndToEnd: start idle workers, then enqueue n jobs in batches from one
//     goroutine while the workers drain them; time from the first enqueue to
//     the n-th job done.
package bench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"
)

// Database names the SQL server a System keeps its jobs in. Ratios in the
// report compare each system with the ceiling loop of the same database.
type Database string

const (
	Postgres Database = "postgres"
	MariaDB  Database = "mariadb"
	SQLite   Database = "sqlite"
	Redis    Database = "redis" // asynq's: no ceiling loop, ratios show "–"
)

// System is one queue implementation under test. A dbqueue runner plugs in as
// one more implementation of this interface.
//
// Jobs are no-ops: the handler does nothing, so what is measured is the cost
// of moving a job through the queue (insert, reserve, complete).
type System interface {
	// Name is the short, unique label used by -systems and in the report,
	// e.g. "river-pg", "ceiling-mariadb".
	Name() string

	// Database is where the jobs live; it picks the ceiling to compare with.
	Database() Database

	// Setup runs once before any round: create schemas and tables, run
	// migrations. It must be idempotent.
	Setup(ctx context.Context) error

	// Reset runs before every measurement: leave the queue empty (TRUNCATE)
	// and the system ready for Enqueue and Start. A system that builds a
	// fresh client per measurement does it here.
	Reset(ctx context.Context) error

	// Enqueue inserts n no-op jobs the way a producer would, in as few round
	// trips as the system allows (it may split n into batches of its own).
	// It is called both before Start (burn-down prefill) and while the
	// workers started by Start are running (end-to-end).
	Enqueue(ctx context.Context, n int) error

	// Start starts the system's workers. They run until n jobs have been
	// completed (counting only jobs completed after Start), then Run.Wait
	// stops them.
	Start(ctx context.Context, n int) (Run, error)

	// Close releases pools and connections.
	Close() error
}

// Run is a running set of workers started by System.Start.
type Run interface {
	// Wait blocks until the n jobs given to Start have been completed, stops
	// the workers, and returns the moment the n-th job was completed. It
	// returns an error if a job failed, an ownership check lost a row, or ctx
	// ended first.
	Wait(ctx context.Context) (lastDone time.Time, err error)
}

// Mode is one kind of measurement.
type Mode string

const (
	ModeBurnDown Mode = "burn-down"
	ModeEndToEnd Mode = "end-to-end"
)

// Measurement is one measured period: how long it took and the CPU both
// sides spent in it.
type Measurement struct {
	// Elapsed runs from the start of the measured period to the n-th job
	// done.
	Elapsed time.Duration
	// CPU is read from the start of the period until the workers have
	// stopped (a little after the n-th job: stopping counts too).
	CPU CPU
}

// Measure resets sys and runs one measurement of mode over n jobs. batch is
// the enqueue batch size used by EndToEnd (ignored by BurnDown, where the
// system's own Enqueue batching applies).
func Measure(ctx context.Context, sys System, mode Mode, n, batch int) (Measurement, error) {
	if err := sys.Reset(ctx); err != nil {
		return Measurement{}, fmt.Errorf("%s: reset: %w", sys.Name(), err)
	}
	switch mode {
	case ModeBurnDown:
		return BurnDown(ctx, sys, n)
	case ModeEndToEnd:
		return EndToEnd(ctx, sys, n, batch)
	default:
		return Measurement{}, fmt.Errorf("unknown mode %q", mode)
	}
}

// WarmRate is sys's burn-down rate in jobs/s once warm: it burns down
// small jobs, then large, and returns the second run's rate. The first run
// on a cold system (new connections, empty caches, plans not yet made) ran
// at a tenth of the warm rate, and measurements sized from it took a
// fraction of a second, where start-up costs swamp the rate.
func WarmRate(ctx context.Context, sys System, small, large int) (float64, error) {
	var m Measurement
	for _, n := range []int{small, large} {
		var err error
		if m, err = Measure(ctx, sys, ModeBurnDown, n, 1_000); err != nil {
			return 0, err
		}
	}
	return float64(large) / m.Elapsed.Seconds(), nil
}

// BurnDown prefills n jobs (not timed), then times Start until the n-th job is
// done. The clock starts before Start, so a system's start-up cost counts.
func BurnDown(ctx context.Context, sys System, n int) (Measurement, error) {
	if err := sys.Enqueue(ctx, n); err != nil {
		return Measurement{}, fmt.Errorf("%s: prefill: %w", sys.Name(), err)
	}
	return Work(ctx, sys, n)
}

// Work times Start until the n-th job is done, on whatever the queue holds:
// BurnDown after its prefill, or a backlog the caller pushed its own way.
func Work(ctx context.Context, sys System, n int) (Measurement, error) {
	cpu := takeCPU()
	start := time.Now()
	run, err := sys.Start(ctx, n)
	if err != nil {
		return Measurement{}, fmt.Errorf("%s: start: %w", sys.Name(), err)
	}
	last, err := run.Wait(ctx)
	if err != nil {
		return Measurement{}, fmt.Errorf("%s: burn-down: %w", sys.Name(), err)
	}
	return Measurement{Elapsed: last.Sub(start), CPU: takeCPU().since(cpu)}, nil
}

// EndToEnd starts idle workers (not timed), then enqueues n jobs in batches
// of batch from this goroutine while the workers drain them, and times from
// the first enqueue until the n-th job is done.
func EndToEnd(ctx context.Context, sys System, n, batch int) (Measurement, error) {
	if batch < 1 {
		batch = 1
	}
	run, err := sys.Start(ctx, n)
	if err != nil {
		return Measurement{}, fmt.Errorf("%s: start: %w", sys.Name(), err)
	}
	cpu := takeCPU()
	start := time.Now()
	for left := n; left > 0; {
		k := min(batch, left)
		if err := sys.Enqueue(ctx, k); err != nil {
			// Still stop the workers; their error, if any, is secondary.
			_, _ = waitShort(ctx, run)
			return Measurement{}, fmt.Errorf("%s: enqueue: %w", sys.Name(), err)
		}
		left -= k
	}
	last, err := run.Wait(ctx)
	if err != nil {
		return Measurement{}, fmt.Errorf("%s: end-to-end: %w", sys.Name(), err)
	}
	return Measurement{Elapsed: last.Sub(start), CPU: takeCPU().since(cpu)}, nil
}

// waitShort stops a run whose jobs will never all arrive.
func waitShort(ctx context.Context, run Run) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return run.Wait(ctx)
}

// LoadAvg is the 1-minute load average, printed with every result to tell a
// quiet machine from a busy one ("?" where /proc is absent).
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}
