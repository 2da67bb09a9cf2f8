// Package dashboard is a web dashboard for a dbqueue queue: an
// http.Handler the application mounts where it likes, behind its own
// authentication, to watch queues and act on them from a browser.
//
// It shows each queue's depth (pending, delayed, reserved, and failed
// jobs), charts of depth and throughput over the last minutes, the jobs in
// the jobs table by queue and state with their payloads, the errors of
// their earlier attempts, who holds a reserved job and until when, and
// the failed jobs with the error that failed them. A search page finds
// jobs and failed jobs by id, uuid, name, queue or payload text, reading
// only the newest rows of a table (dbqueue.DefaultSearchScan) and saying
// so. Options.Redact hides payload fields on every page. Unless ReadOnly is set it can pause
// and resume a queue, retry, forget and flush failed jobs, and cancel or
// run at once a waiting job — Laravel Horizon's daily uses, on the SQL
// tables, for PHP and Go workers alike.
//
// The handler is self-contained: its templates, style sheet and script
// are embedded, nothing is loaded from elsewhere, and every link is
// relative, so it works mounted under any prefix with http.StripPrefix:
//
//	dash, err := dashboard.New(q, dashboard.Options{AllowedHosts: []string{"admin.example.com"}})
//	…
//	mux.Handle("/admin/queue/", http.StripPrefix("/admin/queue", dash))
//
// Actions are POST forms, refused unless they carry a token the dashboard
// signed (an HMAC with a per-process secret) and, in browsers that say
// where a request comes from, come from the same origin
// (http.CrossOriginProtection). Requests must name a host the dashboard
// serves (the loopback names, and Options.AllowedHosts), so that a web
// page cannot reach it by DNS rebinding. There is no login: put the
// handler behind the application's authentication, or pass
// Options.Authorize.
//
// # Throughput
//
// The jobs table keeps no history: a finished job is a deleted row. The
// dashboard therefore samples the tables itself and keeps the samples in
// memory, in a ring of Options.History entries. A sample is taken when a
// page or the page's refresh asks for the counts and the newest sample is
// older than Options.Interval, rather than by a goroutine of its own: the
// dashboard costs nothing while nobody looks at it and needs no Close, and
// any number of open pages share one sample per interval. The price is
// that the charts start when the first page is opened, and show a gap
// while no page is open.
//
// Throughput is computed from consecutive samples. Every job gets a
// larger id than any before it, so "pushed" is the growth of the highest
// job id seen; "processed" (jobs that left the jobs table: ran, failed or
// were cancelled) is pushed minus the growth of the queues' depth; and
// "failed" is the growth of the highest failed job id. Processed is left
// out when either sample's depth is capped (see below). The counts are
// over all queues of the tables, by whichever workers and processes ran
// them, PHP ones included. When a queue drains completely between two
// samples its last jobs are counted in the sample after the next push.
//
// # Bounded counts
//
// No read of a sample grows with the tables or the number of queues: the
// queues page lists 100 queues a page, found by a loose index scan of the
// queue index (dbqueue.Queue.QueuesAfter); each count stops at a cap
// (dbqueue.Queue.SizesCapped, QueueCap on a page of few queues, less on a
// full page), the totals at TotalsCap, and failed jobs are counted among
// the newest FailedWindow. A count that stopped at its cap is shown as
// "10,000+" and flagged *_capped in api/stats: a lower bound. A page waits
// for a running sample at most 150 ms when an older one exists, and then
// shows the older one with its age.
package dashboard

import (
	"crypto/rand"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/failed"
)

// Defaults of Options.
const (
	DefaultInterval = 5 * time.Second
	DefaultHistory  = 360 // 30 minutes at DefaultInterval
)

// Options configure a dashboard. The zero value is a dashboard with
// actions, for an application that authenticates requests before they
// reach the handler.
type Options struct {
	// ReadOnly hides the action buttons and refuses every action with 403
	// Forbidden: for a dashboard that support staff or a status page may
	// see but not change.
	ReadOnly bool

	// Authorize, when set, is called for every request before anything
	// else, and a non-nil error refuses it with 403 Forbidden and the
	// error's text. It is the hook for the application's own
	// authentication (a session cookie, a header set by a proxy). An
	// action is a POST request; views are GET, so a hook can let some
	// users look but not act.
	Authorize func(r *http.Request) error

	// Queues are shown even while they hold no jobs. The dashboard lists
	// the queue's default queue, the queues that hold jobs or failed jobs,
	// those it saw paused, and those that held jobs within the history
	// (so a queue does not vanish the moment it drains). Name here a
	// queue that may be paused by another process while empty, so that it
	// can be resumed from the dashboard.
	Queues []string

	// Interval is how often an open page refreshes its counts, and the
	// least time between two samples of the throughput history.
	// DefaultInterval when 0.
	Interval time.Duration

	// History is how many samples the throughput history keeps;
	// DefaultHistory when 0.
	History int

	// Secret signs the tokens that action forms carry. A random secret per
	// process is used when it is empty, which is right for one process;
	// give every instance the same secret (at least 32 bytes) when several
	// serve the dashboard behind a load balancer, so that a form rendered
	// by one is accepted by another.
	Secret []byte

	// TrustedOrigins are origins ("https://admin.example.com") allowed to
	// post actions besides the request's own host: for a proxy that
	// rewrites the Host header. See http.CrossOriginProtection.
	TrustedOrigins []string

	// AllowedHosts are the host names, besides the loopback ones, that
	// requests may name in their Host header. The dashboard refuses any
	// other host with 421 Misdirected Request, because a web page the
	// operator visits can rebind its own name to this machine's address
	// (DNS rebinding) and then read and post to the dashboard as if it
	// were its own site; the Host header still carries the page's name.
	// localhost, names under .localhost, 127.0.0.0/8 and ::1 are always
	// served, on any port. An application that serves the dashboard on
	// its own names must list them: "admin.example.com", "*.example.com"
	// for every name under a domain, or an address ("192.0.2.7"); any port
	// matches. "*" turns the check off, for a proxy in front that checks
	// the Host itself. X-Forwarded-Host is never read: any client can
	// send it.
	AllowedHosts []string

	// Redact rewrites every payload the dashboard shows (a job's, a failed
	// job's), after the queue's own Redactor (dbqueue.WithRedactor) when
	// it has one: for a dashboard that may show less than the code that
	// opened the queue reads. dbqueue.RedactFields builds one from field
	// paths. A search by text finds no job whose text shows only before
	// redaction.
	Redact dbqueue.Redactor
}

// Dashboard is the dashboard's http.Handler. It is safe for concurrent
// use, and holds nothing that needs closing; it stays usable as long as
// its queue is open.
type Dashboard struct {
	q       *dbqueue.Queue
	failed  *failed.Store
	opts    Options
	secret  []byte
	origins *http.CrossOriginProtection
	hosts   hosts
	stats   *sampler
	pages   map[string]*template.Template
	// searches bounds the searches that run at once (see searchPage).
	searches chan struct{}
	// throughput is the queues page's recorded chart, reused a while.
	throughput throughputCache
}

// New returns a dashboard for q. It fails on a nil queue and on options
// that cannot work, naming the option.
func New(q *dbqueue.Queue, opts Options) (*Dashboard, error) {
	if q == nil {
		return nil, errors.New("dbqueue: dashboard.New: nil queue: open one with dbqueue.Open first")
	}
	switch {
	case opts.Interval < 0:
		return nil, fmt.Errorf("dbqueue: dashboard.New: negative Interval %v", opts.Interval)
	case opts.Interval == 0:
		opts.Interval = DefaultInterval
	case opts.Interval < 100*time.Millisecond:
		return nil, fmt.Errorf("dbqueue: dashboard.New: Interval %v is below 100ms: every open page would query the database that often", opts.Interval)
	}
	switch {
	case opts.History < 0:
		return nil, fmt.Errorf("dbqueue: dashboard.New: negative History %d", opts.History)
	case opts.History == 0:
		opts.History = DefaultHistory
	case opts.History < 2:
		return nil, fmt.Errorf("dbqueue: dashboard.New: History %d: need at least 2 samples to chart", opts.History)
	}
	for _, name := range opts.Queues {
		if strings.TrimSpace(name) == "" {
			return nil, errors.New("dbqueue: dashboard.New: Options.Queues holds an empty name")
		}
	}
	secret := opts.Secret
	switch {
	case len(secret) == 0:
		secret = make([]byte, 32)
		if _, err := rand.Read(secret); err != nil {
			return nil, fmt.Errorf("dbqueue: dashboard.New: make the token secret: %w", err)
		}
	case len(secret) < 32:
		return nil, fmt.Errorf("dbqueue: dashboard.New: Secret has %d bytes: use at least 32 random bytes", len(secret))
	}
	origins := http.NewCrossOriginProtection()
	for _, o := range opts.TrustedOrigins {
		if err := origins.AddTrustedOrigin(o); err != nil {
			return nil, fmt.Errorf("dbqueue: dashboard.New: TrustedOrigins: %w", err)
		}
	}
	allowed, err := newHosts(opts.AllowedHosts)
	if err != nil {
		return nil, fmt.Errorf("dbqueue: dashboard.New: %w", err)
	}
	store, err := failed.New(q)
	if err != nil {
		return nil, fmt.Errorf("dbqueue: dashboard.New: %w", err)
	}
	return &Dashboard{
		q: q, failed: store, opts: opts, secret: secret, origins: origins, hosts: allowed,
		stats: newSampler(q, opts.History, opts.Interval, opts.Queues),
		pages: pages, searches: make(chan struct{}, maxSearches),
	}, nil
}

// ServeHTTP serves the dashboard's pages, its JSON counts, its assets and
// its actions. Paths are relative to where the handler is mounted.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Referrer-Policy", "same-origin")
	if err := d.checkHost(r.Host); err != nil {
		d.fail(w, r, http.StatusMisdirectedRequest, err)
		return
	}
	if d.opts.Authorize != nil {
		if err := d.opts.Authorize(r); err != nil {
			d.fail(w, r, http.StatusForbidden, fmt.Errorf("forbidden: %w", err))
			return
		}
	}
	// http.StripPrefix with a trailing slash leaves no leading one.
	path := "/" + strings.TrimPrefix(r.URL.Path, "/")
	if path == "/action" {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			d.fail(w, r, http.StatusMethodNotAllowed, errors.New("actions are POST forms"))
			return
		}
		d.action(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		d.fail(w, r, http.StatusMethodNotAllowed, fmt.Errorf("method %s: pages are read with GET", r.Method))
		return
	}
	switch {
	case path == "/":
		d.queuesPage(w, r)
	case path == "/jobs":
		d.jobsPage(w, r)
	case path == "/job":
		d.jobPage(w, r)
	case path == "/failed":
		d.failedPage(w, r)
	case path == "/failed-job":
		d.failedJobPage(w, r)
	case path == "/search":
		d.searchPage(w, r)
	case path == "/metrics":
		d.metricsPage(w, r)
	case path == "/workers":
		d.workersPage(w, r)
	case path == "/api/stats":
		d.statsJSON(w, r)
	case strings.HasPrefix(path, "/static/"):
		serveStatic(w, r, strings.TrimPrefix(path, "/static/"))
	default:
		d.fail(w, r, http.StatusNotFound, fmt.Errorf("no page %q", path))
	}
}
