package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dbqueue/dbqueue"
)

// jobJSON is a job as --json prints it.
type jobJSON struct {
	ID           int64           `json:"id"`
	Queue        string          `json:"queue"`
	State        string          `json:"state"`
	Name         string          `json:"name"`
	Attempts     int             `json:"attempts"`
	ReservedAt   *time.Time      `json:"reserved_at"`
	AvailableAt  time.Time       `json:"available_at"`
	CreatedAt    time.Time       `json:"created_at"`
	Payload      json.RawMessage `json:"payload,omitempty"`
	PayloadError string          `json:"payload_error,omitempty"`
}

// jobDetailJSON is a job as show -json prints it: the listed fields, the
// payload, and the detail of one job.
type jobDetailJSON struct {
	jobJSON
	UUID      string      `json:"uuid"`
	Tries     *int        `json:"tries"`
	ExpiresAt *time.Time  `json:"expires_at"`
	Token     *int64      `json:"reservation_token"`
	BatchID   string      `json:"batch_id,omitempty"`
	ChainNext []string    `json:"chain_next"`
	Errors    []errorJSON `json:"errors"`
}

// errorJSON is an earlier attempt's error.
type errorJSON struct {
	Attempt int       `json:"attempt"`
	Error   string    `json:"error"`
	Worker  string    `json:"worker"`
	At      time.Time `json:"at"`
}

func errorsJSON(errs []dbqueue.AttemptError) []errorJSON {
	out := make([]errorJSON, len(errs))
	for i, e := range errs {
		out[i] = errorJSON{Attempt: e.Attempt, Error: e.Error, Worker: e.Worker, At: e.At.UTC()}
	}
	return out
}

// detailJSON is what jobs show -json prints.
func detailJSON(j dbqueue.JobInfo) jobDetailJSON {
	d := jobDetailJSON{jobJSON: toJSON(j, true), UUID: j.Payload.UUID, Tries: j.Payload.MaxTries, BatchID: j.Payload.BatchID,
		ChainNext: j.Payload.ChainNext(), Errors: errorsJSON(j.Errors)}
	if !j.ExpiresAt.IsZero() {
		t, token := j.ExpiresAt.UTC(), j.Token
		d.ExpiresAt, d.Token = &t, &token
	}
	return d
}

func toJSON(j dbqueue.JobInfo, payload bool) jobJSON {
	out := jobJSON{
		ID: j.ID, Queue: j.Queue, State: string(j.State), Name: j.Name(), Attempts: j.Attempts,
		AvailableAt: j.AvailableAt.UTC(), CreatedAt: j.CreatedAt.UTC(),
	}
	if !j.ReservedAt.IsZero() {
		t := j.ReservedAt.UTC()
		out.ReservedAt = &t
	}
	if payload {
		out.Payload = rawJSON(j.RawPayload)
	}
	if j.PayloadErr != nil {
		out.PayloadError = j.PayloadErr.Error()
	}
	return out
}

func (c *cli) jobs(ctx context.Context, args []string) error {
	sub, args, err := subcommand("jobs", args, "list", "show", "search", "cancel", "run-now")
	if err != nil {
		return err
	}
	fs := newFlagSet(c, "jobs "+sub)
	var (
		asJSON = fs.Bool("json", false, "print JSON")
		queue  = fs.String("queue", "", "list, search: only this queue")
		state  = fs.String("state", "", "list: only pending, delayed or reserved jobs")
		limit  = fs.Int("limit", 100, "list, search: at most this many jobs (1 to 1000)")
		after  = fs.Int64("after", 0, "list: jobs after this id (the last id of the previous page)")
		search = searchFlags(fs, nil)
	)
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if sub == "search" {
		if err := noArgs("jobs search", rest); err != nil {
			return err
		}
		s, err := search.search("jobs search", *queue, *limit)
		if err != nil {
			return err
		}
		q, err := c.open(ctx)
		if err != nil {
			return err
		}
		defer q.Close()
		res, err := q.SearchJobs(ctx, s)
		if err != nil {
			return err
		}
		if *asJSON {
			list := make([]jobJSON, len(res.Matches))
			for i, j := range res.Matches {
				list[i] = toJSON(j, false)
			}
			return c.writeJSON(searchJSON(list, res.Scanned, res.Oldest, res.Complete))
		}
		c.printJobs(res.Matches)
		c.searchNote("jobs", s, s.ID > 0, res.Scanned, res.Oldest, res.Complete, len(res.Matches))
		return nil
	}
	if sub == "list" {
		if err := noArgs("jobs list", rest); err != nil {
			return err
		}
		switch dbqueue.JobState(*state) {
		case "", dbqueue.JobPending, dbqueue.JobDelayed, dbqueue.JobReserved:
		default:
			return usagef("jobs list: -state %q: use pending, delayed or reserved", *state)
		}
		if *limit < 1 || *limit > 1000 {
			return usagef("jobs list: -limit %d: use 1 to 1000 (page with -after)", *limit)
		}
		q, err := c.open(ctx)
		if err != nil {
			return err
		}
		defer q.Close()
		page, err := q.Jobs(ctx, dbqueue.JobFilter{Queue: *queue, State: dbqueue.JobState(*state), AfterID: *after, Limit: *limit})
		if err != nil {
			return err
		}
		if *asJSON {
			list := make([]jobJSON, len(page))
			for i, j := range page {
				list[i] = toJSON(j, false)
			}
			return c.writeJSON(list)
		}
		c.printJobs(page)
		if len(page) == *limit {
			fmt.Fprintf(c.errOut, "more may follow: add -after %d\n", page[len(page)-1].ID)
		}
		return nil
	}
	arg, err := oneArg("jobs "+sub, "job id", rest)
	if err != nil {
		return err
	}
	id, err := strconv.ParseInt(arg, 10, 64)
	if err != nil || id <= 0 {
		return usagef("jobs %s: %q is not a job id", sub, arg)
	}
	q, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer q.Close()
	switch sub {
	case "show":
		j, err := q.Job(ctx, id)
		if err != nil {
			return err
		}
		if *asJSON {
			return c.writeJSON(detailJSON(*j))
		}
		w := c.table()
		fmt.Fprintf(w, "id\t%d\nqueue\t%s\nstate\t%s\nname\t%s\nattempts\t%d of %s\n",
			j.ID, printable(j.Queue), printable(string(j.State)), printable(j.Name()), j.Attempts, tries(j.Payload.MaxTries))
		fmt.Fprintf(w, "uuid\t%s\nreserved at\t%s\navailable at\t%s\ncreated at\t%s\n",
			printable(j.Payload.UUID), formatTime(j.ReservedAt), formatTime(j.AvailableAt), formatTime(j.CreatedAt))
		if j.State == dbqueue.JobReserved {
			fmt.Fprintf(w, "held by\treservation %d (attempt %d) until %s; another worker may take it after that\n",
				j.Token, j.Attempts, formatTime(j.ExpiresAt))
		}
		if j.Payload.BatchID != "" {
			fmt.Fprintf(w, "batch\t%s\n", printable(j.Payload.BatchID))
		}
		if next := j.Payload.ChainNext(); len(next) > 0 {
			fmt.Fprintf(w, "chain\t%d more after this: %s\n", len(next), printable(oneLine(strings.Join(next, ", "), 200)))
		}
		if j.PayloadErr != nil {
			fmt.Fprintf(w, "payload error\t%s\n", printable(j.PayloadErr.Error()))
		}
		w.Flush()
		c.printErrors(j.Errors)
		fmt.Fprintln(c.out, "payload:")
		return c.printPayload(j.RawPayload)
	case "cancel":
		if err := q.Cancel(ctx, id); err != nil {
			return err
		}
		fmt.Fprintf(c.out, "cancelled job %d\n", id)
	case "run-now":
		if err := q.RunNow(ctx, id); err != nil {
			return err
		}
		fmt.Fprintf(c.out, "job %d is due now\n", id)
	}
	return nil
}

// printJobs prints a page of jobs as a table.
func (c *cli) printJobs(page []dbqueue.JobInfo) {
	w := c.table()
	fmt.Fprintln(w, "ID\tQUEUE\tSTATE\tNAME\tATTEMPTS\tAVAILABLE\tCREATED")
	for _, j := range page {
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%d\t%s\t%s\n", j.ID, printable(j.Queue), printable(string(j.State)), printable(oneLine(j.Name(), 60)), j.Attempts,
			formatTime(j.AvailableAt), formatTime(j.CreatedAt))
	}
	w.Flush()
}

// tries is a payload's maxTries as show prints it.
func tries(n *int) string {
	if n == nil || *n <= 0 {
		return "the worker's tries"
	}
	return strconv.Itoa(*n)
}

// printErrors prints the errors of a job's earlier attempts, oldest first.
func (c *cli) printErrors(errs []dbqueue.AttemptError) {
	if len(errs) == 0 {
		fmt.Fprintln(c.out, "earlier errors: none kept")
		return
	}
	fmt.Fprintf(c.out, "earlier errors (oldest first, the newest %d kept):\n", dbqueue.ErrorHistoryKeep)
	for _, e := range errs {
		fmt.Fprintf(c.out, "  attempt %d at %s on %s:\n    %s\n", e.Attempt, formatTime(e.At), printable(e.Worker),
			strings.ReplaceAll(printableLines(e.Error), "\n", "\n    "))
	}
}

// printPayload prints a stored payload indented when it is JSON, through
// jsonSafe (a terminal control in it becomes a JSON \u escape, so it stays
// JSON that reads as Laravel wrote it), and through printableLines when it
// is not JSON.
func (c *cli) printPayload(raw []byte) error {
	var b bytes.Buffer
	if json.Indent(&b, raw, "", "  ") != nil {
		_, err := fmt.Fprintf(c.out, "%s\n", printableLines(string(raw)))
		return err
	}
	_, err := fmt.Fprintf(c.out, "%s\n", jsonSafe(b.Bytes()))
	return err
}
