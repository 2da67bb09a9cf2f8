package dashboard

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/failed"
)

// maxSearches is how many searches the dashboard runs at once; a request
// beyond it is refused with 429 Too Many Requests rather than queued, so
// a reloading page or a script cannot pile reads of large payloads onto
// the database.
const maxSearches = 2

// searchData is the search page's.
type searchData struct {
	// In is "jobs" or "failed"; the rest are the form's fields.
	In                           string
	ID, UUID, Name, Queue, Text  string
	Asked                        bool // the form was sent
	Jobs                         []dbqueue.JobInfo
	Failed                       []failed.Job
	Scanned                      int
	Oldest                       int64
	Complete, Direct, LimitReach bool
	// Older is the URL of the rows below what this page read: below its
	// last match when it stopped at searchLimit, so paging skips none;
	// "" when it read down to the table's oldest row.
	Older string
}

// searchLimit is the most matches one search page shows.
const searchLimit = 100

// searchPage finds jobs or failed jobs: it reads the newest
// dbqueue.DefaultSearchScan rows of the table at most (the URL cannot ask
// for more), with the library's time bound, and says how far it read.
func (d *Dashboard) searchPage(w http.ResponseWriter, r *http.Request) {
	query := r.URL.Query()
	data := searchData{In: query.Get("in"), ID: query.Get("id"), UUID: query.Get("uuid"), Name: query.Get("name"),
		Queue: query.Get("queue"), Text: query.Get("text")}
	if data.In == "" {
		data.In = "jobs"
	}
	if data.In != "jobs" && data.In != "failed" {
		d.fail(w, r, http.StatusBadRequest, fmt.Errorf("in=%q: search jobs or failed", data.In))
		return
	}
	s := dbqueue.Search{UUID: data.UUID, Name: data.Name, Queue: data.Queue, Text: data.Text, Scan: dbqueue.DefaultSearchScan, Limit: searchLimit}
	for _, p := range []struct {
		key  string
		into *int64
	}{{"id", &s.ID}, {"before", &s.BeforeID}} {
		if v := query.Get(p.key); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				d.fail(w, r, http.StatusBadRequest, fmt.Errorf("%s=%q: want a job id", p.key, v))
				return
			}
			*p.into = n
		}
	}
	data.Asked = s.ID > 0 || s.UUID != "" || s.Name != "" || s.Queue != "" || s.Text != ""
	if data.Asked {
		select {
		case d.searches <- struct{}{}:
			defer func() { <-d.searches }()
		default:
			d.fail(w, r, http.StatusTooManyRequests, errors.New("other searches are running: try again in a moment"))
			return
		}
		if err := d.search(r.Context(), s, &data); err != nil {
			d.fail(w, r, http.StatusInternalServerError, err)
			return
		}
		if !data.Complete {
			older := r.URL.Query()
			older.Del("flash")
			older.Set("before", strconv.FormatInt(data.Oldest, 10))
			data.Older = "search?" + older.Encode()
		}
	}
	d.render(w, r, http.StatusOK, "search", d.view(w, r, "Search", "search", data))
}

// search runs s on the table data.In names, redacting what it shows.
func (d *Dashboard) search(ctx context.Context, s dbqueue.Search, data *searchData) error {
	text := []byte(s.Text)
	if data.In == "failed" {
		res, err := d.failed.Search(ctx, s)
		if err != nil {
			return err
		}
		for _, j := range res.Matches {
			d.redactFailed(&j)
			if len(text) == 0 || bytes.Contains(j.Payload, text) || bytes.Contains([]byte(j.Exception), text) {
				data.Failed = append(data.Failed, j)
			}
		}
		data.Scanned, data.Oldest, data.Complete = res.Scanned, res.Oldest, res.Complete
		data.LimitReach = len(res.Matches) == s.Limit
	} else {
		res, err := d.q.SearchJobs(ctx, s)
		if err != nil {
			return err
		}
		for _, j := range res.Matches {
			d.redactJob(&j)
			if len(text) == 0 || bytes.Contains(j.RawPayload, text) {
				data.Jobs = append(data.Jobs, j)
			}
		}
		data.Scanned, data.Oldest, data.Complete = res.Scanned, res.Oldest, res.Complete
		data.LimitReach = len(res.Matches) == s.Limit
	}
	data.Direct = s.ID > 0 || data.In == "failed" && s.UUID != ""
	return nil
}

// redactJob passes a job's payload through Options.Redact.
func (d *Dashboard) redactJob(j *dbqueue.JobInfo) {
	if d.opts.Redact == nil {
		return
	}
	j.RawPayload = d.opts.Redact(j.Name(), j.RawPayload)
	j.Payload, j.PayloadErr = dbqueue.DecodePayload(j.RawPayload)
}

// redactFailed passes a failed job's payload through Options.Redact.
func (d *Dashboard) redactFailed(j *failed.Job) {
	if d.opts.Redact == nil {
		return
	}
	j.Payload = d.opts.Redact(j.Name(), j.Payload)
}
