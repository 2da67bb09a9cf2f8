package main

import (
	"context"
	"fmt"
)

// limitRow is a row of `dbqueue limits`.
type limitRow struct {
	Limit   string `json:"limit"`
	PerKey  int    `json:"per_key"`
	Total   int    `json:"total"` // 0: no cap over the keys
	Running int64  `json:"running"`
	Waiting int64  `json:"waiting"`
	Keys    int64  `json:"keys"`
}

// limits lists the concurrency limits declared on the jobs table, with
// their jobs running and waiting.
func (c *cli) limits(ctx context.Context, args []string) error {
	fs := newFlagSet(c, "limits")
	asJSON := fs.Bool("json", false, "print JSON")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := noArgs("limits", rest); err != nil {
		return err
	}
	q, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer q.Close()
	list, err := q.Limits(ctx)
	if err != nil {
		return err
	}
	rows := make([]limitRow, len(list))
	for i, l := range list {
		rows[i] = limitRow{Limit: l.Limit, PerKey: l.PerKey, Total: l.Total, Running: l.Running, Waiting: l.Waiting, Keys: l.Keys}
	}
	if *asJSON {
		return c.writeJSON(rows)
	}
	if len(rows) == 0 {
		fmt.Fprintln(c.out, "no concurrency limits declared (a push with a Concurrency declares its limit; migration 00014 made the table)")
		return nil
	}
	w := c.table()
	fmt.Fprintln(w, "LIMIT\tPER KEY\tTOTAL\tRUNNING\tWAITING\tKEYS")
	for _, r := range rows {
		total := "-"
		if r.Total > 0 {
			total = fmt.Sprint(r.Total)
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%d\t%d\t%d\n", oneLine(printable(r.Limit), 60), r.PerKey, total, r.Running, r.Waiting, r.Keys)
	}
	return w.Flush()
}
