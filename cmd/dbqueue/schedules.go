package main

import (
	"context"
	"fmt"
	"time"
)

// scheduleRow is a row of `dbqueue schedules`. A time no scheduler wrote
// (no next tick, nothing pushed yet) is null.
type scheduleRow struct {
	Name       string     `json:"name"`
	Spec       string     `json:"spec"`
	NextTick   *time.Time `json:"next_tick"`
	LastTick   *time.Time `json:"last_tick"`
	LastJobID  int64      `json:"last_job_id,omitempty"`
	LastQueue  string     `json:"last_queue,omitempty"`
	LastJob    string     `json:"last_job,omitempty"`
	LastPushed *time.Time `json:"last_pushed"`
	SeenAt     time.Time  `json:"seen_at"`
	SeenAgo    float64    `json:"seen_seconds_ago"`
	// Status is ok, late or unseen (dbqueue.ScheduleInfo.State).
	Status string `json:"status"`
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// schedules lists the periodic schedules the schedulers recorded.
func (c *cli) schedules(ctx context.Context, args []string) error {
	fs := newFlagSet(c, "schedules")
	asJSON := fs.Bool("json", false, "print JSON")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := noArgs("schedules", rest); err != nil {
		return err
	}
	q, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer q.Close()
	list, err := q.Schedules(ctx)
	if err != nil {
		return err
	}
	rows := make([]scheduleRow, len(list))
	for i, s := range list {
		rows[i] = scheduleRow{
			Name: s.Name, Spec: s.Spec, NextTick: optTime(s.NextTick), LastTick: optTime(s.LastTick),
			LastJobID: s.LastJobID, LastQueue: s.LastQueue, LastJob: s.LastJob, LastPushed: optTime(s.LastPushed),
			SeenAt: s.SeenAt.UTC(), SeenAgo: s.SeenAgo.Seconds(), Status: s.State(),
		}
	}
	if *asJSON {
		return c.writeJSON(rows)
	}
	if len(rows) == 0 {
		fmt.Fprintln(c.out, "no periodic schedules recorded (package periodic's schedulers write theirs when they start; migration 00013 made the table)")
		return nil
	}
	w := c.table()
	fmt.Fprintln(w, "NAME\tSPEC\tNEXT TICK\tLAST PUSHED TICK\tLAST JOB\tSEEN\tSTATUS")
	for i, r := range rows {
		last := "-"
		if r.LastJobID != 0 {
			last = fmt.Sprintf("%d %s on %s", r.LastJobID, oneLine(printable(r.LastJob), 40), oneLine(printable(r.LastQueue), 40))
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s ago\t%s\n", oneLine(printable(r.Name), 60), oneLine(printable(r.Spec), 40),
			formatTime(list[i].NextTick), formatTime(list[i].LastTick), last,
			time.Duration(r.SeenAgo*float64(time.Second)).Round(time.Second), r.Status)
	}
	return w.Flush()
}
