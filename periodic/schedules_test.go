package periodic_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/internal/queueside"
	"github.com/dbqueue/dbqueue/periodic"
)

// events is a slog handler that hands every record's message and job to
// a channel: the scheduler's log is the event a test waits on.
type events struct {
	ch   chan string
	name string // which scheduler
}

func (e events) Enabled(context.Context, slog.Level) bool { return true }
func (e events) Handle(_ context.Context, r slog.Record) error {
	e.ch <- e.name + ": " + r.Message
	return nil
}
func (e events) WithAttrs([]slog.Attr) slog.Handler { return e }
func (e events) WithGroup(string) slog.Handler      { return e }

// startData is what a RunAtStart job carries: the instant it is for.
type startData struct {
	At int64 `json:"at"`
}

// warmJob is a schedule whose next tick is months away at most once a
// year, run at start.
func warmJob(name string) periodic.Job {
	return periodic.Job{
		Name:       name,
		Schedule:   periodic.MustCron("0 0 1 1 *"),
		RunAtStart: true,
		New: func(tick time.Time) dbqueue.NewJob {
			return dbqueue.NewJob{Name: "warm-cache", Queue: "maintenance", Data: startData{At: tick.Unix()}}
		},
	}
}

// newScheduler makes a scheduler on its own queue; start runs it until
// the test ends.
func newScheduler(t *testing.T, db *dbtest.DB, log *slog.Logger, jobs ...periodic.Job) (start func()) {
	t.Helper()
	s, err := periodic.New(db.Queue(t), jobs, periodic.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { stop(); <-done })
	return func() {
		go func() {
			defer close(done)
			_ = s.Run(ctx)
		}()
	}
}

// runScheduler runs a scheduler on its own queue until the test ends.
func runScheduler(t *testing.T, db *dbtest.DB, log *slog.Logger, jobs ...periodic.Job) {
	t.Helper()
	newScheduler(t, db, log, jobs...)()
}

// waitEvents waits for one message per scheduler named, each the push at
// start or another's, and returns them.
func waitEvents(t *testing.T, ch chan string, names ...string) map[string]string {
	t.Helper()
	got := map[string]string{}
	deadline := time.After(30 * time.Second)
	for len(got) < len(names) {
		select {
		case m := <-ch:
			name, msg, _ := strings.Cut(m, ": ")
			if strings.Contains(msg, "at start") {
				got[name] = msg
			}
		case <-deadline:
			t.Fatalf("start pushes seen: %v, want one of each of %v", got, names)
		}
	}
	return got
}

// Two schedulers that start at once push a RunAtStart job once; one
// that starts later, before the schedule's next tick, pushes nothing;
// one that starts after that period pushes it again. The schedules table
// records the push.
func TestRunAtStartOnceAcrossProcesses(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		ch := make(chan string, 100)
		a := newScheduler(t, db, slog.New(events{ch, "a"}), warmJob("warm"))
		b := newScheduler(t, db, slog.New(events{ch, "b"}), warmJob("warm"))
		go a()
		go b()
		got := waitEvents(t, ch, "a", "b")
		pushed := 0
		for _, msg := range got {
			if msg == "periodic: pushed at start" {
				pushed++
			}
		}
		if pushed != 1 {
			t.Fatalf("start events %v: %d pushed, want exactly 1", got, pushed)
		}
		jobs := db.IDs(t, "SELECT id FROM jobs WHERE queue = 'maintenance'")
		if len(jobs) != 1 {
			t.Fatalf("%d jobs pushed at start by two schedulers, want 1", len(jobs))
		}

		// A third, started later in the same period: nothing.
		runScheduler(t, db, slog.New(events{ch, "c"}), warmJob("warm"))
		if got := waitEvents(t, ch, "c"); got["c"] != "periodic: the push at start was made by another scheduler" {
			t.Errorf("a later start: %q, want no push", got["c"])
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE queue = 'maintenance'"); n != 1 {
			t.Errorf("%d jobs after a later start, want still 1", n)
		}

		q := db.Queue(t)
		list, err := q.Schedules(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 1 || list[0].Name != "warm" || list[0].Spec != "0 0 1 1 *" || list[0].LastJobID != jobs[0] ||
			list[0].LastQueue != "maintenance" || list[0].LastJob != "warm-cache" || list[0].LastTick.IsZero() ||
			!list[0].NextTick.After(list[0].LastTick) || list[0].NextTick.Month() != time.January || list[0].NextTick.UTC().Day() != 1 {
			t.Fatalf("schedules: %+v", list)
		}

		// The next period (the start lock expired): a start pushes again.
		db.Exec(t, "UPDATE dbqueue_unique SET expires_at = 1 WHERE until_mode = 2")
		runScheduler(t, db, slog.New(events{ch, "d"}), warmJob("warm"))
		if got := waitEvents(t, ch, "d"); got["d"] != "periodic: pushed at start" {
			t.Errorf("a start in the next period: %q, want a push", got["d"])
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE queue = 'maintenance'"); n != 2 {
			t.Errorf("%d jobs after a start in the next period, want 2", n)
		}
	})
}

// The schedules table lists every schedule a scheduler keeps, from its
// start, with the tick the process that took it recorded; a late record
// of an older tick changes nothing; a name of any length and bytes has
// its row.
func TestSchedulesRecorded(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("ü", 400) + "\x1b[2J"
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		ctx := context.Background()
		quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
		runScheduler(t, db, quiet, periodic.Job{
			Name: "tick", Schedule: periodic.Every(time.Second),
			New: func(tick time.Time) dbqueue.NewJob { return dbqueue.NewJob{Name: "tick", Data: tick.Unix()} },
		}, periodic.Job{
			Name: long, Schedule: periodic.MustCron("0 3 * * *"),
			New: func(time.Time) dbqueue.NewJob { return dbqueue.NewJob{Name: "report"} },
		})
		q := db.Queue(t)
		var list []dbqueue.ScheduleInfo
		if !dbtest.Until(20*time.Second, func() bool {
			var err error
			if list, err = q.Schedules(ctx); err != nil {
				t.Fatal(err)
			}
			return len(list) == 2 && (!list[0].LastTick.IsZero() || !list[1].LastTick.IsZero())
		}) {
			t.Fatalf("schedules: %+v, want the tick's pushed", list)
		}
		report, tick := list[0], list[1] // by name, in the database's collation
		if report.Name != long {
			report, tick = tick, report
		}
		if report.Name != long || report.Spec != "0 3 * * *" || !report.LastTick.IsZero() || report.LastJobID != 0 ||
			report.NextTick.UTC().Hour() != 3 || report.SeenAgo > time.Minute {
			t.Errorf("the daily schedule: %+v", report)
		}
		if tick.Spec != "every 1s" || tick.LastQueue != "default" || tick.LastJob != "tick" || tick.NextTick.Sub(tick.LastTick) != time.Second {
			t.Errorf("the 1s schedule: %+v", tick)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE id = ?", tick.LastJobID); n != 1 {
			t.Errorf("the recorded job %d is not in jobs", tick.LastJobID)
		}

		// A record of an older tick, as from a process that pushed it and
		// stalled, keeps the newer one.
		type recorder interface {
			RecordScheduleTick(context.Context, dbqueue.ScheduleInfo) error
		}
		old := tick
		old.LastTick, old.LastJobID, old.NextTick = tick.LastTick.Add(-time.Hour), 999999, tick.LastTick.Add(-time.Hour+time.Second)
		if err := queueside.Of(q).RecordScheduleTick(ctx, old); err != nil {
			t.Fatal(err)
		}
		list, err := q.Schedules(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range list {
			if s.Name == "tick" && (s.LastTick.Before(tick.LastTick) || s.LastJobID == 999999) {
				t.Errorf("an older tick's record replaced the newer: %+v", s)
			}
		}
	})
}

// A process on a schema without the schedules table (migrate up not run
// yet) pushes its ticks all the same, and says once what to do.
func TestSchedulesTableMissing(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		db.Exec(t, "DROP TABLE jobs_schedules")
		var log lockedBuffer
		runScheduler(t, db, slog.New(slog.NewTextHandler(&log, nil)), periodic.Job{
			Name: "tick", Schedule: periodic.Every(time.Second), RunAtStart: true,
			New: func(tick time.Time) dbqueue.NewJob { return dbqueue.NewJob{Name: "tick", Data: tick.Unix()} },
		})
		// The push at start and two ticks.
		if !dbtest.Until(20*time.Second, func() bool { return db.Count(t, "SELECT COUNT(*) FROM jobs") >= 3 }) {
			t.Fatalf("%d jobs pushed without the schedules table, want 3; log:\n%s", db.Count(t, "SELECT COUNT(*) FROM jobs"), log.String())
		}
		if n := strings.Count(log.String(), "cannot write the schedules table"); n != 1 {
			t.Errorf("the missing table logged %d times, want once:\n%s", n, log.String())
		}
		if !strings.Contains(log.String(), "migrate up") {
			t.Errorf("the log does not say to migrate:\n%s", log.String())
		}
	})
}
