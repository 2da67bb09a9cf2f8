package periodic

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/dbqueue/dbqueue"
)

// The scheduler steps from tick to tick with following, from the
// database's clock in Unix seconds: across New York's autumn change a
// daily 01:30 comes once, and a wildcard hour comes every real hour.
func TestFollowingAcrossDaylightSaving(t *testing.T) {
	steps := func(expr string, from time.Time, n int) []string {
		s := MustCron(expr)
		var out []string
		u := from.Unix()
		for range n {
			next, ok := following(s, u)
			if !ok {
				t.Fatalf("%s: no tick after %v", expr, time.Unix(u, 0).UTC())
			}
			out = append(out, time.Unix(next, 0).UTC().Format("01-02T15:04"))
			u = next
		}
		return out
	}
	from := time.Date(2026, 10, 31, 12, 0, 0, 0, time.UTC)
	if got, want := steps("CRON_TZ=America/New_York 30 1 * * *", from, 3), []string{"11-01T05:30", "11-02T06:30", "11-03T06:30"}; !slices.Equal(got, want) {
		t.Errorf("daily 01:30: %v, want %v", got, want)
	}
	from = time.Date(2026, 11, 1, 4, 30, 0, 0, time.UTC)
	if got, want := steps("CRON_TZ=America/New_York 0 * * * *", from, 3), []string{"11-01T05:00", "11-01T06:00", "11-01T07:00"}; !slices.Equal(got, want) {
		t.Errorf("hourly: %v, want %v", got, want)
	}
}

// fakePusher counts pushes; the clock is the test's.
type fakePusher struct{ pushes []int64 }

func (f *fakePusher) PushScheduledTick(_ context.Context, _ dbqueue.NewJob, _, _ string, tick, _, _ int64) (int64, bool, error) {
	f.pushes = append(f.pushes, tick)
	return int64(len(f.pushes)), true, nil
}
func (f *fakePusher) PushScheduleStart(context.Context, dbqueue.NewJob, string, int64, int64) (int64, bool, error) {
	return 0, false, nil
}
func (f *fakePusher) SeeSchedules(context.Context, []dbqueue.ScheduleInfo) error     { return nil }
func (f *fakePusher) RecordScheduleTick(context.Context, dbqueue.ScheduleInfo) error { return nil }
func (f *fakePusher) PruneSchedules(context.Context, int64, int) (int64, error)      { return 0, nil }
func (f *fakePusher) PruneTickLocks(context.Context, int64, int) (int64, error)      { return 0, nil }
func (f *fakePusher) DBNow(context.Context) (int64, error)                           { return 0, nil }

// A scheduler decades behind its schedule (a tick from 1970, now in 2026)
// does one bounded pass: it pushes no tick that old, and at most
// MaxCatchUp+1 ticks, and returns promptly with its next tick after now.
func TestPushDueFarBehindIsBounded(t *testing.T) {
	now := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC).Unix()
	for _, tick := range []int64{1, now - 3600*24*3, now - 30} {
		f := &fakePusher{}
		s := &Scheduler{pusher: f, catch: 10, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		j := Job{Name: "x", Schedule: Every(time.Second), New: func(time.Time) dbqueue.NewJob { return dbqueue.NewJob{Name: "x"} }}
		start := time.Now()
		next, ok := s.pushDue(context.Background(), j, tick, now)
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("from %d: one pass took %v", tick, d)
		}
		if !ok || next <= now {
			t.Errorf("from %d: next %d, ok %v; want a tick after now (%d)", tick, next, ok, now)
		}
		if len(f.pushes) > s.catch+1 {
			t.Errorf("from %d: %d pushes in one pass, want at most %d", tick, len(f.pushes), s.catch+1)
		}
		for _, p := range f.pushes {
			if now-p > s.window(p, p+1) {
				t.Errorf("from %d: pushed tick %d, %ds late, past its window", tick, p, now-p)
			}
		}
	}
}

// Away from daylight-saving changes (UTC, Asia/Tokyo) the ticks are
// exactly robfig/cron's, for three thousand steps of each expression.
func TestCronMatchesRobfigWithoutDaylightSaving(t *testing.T) {
	for _, e := range []string{
		"* * * * *", "*/7 3-5 * * 1-5", "0 0 29 2 *", "15 14 1 * *", "5 4 * * sun", "0 0,12 1 */2 *",
		"CRON_TZ=Asia/Tokyo 30 1 * * *", "@daily", "@weekly", "@monthly", "@yearly", "0 0 31 * *", "0 0 1,15 * 3",
	} {
		want, err := cron.ParseStandard(e)
		if err != nil {
			t.Fatal(err)
		}
		got := MustCron(e)
		a := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		b := a
		for i := range 3000 {
			a, b = want.Next(a).UTC(), got.Next(b)
			if !a.Equal(b) {
				t.Fatalf("%s, step %d: %v, robfig/cron says %v", e, i, b, a)
			}
		}
	}
}
