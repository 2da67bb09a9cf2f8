package periodic_test

import (
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue/periodic"
)

// ticksFrom lists a schedule's ticks strictly after from, up to and
// including until, the way a scheduler steps through them (each tick from
// the one before).
func ticksFrom(t *testing.T, s periodic.Schedule, from, until time.Time) []time.Time {
	t.Helper()
	var out []time.Time
	for tick := s.Next(from); !tick.After(until); tick = s.Next(tick) {
		if tick.IsZero() {
			t.Fatalf("%s: no tick after %v", s, out)
		}
		out = append(out, tick)
		if len(out) > 1000 {
			t.Fatalf("%s: more than 1000 ticks", s)
		}
	}
	return out
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func sameTicks(t *testing.T, expr string, got []time.Time, want ...string) {
	t.Helper()
	var g []string
	for _, tick := range got {
		g = append(g, tick.UTC().Format(time.RFC3339))
	}
	if strings.Join(g, " ") != strings.Join(want, " ") {
		t.Errorf("%s ticks\n got  %v\n want %v", expr, g, want)
	}
}

// A user in New York schedules a job at 01:30 every night. On the night
// the clocks go back, 01:30 happens twice; the job runs once, at the first
// (EDT). On the spring night 02:30 does not happen; a job at 02:30 runs
// once, at 03:00 EDT, the first instant after the gap, and the night after
// at 02:30 again.
func TestCronDaylightSavingNewYork(t *testing.T) {
	autumn := "CRON_TZ=America/New_York 30 1 * * *"
	sameTicks(t, autumn, ticksFrom(t, periodic.MustCron(autumn), utc("2026-10-31T00:00:00Z"), utc("2026-11-03T00:00:00Z")),
		"2026-10-31T05:30:00Z", // 01:30 EDT
		"2026-11-01T05:30:00Z", // 01:30 EDT, the first of the two
		"2026-11-02T06:30:00Z", // 01:30 EST
	)
	spring := "CRON_TZ=America/New_York 30 2 * * *"
	sameTicks(t, spring, ticksFrom(t, periodic.MustCron(spring), utc("2026-03-07T00:00:00Z"), utc("2026-03-10T00:00:00Z")),
		"2026-03-07T07:30:00Z", // 02:30 EST
		"2026-03-08T07:00:00Z", // 03:00 EDT: 02:30 was skipped
		"2026-03-09T06:30:00Z", // 02:30 EDT
	)
	// Two times in the gap both land on its end: one run, not two.
	gap := "CRON_TZ=America/New_York 15,45 2 * * *"
	sameTicks(t, gap, ticksFrom(t, periodic.MustCron(gap), utc("2026-03-08T05:00:00Z"), utc("2026-03-08T12:00:00Z")),
		"2026-03-08T07:00:00Z",
	)
	// A scheduler that reads the clock during the second 01:xx hour does
	// not run the 01:30 job again.
	second := utc("2026-11-01T06:10:00Z") // 01:10 EST
	if got := periodic.MustCron(autumn).Next(second); !got.Equal(utc("2026-11-02T06:30:00Z")) {
		t.Errorf("%s after 01:10 EST on the autumn change: %v, want the next night", autumn, got)
	}
}

// A wildcard hour follows real time, as Vixie cron runs such jobs: every
// real hour, so both 01:00s in autumn, and no extra run in spring.
func TestCronDaylightSavingWildcardHour(t *testing.T) {
	hourly := "CRON_TZ=America/New_York 0 * * * *"
	sameTicks(t, hourly, ticksFrom(t, periodic.MustCron(hourly), utc("2026-11-01T03:30:00Z"), utc("2026-11-01T08:00:00Z")),
		"2026-11-01T04:00:00Z", // 00:00 EDT
		"2026-11-01T05:00:00Z", // 01:00 EDT
		"2026-11-01T06:00:00Z", // 01:00 EST
		"2026-11-01T07:00:00Z", // 02:00 EST
		"2026-11-01T08:00:00Z",
	)
	sameTicks(t, hourly, ticksFrom(t, periodic.MustCron(hourly), utc("2026-03-08T04:30:00Z"), utc("2026-03-08T08:00:00Z")),
		"2026-03-08T05:00:00Z", // 00:00 EST
		"2026-03-08T06:00:00Z", // 01:00 EST
		"2026-03-08T07:00:00Z", // 03:00 EDT
		"2026-03-08T08:00:00Z",
	)
	// Every two hours, by the wall clock's even hours: 02:00 does not exist
	// on the spring day, and the next run is 04:00 EDT, not 03:00.
	two := "CRON_TZ=America/New_York 0 */2 * * *"
	sameTicks(t, two, ticksFrom(t, periodic.MustCron(two), utc("2026-03-08T04:30:00Z"), utc("2026-03-08T09:00:00Z")),
		"2026-03-08T05:00:00Z", // 00:00 EST
		"2026-03-08T08:00:00Z", // 04:00 EDT
	)
	quarter := "CRON_TZ=America/New_York */30 * * * *"
	sameTicks(t, quarter, ticksFrom(t, periodic.MustCron(quarter), utc("2026-11-01T05:50:00Z"), utc("2026-11-01T07:00:00Z")),
		"2026-11-01T06:00:00Z", // 01:00 EST, after 01:30 EDT
		"2026-11-01T06:30:00Z",
		"2026-11-01T07:00:00Z",
	)
}

// Sydney changes the other way round the year: clocks go back at 03:00 on
// the first Sunday of April (02:30 twice) and forward at 02:00 on the first
// Sunday of October (no 02:30).
func TestCronDaylightSavingSydney(t *testing.T) {
	expr := "CRON_TZ=Australia/Sydney 30 2 * * *"
	s := periodic.MustCron(expr)
	sameTicks(t, expr, ticksFrom(t, s, utc("2026-04-03T12:00:00Z"), utc("2026-04-06T12:00:00Z")),
		"2026-04-03T15:30:00Z", // 02:30 AEDT, April 4th
		"2026-04-04T15:30:00Z", // 02:30 AEDT, the first of the two on April 5th
		"2026-04-05T16:30:00Z", // 02:30 AEST
	)
	sameTicks(t, expr, ticksFrom(t, s, utc("2026-10-02T12:00:00Z"), utc("2026-10-05T12:00:00Z")),
		"2026-10-02T16:30:00Z", // 02:30 AEST, October 3rd
		"2026-10-03T16:00:00Z", // 03:00 AEDT: 02:30 was skipped on October 4th
		"2026-10-04T15:30:00Z", // 02:30 AEDT
	)
}

// Someone writes a date that never comes: February 30th. The schedule is
// refused when it is made, with the expression in the error.
func TestCronRefusesExpressionThatNeverFires(t *testing.T) {
	for _, expr := range []string{"0 0 30 2 *", "0 0 31 4 *", "CRON_TZ=Europe/Berlin 0 12 31 11 *"} {
		_, err := periodic.Cron(expr)
		if err == nil || !strings.Contains(err.Error(), expr) || !strings.Contains(err.Error(), "never") {
			t.Errorf("Cron(%q): %v, want an error naming it and saying it never fires", expr, err)
		}
	}
	// robfig/cron panics on this one; Cron must not.
	if _, err := periodic.Cron("TZ="); err == nil {
		t.Error(`Cron("TZ=") accepted`)
	}
	// February 29th is rare, not impossible.
	if _, err := periodic.Cron("0 0 29 2 *"); err != nil {
		t.Errorf("Cron(February 29th): %v", err)
	}
}
