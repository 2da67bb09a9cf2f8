package main

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// workerRow is a row of `dbqueue workers`.
type workerRow struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	Host        string    `json:"host"`
	PID         int64     `json:"pid"`
	Version     string    `json:"version"`
	Queues      []string  `json:"queues"`
	Concurrency int64     `json:"concurrency"`
	Running     int64     `json:"running"`
	Processed   int64     `json:"processed"`
	Started     time.Time `json:"started"`
	LastSeen    time.Time `json:"last_seen"`
	SeenAgo     float64   `json:"seen_seconds_ago"`
}

// workers lists the workers' heartbeat rows.
func (c *cli) workers(ctx context.Context, args []string) error {
	fs := newFlagSet(c, "workers")
	asJSON := fs.Bool("json", false, "print JSON")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := noArgs("workers", rest); err != nil {
		return err
	}
	q, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer q.Close()
	ws, err := q.Workers(ctx)
	if err != nil {
		return err
	}
	list := make([]workerRow, len(ws))
	for i, w := range ws {
		list[i] = workerRow{
			ID: w.ID, Name: w.Name, Host: w.Host, PID: w.PID, Version: w.Version, Queues: w.Queues,
			Concurrency: w.Concurrency, Running: w.Running, Processed: w.Processed,
			Started: w.Started.UTC(), LastSeen: w.LastSeen.UTC(), SeenAgo: w.SeenAgo.Seconds(),
		}
		if list[i].Queues == nil {
			list[i].Queues = []string{}
		}
	}
	if *asJSON {
		return c.writeJSON(list)
	}
	if len(list) == 0 {
		fmt.Fprintln(c.out, "no workers running (workers write a heartbeat every worker.Options.MetricsInterval; a negative one turns it off)")
		return nil
	}
	t := c.table()
	fmt.Fprintln(t, "NAME\tHOST\tPID\tQUEUES\tRUNNING\tCONCURRENCY\tPROCESSED\tSTARTED\tLAST SEEN\tVERSION")
	for _, w := range list {
		queues := make([]string, len(w.Queues))
		for i, name := range w.Queues {
			queues[i] = printable(name)
		}
		fmt.Fprintf(t, "%s\t%s\t%d\t%s\t%d\t%d\t%d\t%s\t%s ago\t%s\n", printable(w.Name), printable(w.Host), w.PID,
			oneLine(strings.Join(queues, ","), 60), w.Running, w.Concurrency, w.Processed, formatTime(w.Started),
			time.Duration(w.SeenAgo*float64(time.Second)).Round(time.Second), printable(w.Version))
	}
	return t.Flush()
}
