package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/failed"
)

// failedJSON is a failed job as --json prints it.
type failedJSON struct {
	ID         int64           `json:"id"`
	UUID       string          `json:"uuid"`
	Connection string          `json:"connection"`
	Queue      string          `json:"queue"`
	Name       string          `json:"name"`
	FailedAt   time.Time       `json:"failed_at"`
	Exception  string          `json:"exception"`
	Payload    json.RawMessage `json:"payload,omitempty"`
	// Errors, in show's output only: the errors of earlier attempts.
	Errors []errorJSON `json:"errors,omitempty"`
}

func failedToJSON(j failed.Job, full bool) failedJSON {
	out := failedJSON{ID: j.ID, UUID: j.UUID, Connection: j.Connection, Queue: j.Queue, Name: j.Name(),
		FailedAt: j.FailedAt.UTC(), Exception: j.Exception}
	if full {
		out.Payload = rawJSON(j.Payload)
		out.Errors = errorsJSON(j.Errors)
	} else {
		out.Exception = oneLine(j.Exception, 200)
	}
	return out
}

func (c *cli) failed(ctx context.Context, args []string) error {
	sub, args, err := subcommand("failed", args, "list", "show", "search", "retry", "forget", "flush", "prune")
	if err != nil {
		return err
	}
	fs := newFlagSet(c, "failed "+sub)
	var (
		asJSON = fs.Bool("json", false, "print JSON")
		queue  = fs.String("queue", "", "list, search: only this queue; retry: every failed job of this queue")
		limit  = fs.Int("limit", failed.DefaultLimit, "list, search: at most this many (1 to 1000)")
		before = fs.Int64("before", 0, "list, search: failed jobs before this id (the last id of the previous page or search)")
		all    = fs.Bool("all", false, "retry: every failed job of this connection")
		hours  = fs.Float64("hours", -1, "flush: only those older than this many hours (default: all); prune: failed over this many hours ago (default 24)")
	)
	search := searchFlags(fs, before)
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	name := "failed " + sub
	// Check the command line before connecting.
	switch sub {
	case "list", "flush", "prune", "search":
		if err := noArgs(name, rest); err != nil {
			return err
		}
	case "show", "forget":
		if _, err := oneArg(name, "failed job uuid", rest); err != nil {
			return err
		}
	case "retry":
		if isSet(fs, "queue") && strings.TrimSpace(*queue) == "" {
			return usagef("failed retry: -queue: empty queue name: name the queue whose failed jobs to retry, or use -all")
		}
		n := 0
		for _, set := range []bool{len(rest) > 0, *queue != "", *all} {
			if set {
				n++
			}
		}
		if n != 1 {
			return usagef("failed retry: name the jobs with one of: UUID..., -queue QUEUE, -all")
		}
	}
	if sub == "list" && (*limit < 1 || *limit > failed.MaxLimit) {
		return usagef("failed list: -limit %d: use 1 to %d (page with -before)", *limit, failed.MaxLimit)
	}
	var s dbqueue.Search
	if sub == "search" {
		if s, err = search.search(name, *queue, *limit); err != nil {
			return err
		}
	}
	q, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer q.Close()
	store, err := failed.New(q)
	if err != nil {
		return err
	}
	switch sub {
	case "search":
		res, err := store.Search(ctx, s)
		if err != nil {
			return err
		}
		if *asJSON {
			out := make([]failedJSON, len(res.Matches))
			for i, j := range res.Matches {
				out[i] = failedToJSON(j, false)
			}
			return c.writeJSON(searchJSON(out, res.Scanned, res.Oldest, res.Complete))
		}
		c.printFailed(res.Matches)
		c.searchNote("failed jobs", s, s.ID > 0 || s.UUID != "", res.Scanned, res.Oldest, res.Complete, len(res.Matches))
	case "list":
		list, err := store.List(ctx, failed.Filter{Queue: *queue, Limit: *limit, BeforeID: *before})
		if err != nil {
			return err
		}
		if *asJSON {
			out := make([]failedJSON, len(list))
			for i, j := range list {
				out[i] = failedToJSON(j, false)
			}
			return c.writeJSON(out)
		}
		c.printFailed(list)
		if len(list) == *limit {
			fmt.Fprintf(c.errOut, "more may follow: add -before %d\n", list[len(list)-1].ID)
		}
	case "show":
		j, err := store.Find(ctx, rest[0])
		if err != nil {
			return err
		}
		if *asJSON {
			return c.writeJSON(failedToJSON(j, true))
		}
		w := c.table()
		fmt.Fprintf(w, "id\t%d\nuuid\t%s\nconnection\t%s\nqueue\t%s\nname\t%s\nfailed at\t%s\n",
			j.ID, printable(j.UUID), printable(j.Connection), printable(j.Queue), printable(j.Name()), formatTime(j.FailedAt))
		w.Flush()
		fmt.Fprintf(c.out, "exception:\n%s\n", printableLines(j.Exception))
		c.printErrors(j.Errors)
		fmt.Fprintln(c.out, "payload:")
		return c.printPayload(j.Payload)
	case "retry":
		var p *progress
		var n int
		switch {
		case *all:
			p = c.progress("retrying every failed job of connection \"%s\"", printable(q.ConnectionName()))
			n, err = store.RetryAll(ctx)
		case *queue != "":
			p = c.progress("retrying the failed jobs of queue \"%s\"", printable(*queue))
			n, err = store.RetryQueue(ctx, *queue)
		default:
			p = c.progress("retrying %d failed jobs", len(rest))
			n, err = store.Retry(ctx, rest...)
		}
		if err != nil {
			p.fail()
			if n > 0 {
				return fmt.Errorf("%w (%d were retried before the error)", err, n)
			}
			return err
		}
		p.done("retried %d failed jobs", n)
	case "forget":
		ok, err := store.Forget(ctx, rest[0])
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("forget: %w: %q", failed.ErrNotFound, rest[0])
		}
		fmt.Fprintf(c.out, "forgot failed job %s\n", printable(rest[0]))
	case "flush":
		var p *progress
		var n int64
		if *hours <= 0 {
			p = c.progress("deleting every failed job")
			n, err = store.Flush(ctx, 0)
		} else {
			age := time.Duration(*hours * float64(time.Hour))
			p = c.progress("deleting failed jobs older than %s", age)
			n, err = store.Flush(ctx, age)
		}
		if err != nil {
			p.fail()
			return err
		}
		p.done("deleted %d failed jobs", n)
	case "prune":
		h := *hours
		if h < 0 {
			h = 24 // Laravel's queue:prune-failed
		}
		cutoff := time.Now().Add(-time.Duration(h * float64(time.Hour)))
		p := c.progress("deleting failed jobs that failed before %s", formatTime(cutoff))
		n, err := store.Prune(ctx, cutoff)
		if err != nil {
			p.fail()
			return err
		}
		p.done("deleted %d failed jobs", n)
		p = c.progress("deleting error history whose job is gone")
		var gone int64
		for {
			batch, err := q.PruneErrorHistory(ctx, historyPrune)
			if err != nil {
				p.fail()
				return err
			}
			gone += batch
			if batch < historyPrune {
				break
			}
		}
		p.done("deleted %d errors of jobs that are gone", gone)
	}
	return nil
}

// historyPrune is how many history rows one PruneErrorHistory statement of
// failed prune deletes.
const historyPrune = 1000

// printFailed prints failed jobs as a table.
func (c *cli) printFailed(list []failed.Job) {
	w := c.table()
	fmt.Fprintln(w, "ID\tUUID\tCONNECTION\tQUEUE\tNAME\tFAILED AT\tEXCEPTION")
	for _, j := range list {
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", j.ID, printable(j.UUID), printable(j.Connection), printable(j.Queue),
			printable(oneLine(j.Name(), 50)), formatTime(j.FailedAt), printable(oneLine(j.Exception, 60)))
	}
	w.Flush()
}

// isSet reports whether the command line set the flag name, even to "".
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
