package dashboard

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"maps"
	"mime"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/failed"
)

//go:embed templates static
var files embed.FS

// pages are the page templates, each with the layout.
var pages = func() map[string]*template.Template {
	funcs := template.FuncMap{
		"age":       age,
		"when":      when,
		"firstLine": firstLine,
		"pretty":    pretty,
		"ago":       ago,
		"count":     count,
		"countOf":   func(n int64, capped bool) countArg { return countArg{n, capped} },
		"add":       func(a, b int) int { return a + b },
		// The bounds the job and search pages state.
		"historyKeep": func() int { return dbqueue.ErrorHistoryKeep },
		"searchScan":  func() int { return dbqueue.DefaultSearchScan },
		"searchLimit": func() int { return searchLimit },
	}
	layout := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(files, "templates/layout.html", "templates/history.html"))
	out := map[string]*template.Template{}
	for _, name := range []string{"queues", "jobs", "job", "failed", "failed-job", "search", "metrics", "workers", "error"} {
		out[name] = template.Must(template.Must(layout.Clone()).ParseFS(files, "templates/"+name+".html"))
	}
	return out
}()

// view is what the layout needs, and the page's own data.
type view struct {
	Title    string
	Active   string // the nav entry to highlight
	ReadOnly bool
	CSRF     string
	Flash    string
	// Back is this page's relative URL, for the back field of its forms.
	Back       string
	IntervalMS int64
	Data       any
}

// view is a page's view; it takes the line an action left for the page.
func (d *Dashboard) view(w http.ResponseWriter, r *http.Request, title, active string, data any) view {
	back := strings.TrimPrefix(r.URL.Path, "/")
	if back == "" {
		back = "./"
	}
	q := r.URL.Query()
	q.Del("flash")
	if len(q) > 0 {
		back += "?" + q.Encode()
	}
	now := time.Now()
	return view{
		Title: title, Active: active, ReadOnly: d.opts.ReadOnly, CSRF: d.token(now),
		Flash: d.takeFlash(w, r, now), Back: back, IntervalMS: d.opts.Interval.Milliseconds(), Data: data,
	}
}

// render writes a page, or an error page if the template fails.
func (d *Dashboard) render(w http.ResponseWriter, r *http.Request, status int, name string, v view) {
	var buf bytes.Buffer
	if err := pages[name].ExecuteTemplate(&buf, "layout.html", v); err != nil {
		slog.ErrorContext(r.Context(), "dbqueue dashboard: render page", "page", name, "err", err)
		http.Error(w, "dbqueue dashboard: render page "+name+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; script-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// fail answers an error: JSON for api/ requests, a page otherwise.
func (d *Dashboard) fail(w http.ResponseWriter, r *http.Request, status int, err error) {
	if status >= 500 {
		slog.ErrorContext(r.Context(), "dbqueue dashboard", "path", r.URL.Path, "err", err)
	}
	if strings.HasPrefix(strings.TrimPrefix(r.URL.Path, "/"), "api/") {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
		return
	}
	v := view{Title: http.StatusText(status), ReadOnly: d.opts.ReadOnly, IntervalMS: d.opts.Interval.Milliseconds(),
		Data: struct {
			Status  int
			Message string
		}{status, err.Error()}}
	d.render(w, r, status, "error", v)
}

// queuesData is the queues page's, and api/stats's.
type queuesData struct {
	// Time is when the page's counts were read, in Unix milliseconds;
	// AgeMS how old they were when served. Pending is set when a newer
	// sample was being taken and the page did not wait for it.
	Time     int64  `json:"time"`
	AgeMS    int64  `json:"age_ms"`
	Pending  bool   `json:"sample_pending,omitempty"`
	CSRF     string `json:"csrf"`
	ReadOnly bool   `json:"read_only"`
	// Queues are one page of the queues, by name: those after After.
	Queues []QueueStats `json:"queues"`
	// Count is how many queues this page lists (the queues are not
	// counted in all: that would read every queue's name); Next the name
	// to page on from ("" on the last page).
	Count int    `json:"count"`
	After string `json:"after,omitempty"`
	Next  string `json:"next,omitempty"`
	// Cap is where each count of this page's queues stops (see
	// QueueStats); TotalsCap and FailedWindow are the totals' bounds.
	Cap          int64   `json:"cap"`
	TotalsCap    int64   `json:"totals_cap"`
	FailedWindow int64   `json:"failed_window"`
	Totals       Point   `json:"totals"`
	History      []Point `json:"history"`
	// Throughput is the recorded chart the page shows (not in the JSON).
	Throughput chart `json:"-"`
}

// Age is how old the counts are, in words.
func (q queuesData) Age() string { return ago(time.Duration(q.AgeMS) * time.Millisecond) }

func (d *Dashboard) queuesData(r *http.Request) (queuesData, error) {
	after := r.URL.Query().Get("after")
	snap, err := d.stats.latest(r.Context(), after)
	if err != nil {
		return queuesData{}, err
	}
	return queuesData{
		Time: snap.page.at.UnixMilli(), AgeMS: time.Since(snap.page.at).Milliseconds(), Pending: snap.pending,
		CSRF: d.token(time.Now()), ReadOnly: d.opts.ReadOnly,
		Queues: snap.page.queues, Count: len(snap.page.queues), After: after, Next: snap.page.next,
		Cap: snap.page.cap, TotalsCap: d.stats.totalsCap, FailedWindow: int64(d.stats.failedWindow), Totals: snap.totals.point, History: snap.hist,
	}, nil
}

// queuesPageSize is how many queues a page of the queues page lists.
const queuesPageSize = 100

func (d *Dashboard) queuesPage(w http.ResponseWriter, r *http.Request) {
	data, err := d.queuesData(r)
	if err != nil {
		d.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	data.Throughput = d.recentThroughput(r.Context())
	d.render(w, r, http.StatusOK, "queues", d.view(w, r, "Queues", "queues", data))
}

// statsJSON is what an open page polls: the counts, the history and a
// fresh token for the forms it draws.
func (d *Dashboard) statsJSON(w http.ResponseWriter, r *http.Request) {
	data, err := d.queuesData(r)
	if err != nil {
		d.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(data)
}

// maxQueueOptions bounds the queue filter's drop-down: with more queues
// the filter is a text field.
const maxQueueOptions = 200

// queueNames lists the queues for the filters of the jobs and failed
// pages: the named queues and a bounded scan of the queue index (a list
// page does not wait for the counts); nil when there are more than
// maxQueueOptions.
func (d *Dashboard) queueNames(r *http.Request) []string {
	found, err := d.q.QueuesAfter(r.Context(), "", maxQueueOptions+1)
	if err != nil || len(found) > maxQueueOptions {
		return nil
	}
	set := map[string]bool{}
	for _, n := range found {
		set[n] = true
	}
	for n := range d.stats.named {
		set[n] = true
	}
	if len(set) > maxQueueOptions {
		return nil
	}
	return slices.Sorted(maps.Keys(set))
}

// pageSize is the rows a list page shows.
const pageSize = 50

type jobsData struct {
	Queues []string
	Queue  string
	State  string
	States []string
	Jobs   []dbqueue.JobInfo
	Next   string // the next page's URL, or ""
}

func (d *Dashboard) jobsPage(w http.ResponseWriter, r *http.Request) {
	query := r.URL.Query()
	f := dbqueue.JobFilter{Queue: query.Get("queue"), State: dbqueue.JobState(query.Get("state")), Limit: pageSize}
	if a := query.Get("after"); a != "" {
		id, err := strconv.ParseInt(a, 10, 64)
		if err != nil || id < 0 {
			d.fail(w, r, http.StatusBadRequest, fmt.Errorf("after=%q: want a job id", a))
			return
		}
		f.AfterID = id
	}
	switch f.State {
	case "", dbqueue.JobPending, dbqueue.JobDelayed, dbqueue.JobReserved:
	default:
		d.fail(w, r, http.StatusBadRequest, fmt.Errorf("state=%q: use pending, delayed, reserved or none", f.State))
		return
	}
	jobs, err := d.q.Jobs(r.Context(), f)
	if err != nil {
		d.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	for i := range jobs {
		d.redactJob(&jobs[i])
	}
	data := jobsData{
		Queues: d.queueNames(r), Queue: f.Queue, State: string(f.State), Jobs: jobs,
		States: []string{string(dbqueue.JobPending), string(dbqueue.JobDelayed), string(dbqueue.JobReserved)},
	}
	if len(jobs) == pageSize {
		next := r.URL.Query()
		next.Del("flash")
		next.Set("after", strconv.FormatInt(jobs[len(jobs)-1].ID, 10))
		data.Next = "jobs?" + next.Encode()
	}
	d.render(w, r, http.StatusOK, "jobs", d.view(w, r, "Jobs", "jobs", data))
}

func (d *Dashboard) jobPage(w http.ResponseWriter, r *http.Request) {
	id, err := jobID(r.URL.Query().Get("id"))
	if err != nil {
		d.fail(w, r, http.StatusBadRequest, err)
		return
	}
	job, err := d.q.Job(r.Context(), id)
	if errors.Is(err, dbqueue.ErrJobNotFound) {
		d.fail(w, r, http.StatusNotFound, fmt.Errorf("%w; if it failed, it is on the failed jobs page", err))
		return
	}
	if err != nil {
		d.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	d.redactJob(job)
	d.render(w, r, http.StatusOK, "job", d.view(w, r, fmt.Sprintf("Job %d", id), "jobs", job))
}

type failedData struct {
	Queues []string
	Queue  string
	Jobs   []failed.Job
	Next   string
}

func (d *Dashboard) failedPage(w http.ResponseWriter, r *http.Request) {
	query := r.URL.Query()
	f := failed.Filter{Queue: query.Get("queue"), Limit: pageSize}
	if b := query.Get("before"); b != "" {
		id, err := strconv.ParseInt(b, 10, 64)
		if err != nil || id < 0 {
			d.fail(w, r, http.StatusBadRequest, fmt.Errorf("before=%q: want a failed job id", b))
			return
		}
		f.BeforeID = id
	}
	jobs, err := d.failed.List(r.Context(), f)
	if err != nil {
		d.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	for i := range jobs {
		d.redactFailed(&jobs[i])
	}
	data := failedData{Queues: d.queueNames(r), Queue: f.Queue, Jobs: jobs}
	if len(jobs) == pageSize {
		next := r.URL.Query()
		next.Del("flash")
		next.Set("before", strconv.FormatInt(jobs[len(jobs)-1].ID, 10))
		data.Next = "failed?" + next.Encode()
	}
	d.render(w, r, http.StatusOK, "failed", d.view(w, r, "Failed jobs", "failed", data))
}

func (d *Dashboard) failedJobPage(w http.ResponseWriter, r *http.Request) {
	uuid := r.URL.Query().Get("uuid")
	if uuid == "" {
		d.fail(w, r, http.StatusBadRequest, errors.New("no uuid given"))
		return
	}
	job, err := d.failed.Find(r.Context(), uuid)
	if errors.Is(err, failed.ErrNotFound) {
		d.fail(w, r, http.StatusNotFound, fmt.Errorf("%w (retried or deleted already?)", err))
		return
	}
	if err != nil {
		d.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	d.redactFailed(&job)
	d.render(w, r, http.StatusOK, "failed-job", d.view(w, r, "Failed job", "failed", job))
}

// serveStatic serves an embedded asset.
func serveStatic(w http.ResponseWriter, r *http.Request, name string) {
	body, err := fs.ReadFile(files, "static/"+name)
	if err != nil || strings.Contains(name, "/") {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", mime.TypeByExtension(path.Ext(name)))
	w.Header().Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(body))
}

// age formats seconds as a short duration: 42s, 3m 4s, 5h 6m, 2d 3h.
func age(seconds float64) string {
	s := int64(seconds)
	switch {
	case s <= 0:
		return "—"
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm %ds", s/60, s%60)
	case s < 86400:
		return fmt.Sprintf("%dh %dm", s/3600, s%3600/60)
	}
	return fmt.Sprintf("%dd %dh", s/86400, s%86400/3600)
}

// count is a count for the page: "1,234", or "10,000+" when it stopped
// at its cap (a lower bound).
func count(n int64, capped bool) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if capped {
		s += "+"
	}
	return s
}

// countArg is the "count" template's argument.
type countArg struct {
	N      int64
	Capped bool
}

// ago is how long ago, in words: "just now", "42s ago".
func ago(d time.Duration) string {
	if d < time.Second {
		return "just now"
	}
	return age(d.Seconds()) + " ago"
}

// when formats a time in UTC, or a dash for the zero time.
func when(t time.Time) string {
	if t.IsZero() || t.Unix() == 0 {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05") + " UTC"
}

// firstLine is the first line of an exception, shortened.
func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	if r := []rune(line); len(r) > 160 {
		line = string(r[:160]) + "…"
	}
	return line
}

// pretty indents JSON for reading; anything else is shown as it is.
func pretty(raw []byte) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return buf.String()
}
