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
	// Status is monitor's: OK, or ALERT over -max.
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
	Time   time.Time   `json:"time"`
	Max    *int64      `json:"max,omitempty"`
	Alert  bool        `json:"alert"`
	Queues []queueSize `json:"queues"`
}

func (c *cli) monitor(ctx context.Context, args []string) error {
	fs := newFlagSet(c, "monitor")
	var named queueList
	fs.Var(&named, "queue", "a queue to watch (repeat, or comma-separate; default: every queue with jobs)")
	asJSON := fs.Bool("json", false, "print JSON (one object per line with -watch)")
	maxPending := fs.Int64("max", -1, "alert, and exit 3, when a queue has more than this many pending jobs (default: no limit)")
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
		r := monitorReport{Time: time.Now().UTC().Truncate(time.Second)}
		if *maxPending >= 0 {
			r.Max = maxPending
		}
		names, err := c.queueNames(ctx, q, named)
		if err == nil {
			r.Queues, err = sizes(ctx, q, names)
		}
		if err != nil {
			if *watch && ctx.Err() != nil {
				return last
			}
			return err
		}
		for i := range r.Queues {
			r.Queues[i].Status = "OK"
			if r.Max != nil && r.Queues[i].Pending > *r.Max {
				r.Queues[i].Status = "ALERT"
				r.Alert = true
			}
		}
		last = nil
		if r.Alert {
			last = errThreshold
		}
		switch {
		case *asJSON && *watch:
			err = c.encodeJSON(r, "") // one line a round
		case *asJSON:
			err = c.writeJSON(r)
		default:
			if *watch {
				fmt.Fprintf(c.out, "%s\n", r.Time.Local().Format("2006-01-02 15:04:05"))
			}
			c.printSizes(r.Queues, true)
			if *watch {
				fmt.Fprintln(c.out)
			}
		}
		if err != nil {
			return err
		}
		if r.Alert {
			fmt.Fprintf(c.errOut, "dbqueue: monitor: a queue has more than %d pending jobs\n", *r.Max)
		}
		if !*watch {
			return last
		}
	}
}
