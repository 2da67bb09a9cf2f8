package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dbqueue/dbqueue"
)

// statsRow is one queue and kind's line of `dbqueue stats`, or the total.
type statsRow struct {
	Queue     string `json:"queue,omitempty"`
	Kind      string `json:"kind,omitempty"`
	Processed int64  `json:"processed"`
	Failed    int64  `json:"failed"`
	Released  int64  `json:"released"`
	// PerMinute is the jobs that finished (processed, failed or
	// released) per minute: the window's count over its length.
	PerMinute float64 `json:"per_minute"`
	// FailureRate is failed over processed plus failed (0 when none
	// ended for good).
	FailureRate float64 `json:"failure_rate"`
	// The percentiles, in seconds, estimated from the recorded
	// histograms (see statsAccuracy); 0 when no job finished.
	RuntimeP50 float64 `json:"runtime_p50_seconds"`
	RuntimeP95 float64 `json:"runtime_p95_seconds"`
	WaitP50    float64 `json:"wait_p50_seconds"`
	WaitP95    float64 `json:"wait_p95_seconds"`
}

// statsReport is `dbqueue stats -json`.
type statsReport struct {
	// Since and Until are the range read: whole minutes, or whole hours
	// for a window longer than a day.
	Since  time.Time  `json:"since"`
	Until  time.Time  `json:"until"`
	Window float64    `json:"window_seconds"`
	Groups []statsRow `json:"groups"`
	Total  statsRow   `json:"total"`
}

// statsAccuracy is what the help text and the table's footnote say of the
// percentiles.
const statsAccuracy = "percentiles are estimates from the workers' histograms, whose buckets are a factor of two apart (250µs to about 17.5 minutes): read them as right within that factor; waits count whole seconds of the database clock"

// parseWindow reads -window: a Go duration (90m, 24h) or a number of
// days (7d), at least a minute.
func parseWindow(s string) (time.Duration, error) {
	var d time.Duration
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil {
			return 0, usagef("stats: -window %q: give a duration such as 1h, 24h or 7d", s)
		}
		d = time.Duration(days) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, usagef("stats: -window %q: give a duration such as 1h, 24h or 7d", s)
		}
	}
	if d < time.Minute {
		return 0, usagef("stats: -window %s: must be at least a minute (metrics are kept by the minute)", s)
	}
	// Beyond this the hourly read would pass MaxMetricsPoints; workers keep
	// a week by default (worker.Options.MetricsRetention).
	if d > time.Duration(dbqueue.MaxMetricsPoints-2)*time.Hour {
		return 0, usagef("stats: -window %s: at most %dd", s, (dbqueue.MaxMetricsPoints-2)/24)
	}
	return d, nil
}

// statsQuery is the metrics read of a window: minute by minute up to a
// day (1,441 points at most), by the hour beyond, from the hourly table.
func statsQuery(window time.Duration, queue, kind string) dbqueue.MetricsQuery {
	mq := dbqueue.MetricsQuery{Window: window, Queue: queue, Kind: kind, Step: time.Minute}
	if window > 24*time.Hour {
		mq.Step = time.Hour
	}
	return mq
}

func newStatsRow(queue, kind string, p dbqueue.MetricsPoint, window time.Duration) statsRow {
	return statsRow{
		Queue: queue, Kind: kind, Processed: p.Processed, Failed: p.Failed, Released: p.Released,
		PerMinute:   float64(p.Finished()) / window.Minutes(),
		FailureRate: p.FailureRate(),
		RuntimeP50:  p.RuntimeP50.Seconds(), RuntimeP95: p.RuntimeP95.Seconds(),
		WaitP50: p.WaitP50.Seconds(), WaitP95: p.WaitP95.Seconds(),
	}
}

// stats prints what workers recorded per queue and kind over a window.
func (c *cli) stats(ctx context.Context, args []string) error {
	fs := newFlagSet(c, "stats")
	windowFlag := fs.String("window", "1h", "how far back to read: 1h, 24h, 7d or any duration of a minute or more")
	queue := fs.String("queue", "", "one queue to report (default: all)")
	kind := fs.String("kind", "", "one job kind (handler name) to report (default: all)")
	asJSON := fs.Bool("json", false, "print JSON")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := noArgs("stats", rest); err != nil {
		return err
	}
	window, err := parseWindow(*windowFlag)
	if err != nil {
		return err
	}
	q, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer q.Close()
	m, err := q.Metrics(ctx, statsQuery(window, *queue, *kind))
	if err != nil {
		return err
	}
	r := statsReport{Since: m.Since.UTC(), Until: m.Until.UTC(), Window: window.Seconds(), Groups: []statsRow{},
		Total: newStatsRow("", "", m.Total, window)}
	for _, g := range m.Groups {
		r.Groups = append(r.Groups, newStatsRow(g.Queue, g.Kind, g.MetricsPoint, window))
	}
	if *asJSON {
		return c.writeJSON(r)
	}
	if len(r.Groups) == 0 {
		fmt.Fprintf(c.out, "no jobs finished from %s to %s (Go workers record them each minute, unless worker.Options.MetricsInterval is negative; PHP workers do not)\n",
			formatTime(r.Since), formatTime(r.Until))
		return nil
	}
	w := c.table()
	fmt.Fprintln(w, "QUEUE\tKIND\tPROCESSED\tFAILED\tRELEASED\tPER MIN\tFAILED %\tRUNTIME P50\tRUNTIME P95\tWAIT P50\tWAIT P95")
	row := func(s statsRow, queue, kind string) {
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", queue, kind, s.Processed, s.Failed, s.Released,
			strconv.FormatFloat(s.PerMinute, 'f', 2, 64), percent(s), statDuration(s.RuntimeP50, s), statDuration(s.RuntimeP95, s),
			statDuration(s.WaitP50, s), statDuration(s.WaitP95, s))
	}
	for _, g := range r.Groups {
		row(g, printable(g.Queue), printable(g.Kind))
	}
	if len(r.Groups) > 1 {
		row(r.Total, "(all)", "")
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(c.out, "\nfrom %s to %s; per min is jobs finished (processed, failed or released) per minute over %s;\n%s\n",
		formatTime(r.Since), formatTime(r.Until), *windowFlag, statsAccuracy)
	return nil
}

func percent(s statsRow) string {
	if s.Processed+s.Failed == 0 {
		return "-"
	}
	return strconv.FormatFloat(100*s.FailureRate, 'f', 1, 64)
}

// statDuration prints a percentile: 3 significant digits, "-" when no job
// finished.
func statDuration(seconds float64, s statsRow) string {
	if s.Processed+s.Failed+s.Released == 0 {
		return "-"
	}
	d := time.Duration(seconds * float64(time.Second))
	switch {
	case d >= time.Minute:
		return d.Round(time.Second).String()
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	}
	return d.Round(time.Microsecond).String()
}
