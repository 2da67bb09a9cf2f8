package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dbqueue/dbqueue"
)

// queueList is a repeatable -queue flag.
type queueList []string

func (l *queueList) String() string { return strings.Join(*l, ",") }
func (l *queueList) Set(s string) error {
	for _, q := range strings.Split(s, ",") {
		if q = strings.TrimSpace(q); q != "" {
			*l = append(*l, q)
		}
	}
	return nil
}

// queueSize is a queue's row in queues and monitor.
type queueSize struct {
	Queue         string  `json:"queue"`
	Pending       int64   `json:"pending"`
	Delayed       int64   `json:"delayed"`
	Reserved      int64   `json:"reserved"`
	OldestPending float64 `json:"oldest_pending_seconds"`
	Paused        bool    `json:"paused"`
	// Processed, Failed and FailureRate are monitor's with
	// -max-failure-rate: the queue's jobs that ended in the last -window,
	// from the metrics workers record.
	Processed   *int64   `json:"processed,omitempty"`
	Failed      *int64   `json:"failed,omitempty"`
	FailureRate *float64 `json:"failure_rate,omitempty"`
	// Status is monitor's: OK, or ALERT when a check is over its limit.
	Status string `json:"status,omitempty"`
}

// queueNames are the queues to report: those named with -queue, or else
// every queue that has jobs, and the default queue.
func (c *cli) queueNames(ctx context.Context, q *dbqueue.Queue, named []string) ([]string, error) {
	if len(named) > 0 {
		return slices.Compact(slices.Sorted(slices.Values(named))), nil
	}
	names, err := c.distinctQueues(ctx, q)
	if err != nil {
		return nil, err
	}
	names = append(names, q.DefaultQueue())
	return slices.Compact(slices.Sorted(slices.Values(names))), nil
}

// distinctQueues reads the names of the queues that have jobs.
func (c *cli) distinctQueues(ctx context.Context, q *dbqueue.Queue) ([]string, error) {
	return q.Queues(ctx)
}

// sizes measures each queue.
func sizes(ctx context.Context, q *dbqueue.Queue, names []string) ([]queueSize, error) {
	out := make([]queueSize, 0, len(names))
	for _, name := range names {
		s, err := q.Size(ctx, name)
		if err != nil {
			return nil, err
		}
		paused, err := q.Paused(ctx, name)
		if err != nil {
			return nil, err
		}
		out = append(out, queueSize{
			Queue: name, Pending: s.Pending, Delayed: s.Delayed, Reserved: s.Reserved,
			OldestPending: s.OldestPending.Seconds(), Paused: paused,
		})
	}
	return out, nil
}

func (c *cli) printSizes(list []queueSize, status bool) {
	w := c.table()
	fmt.Fprint(w, "QUEUE\tPENDING\tDELAYED\tRESERVED\tOLDEST PENDING\tPAUSED")
	if status {
		fmt.Fprint(w, "\tSTATUS")
	}
	fmt.Fprintln(w)
	for _, s := range list {
		paused := "no"
		if s.Paused {
			paused = "yes"
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%s\t%s", printable(s.Queue), s.Pending, s.Delayed, s.Reserved,
			formatAge(time.Duration(s.OldestPending*float64(time.Second))), paused)
		if status {
			fmt.Fprintf(w, "\t%s", s.Status)
		}
		fmt.Fprintln(w)
	}
	w.Flush()
}

func (c *cli) queues(ctx context.Context, args []string) error {
	fs := newFlagSet(c, "queues")
	var named queueList
	fs.Var(&named, "queue", "a queue to report (repeat, or comma-separate; default: every queue with jobs)")
	asJSON := fs.Bool("json", false, "print JSON")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := noArgs("queues", rest); err != nil {
		return err
	}
	q, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer q.Close()
	names, err := c.queueNames(ctx, q, named)
	if err != nil {
		return err
	}
	list, err := sizes(ctx, q, names)
	if err != nil {
		return err
	}
	if *asJSON {
		return c.writeJSON(list)
	}
	c.printSizes(list, false)
	return nil
}

// monitorReport is monitor's JSON.
type monitorReport struct {
	Time time.Time `json:"time"`
	// The limits given: Max pending jobs, MaxAge of the oldest pending
	// job (seconds), MaxFailureRate over Window (seconds).
	Max            *int64         `json:"max,omitempty"`
	MaxAge         *float64       `json:"max_age_seconds,omitempty"`
	MaxFailureRate *float64       `json:"max_failure_rate,omitempty"`
	Window         *float64       `json:"window_seconds,omitempty"`
	Alert          bool           `json:"alert"`
	Queues         []queueSize    `json:"queues"`
	Checks         []monitorCheck `json:"checks"`
}

// monitorCheck is one threshold checked on one queue: with -json-lines,
// each is printed as a line of its own, for log shippers.
type monitorCheck struct {
	Time  time.Time `json:"time"`
	Queue string    `json:"queue"`
	// Check is "pending", "age" (seconds) or "failure_rate".
	Check  string  `json:"check"`
	Value  float64 `json:"value"`
	Limit  float64 `json:"limit"`
	Status string  `json:"status"`
}

// monitorLimits are monitor's thresholds; a negative one is not checked.
type monitorLimits struct {
	pending     int64
	age         time.Duration
	failureRate float64
	window      time.Duration
}

func (c *cli) monitor(ctx context.Context, args []string) error {
	fs := newFlagSet(c, "monitor")
	var named queueList
	fs.Var(&named, "queue", "a queue to watch (repeat, or comma-separate; default: every queue with jobs)")
	asJSON := fs.Bool("json", false, "print JSON (one object per line with -watch)")
	jsonLines := fs.Bool("json-lines", false, "print one JSON line per check (queue and threshold), for log shippers")
	var lim monitorLimits
	fs.Int64Var(&lim.pending, "max", -1, "alert, and exit 3, when a queue has more than this many pending jobs (default: no limit)")
	fs.DurationVar(&lim.age, "max-age", -1, "alert, and exit 3, when a queue's oldest pending job has been due longer than this (e.g. 5m; default: no limit)")
	fs.Float64Var(&lim.failureRate, "max-failure-rate", -1, "alert, and exit 3, when more than this share (0 to 1) of a queue's jobs that ended in the last -window failed, from the metrics workers record (default: no limit)")
	fs.DurationVar(&lim.window, "window", 5*time.Minute, "how far back -max-failure-rate looks")
	watch := fs.Bool("watch", false, "print again every -every until interrupted")
	every := fs.Duration("every", 5*time.Second, "how often -watch prints")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := noArgs("monitor", rest); err != nil {
		return err
	}
	if *every <= 0 {
		return usagef("monitor: -every must be positive")
	}
	if *asJSON && *jsonLines {
		return usagef("monitor: -json and -json-lines: choose one")
	}
	if lim.failureRate > 1 {
		return usagef("monitor: -max-failure-rate %v: give a share from 0 to 1 (0.1 is 10%%)", lim.failureRate)
	}
	if lim.window < time.Minute {
		return usagef("monitor: -window %v: must be at least a minute (metrics are kept by the minute)", lim.window)
	}
	q, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer q.Close()
	var last error
	for round := 0; ; round++ {
		if round > 0 {
			select {
			case <-ctx.Done():
				return last // interrupted: the last round's verdict
			case <-time.After(*every):
			}
		}
		r, err := c.monitorRound(ctx, q, named, lim)
		if err != nil {
			if *watch && ctx.Err() != nil {
				return last
			}
			return err
		}
		last = nil
		if r.Alert {
			last = errThreshold
		}
		switch {
		case *jsonLines:
			for _, ch := range r.Checks {
				if err = c.encodeJSON(ch, ""); err != nil {
					break
				}
			}
		case *asJSON && *watch:
			err = c.encodeJSON(r, "") // one line a round
		case *asJSON:
			err = c.writeJSON(r)
		default:
			if *watch {
				fmt.Fprintf(c.out, "%s\n", r.Time.Local().Format("2006-01-02 15:04:05"))
			}
			c.printMonitor(r)
			if *watch {
				fmt.Fprintln(c.out)
			}
		}
		if err != nil {
			return err
		}
		for _, ch := range r.Checks {
			if ch.Status == "ALERT" {
				fmt.Fprintf(c.errOut, "dbqueue: monitor: queue %s: %s\n", printable(ch.Queue), ch.describe())
			}
		}
		if !*watch {
			return last
		}
	}
}

// describe says what an alerting check found.
func (ch monitorCheck) describe() string {
	switch ch.Check {
	case "pending":
		return fmt.Sprintf("%d pending jobs, more than -max %d", int64(ch.Value), int64(ch.Limit))
	case "age":
		return fmt.Sprintf("oldest pending job due for %v, longer than -max-age %v", secs(ch.Value), secs(ch.Limit))
	}
	return fmt.Sprintf("failure rate %.3f, over -max-failure-rate %g", ch.Value, ch.Limit)
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)).Round(time.Second) }

// monitorRound measures every queue and checks the limits.
func (c *cli) monitorRound(ctx context.Context, q *dbqueue.Queue, named []string, lim monitorLimits) (monitorReport, error) {
	r := monitorReport{Time: time.Now().UTC().Truncate(time.Second), Checks: []monitorCheck{}}
	names, err := c.queueNames(ctx, q, named)
	if err != nil {
		return r, err
	}
	var rates map[string]dbqueue.MetricsPoint
	if lim.failureRate >= 0 {
		m, err := q.Metrics(ctx, dbqueue.MetricsQuery{Window: lim.window})
		if err != nil {
			return r, err
		}
		rates = map[string]dbqueue.MetricsPoint{}
		for _, g := range m.Groups {
			p := rates[g.Queue]
			p.Processed += g.Processed
			p.Failed += g.Failed
			rates[g.Queue] = p
			if len(named) == 0 {
				names = append(names, g.Queue) // failures may have emptied it
			}
		}
		names = slices.Compact(slices.Sorted(slices.Values(names)))
	}
	if r.Queues, err = sizes(ctx, q, names); err != nil {
		return r, err
	}
	check := func(s *queueSize, kind string, value, limit float64) {
		ch := monitorCheck{Time: r.Time, Queue: s.Queue, Check: kind, Value: value, Limit: limit, Status: "OK"}
		if value > limit {
			ch.Status, s.Status, r.Alert = "ALERT", "ALERT", true
		}
		r.Checks = append(r.Checks, ch)
	}
	if lim.pending >= 0 {
		r.Max = &lim.pending
	}
	if lim.age >= 0 {
		a := lim.age.Seconds()
		r.MaxAge = &a
	}
	if lim.failureRate >= 0 {
		w := lim.window.Seconds()
		r.MaxFailureRate, r.Window = &lim.failureRate, &w
	}
	for i := range r.Queues {
		s := &r.Queues[i]
		s.Status = "OK"
		if r.Max != nil {
			check(s, "pending", float64(s.Pending), float64(*r.Max))
		}
		if r.MaxAge != nil {
			check(s, "age", s.OldestPending, *r.MaxAge)
		}
		if rates != nil {
			p := rates[s.Queue]
			rate := p.FailureRate()
			s.Processed, s.Failed, s.FailureRate = &p.Processed, &p.Failed, &rate
			check(s, "failure_rate", rate, lim.failureRate)
		}
	}
	return r, nil
}

// printMonitor prints monitor's table: the sizes, the failure rates when
// checked, and each queue's status.
func (c *cli) printMonitor(r monitorReport) {
	if r.MaxFailureRate == nil {
		c.printSizes(r.Queues, true)
		return
	}
	w := c.table()
	fmt.Fprintln(w, "QUEUE\tPENDING\tDELAYED\tRESERVED\tOLDEST PENDING\tPAUSED\tFAILED/ENDED\tFAILURE RATE\tSTATUS")
	for _, s := range r.Queues {
		paused := "no"
		if s.Paused {
			paused = "yes"
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%s\t%s\t%d/%d\t%.3f\t%s\n", printable(s.Queue), s.Pending, s.Delayed, s.Reserved,
			formatAge(time.Duration(s.OldestPending*float64(time.Second))), paused, *s.Failed, *s.Failed+*s.Processed, *s.FailureRate, s.Status)
	}
	w.Flush()
}
