package periodic

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// cronSchedule is a parsed cron expression. Its ticks are searched for on
// the wall clock of its zone and then placed on real instants by the rule
// in the package documentation, so that a daylight-saving change neither
// doubles nor drops a fixed-time job.
type cronSchedule struct {
	expr string
	// wall matches wall-clock times: the expression's fields, searched in
	// UTC, where no wall time is skipped or repeated.
	wall cron.SpecSchedule
	loc  *time.Location
	// realTime: the hour field is a wildcard (*, */2, @hourly), so the
	// schedule runs at every real instant whose wall time matches, as
	// Vixie cron runs such jobs: both 01:30s of an autumn change, none in
	// a spring gap.
	realTime bool
}

// horizon is how far ahead of the time given a tick may be: robfig/cron
// searches five years of wall-clock times, and anything later (or the zero
// time it returns when nothing matches) means the schedule has no tick.
const horizon = 10 * 366 * 24 * time.Hour

// maxCandidates bounds the wall-clock matches one Next looks at, so that no
// expression, however odd, makes it spin.
const maxCandidates = 4096

func newCron(expr string) (Schedule, error) {
	if strings.Contains(expr, "@every") {
		return nil, fmt.Errorf("periodic: Cron(%q): @every counts from each process's start, so processes would not agree on ticks: use periodic.Every", expr)
	}
	parsed, err := parseStandard(expr)
	if err != nil {
		return nil, fmt.Errorf("periodic: Cron(%q): %w", expr, err)
	}
	spec, ok := parsed.(*cron.SpecSchedule)
	if !ok {
		return nil, fmt.Errorf("periodic: Cron(%q): not a cron expression", expr)
	}
	c := &cronSchedule{expr: expr, wall: *spec, loc: spec.Location, realTime: wildcardHour(expr)}
	if c.loc == time.Local { // no CRON_TZ: UTC, whatever the process's zone
		c.loc = time.UTC
	}
	c.wall.Location = time.UTC
	// A schedule that never fires (February 30th) is refused now, not
	// found out at run time.
	if from := time.Now(); c.Next(from).IsZero() {
		return nil, fmt.Errorf("periodic: Cron(%q): the expression never matches a date (such as February 30th): fix the day and month fields", expr)
	}
	return c, nil
}

// wildcardHour reports whether expr, parsed already, writes its hour
// field with a leading * (*, */2) or is @hourly: Vixie cron's test for a
// job that follows real time across a daylight-saving change.
func wildcardHour(expr string) bool {
	f := strings.Fields(expr)
	if len(f) > 0 && (strings.HasPrefix(f[0], "TZ=") || strings.HasPrefix(f[0], "CRON_TZ=")) {
		f = f[1:]
	}
	switch len(f) {
	case 1:
		return f[0] == "@hourly"
	case 5:
		return strings.HasPrefix(f[1], "*") || strings.HasPrefix(f[1], "?")
	}
	return false
}

// parseStandard is cron.ParseStandard made safe: robfig/cron v3.0.1
// panics on some malformed expressions ("TZ=" without fields).
func parseStandard(expr string) (s cron.Schedule, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("malformed expression (%v): write five fields, optionally after CRON_TZ=Zone/Name and a space", r)
		}
	}()
	return cron.ParseStandard(expr)
}

func (c *cronSchedule) String() string { return c.expr }

// Next is the first tick strictly after t, or the zero time if there is
// none within the horizon.
func (c *cronSchedule) Next(t time.Time) time.Time {
	t = t.In(c.loc)
	naive := naiveOf(t)
	// A real-time schedule's tick may have a wall time earlier than t's,
	// when t is in the first pass of an hour that is about to repeat;
	// otherwise the next tick's wall time is after t's.
	from := naive.Add(-c.repeatBefore(t))
	var best time.Time
	w := c.wall.Next(from)
	for n := 0; n < maxCandidates && !w.IsZero(); n++ {
		instants, first := c.instants(w)
		if !best.IsZero() && first.After(best) {
			break // later wall times only give later instants
		}
		for _, i := range instants {
			if i.After(t) && (best.IsZero() || i.Before(best)) {
				best = i
			}
		}
		w = c.wall.Next(w)
	}
	if best.IsZero() || best.Sub(t) > horizon {
		return time.Time{}
	}
	return best.UTC()
}

// repeatBefore is how far the wall clock will be turned back at the end
// of t's zone, if that is within two days and the schedule follows real
// time; else 0. Until then, wall times up to that much before t's come
// again, after t.
func (c *cronSchedule) repeatBefore(t time.Time) time.Duration {
	if !c.realTime {
		return 0
	}
	_, end := t.ZoneBounds()
	if end.IsZero() || end.Sub(t) > 48*time.Hour {
		return 0
	}
	_, before := t.Zone()
	_, after := end.Zone()
	if before <= after {
		return 0
	}
	return time.Duration(before-after)*time.Second + time.Minute
}

// instants places wall-clock time w (its fields, in UTC) on real instants
// in c's zone: the first when it occurs twice (a real-time schedule gets
// both), and for a time skipped by a change, the change itself (none for a
// real-time schedule). first is the earliest instant w could mean, for the
// search to know when to stop.
func (c *cronSchedule) instants(w time.Time) (instants []time.Time, first time.Time) {
	guess := time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), 0, c.loc)
	var valid []time.Time
	seen := map[int64]bool{}
	try := func(offset int) {
		u := w.Unix() - int64(offset)
		if seen[u] {
			return
		}
		seen[u] = true
		if i := time.Unix(u, 0).In(c.loc); naiveOf(i).Equal(w) {
			valid = append(valid, i)
		}
	}
	_, off := guess.Zone()
	try(off)
	start, end := guess.ZoneBounds()
	if !start.IsZero() {
		_, prev := start.Add(-time.Second).Zone()
		try(prev)
	}
	if !end.IsZero() {
		_, next := end.Zone()
		try(next)
	}
	if len(valid) == 0 {
		// Skipped: the change that skipped it is the first instant after
		// the gap, where the wall clock is already past w.
		change := end
		if naiveOf(guess).After(w) || end.IsZero() {
			change = start
		}
		if c.realTime {
			return nil, change
		}
		return []time.Time{change}, change
	}
	first = valid[0]
	for _, v := range valid[1:] {
		if v.Before(first) {
			first = v
		}
	}
	if c.realTime {
		return valid, first
	}
	return []time.Time{first}, first
}

// naiveOf is t's wall clock as a UTC time.
func naiveOf(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), 0, time.UTC)
}
