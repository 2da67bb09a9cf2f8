package dashboard_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/dashboard"
	"github.com/dbqueue/dbqueue/failed"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

var ctx = context.Background()

// site is a dashboard served by httptest, with a client that does not
// follow redirects (the tests check where actions send the browser).
type site struct {
	t      *testing.T
	srv    *httptest.Server
	client *http.Client
	prefix string // where the dashboard is mounted, "" or "/admin/queue"
}

func serve(t *testing.T, q *dbqueue.Queue, opts dashboard.Options) *site {
	t.Helper()
	d, err := dashboard.New(q, opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(d)
	t.Cleanup(srv.Close)
	return &site{t: t, srv: srv, client: withCookies(t, noRedirects(srv.Client()))}
}

// withCookies gives a client a cookie jar, as a browser has: an action
// leaves the line it shows on the next page in a cookie.
func withCookies(t *testing.T, c *http.Client) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Jar = jar
	return c
}

func noRedirects(c *http.Client) *http.Client {
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return c
}

// get fetches a page and returns its status and body.
func (s *site) get(path string) (int, string) {
	s.t.Helper()
	res, err := s.client.Get(s.srv.URL + s.prefix + "/" + path)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body)
}

// page fetches a page that must answer 200.
func (s *site) page(path string) string {
	s.t.Helper()
	code, body := s.get(path)
	if code != http.StatusOK {
		s.t.Fatalf("GET %s: %d: %s", path, code, body)
	}
	return body
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// token is the token of the forms on the failed jobs page.
func (s *site) token() string {
	s.t.Helper()
	var stats struct{ CSRF string }
	if err := json.Unmarshal([]byte(s.page("api/stats")), &stats); err != nil || stats.CSRF == "" {
		s.t.Fatalf("api/stats has no csrf token: %v", err)
	}
	return stats.CSRF
}

// post submits an action form as a same-origin browser would; header
// pairs override or add headers.
func (s *site) post(form url.Values, header ...string) (int, string, string) {
	s.t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.srv.URL+s.prefix+"/action", strings.NewReader(form.Encode()))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("Origin", s.srv.URL)
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] == "" {
			req.Header.Del(header[i])
		} else {
			req.Header.Set(header[i], header[i+1])
		}
	}
	res, err := s.client.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header.Get("Location"), string(body)
}

// act posts an action with a valid token and wants the redirect back.
func (s *site) act(fields ...string) string {
	s.t.Helper()
	form := url.Values{"csrf": {s.token()}}
	for i := 0; i+1 < len(fields); i += 2 {
		form.Set(fields[i], fields[i+1])
	}
	code, loc, body := s.post(form)
	if code != http.StatusSeeOther {
		s.t.Fatalf("POST %v: %d, want 303: %s", fields, code, body)
	}
	return loc
}

type stats struct {
	Queues []dashboard.QueueStats
	Totals dashboard.Point
}

func (s *site) stats() stats {
	s.t.Helper()
	var st stats
	if err := json.Unmarshal([]byte(s.page("api/stats")), &st); err != nil {
		s.t.Fatal(err)
	}
	return st
}

func (st stats) queue(name string) dashboard.QueueStats {
	for _, q := range st.Queues {
		if q.Name == name {
			return q
		}
	}
	return dashboard.QueueStats{Name: "(missing) " + name}
}

func push(t *testing.T, q *dbqueue.Queue, job dbqueue.NewJob) int64 {
	t.Helper()
	id, err := q.Push(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// failJob pushes a job, reserves it and fails it with the error text,
// and returns its uuid.
func failJob(t *testing.T, q *dbqueue.Queue, queue, name, exception string) string {
	t.Helper()
	push(t, q, dbqueue.NewJob{Name: name, Queue: queue})
	jobs, err := q.Reserve(ctx, 1, queue)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("reserve: %d jobs, %v", len(jobs), err)
	}
	if err := q.Fail(ctx, jobs[0], errors.New(exception)); err != nil {
		t.Fatal(err)
	}
	return jobs[0].Payload.UUID
}

func failedUUIDs(t *testing.T, q *dbqueue.Queue) []string {
	t.Helper()
	s, err := failed.New(q)
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := s.List(ctx, failed.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, j := range jobs {
		out = append(out, j.UUID)
	}
	return out
}

func wantContains(t *testing.T, what, body string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(body, s) {
			t.Errorf("%s lacks %q", what, s)
		}
	}
}

func TestPages(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		s := serve(t, q, dashboard.Options{Queues: []string{"idle"}})
		push(t, q, dbqueue.NewJob{Name: "send-mail", Queue: "mail", Data: map[string]string{"to": "ann@example.com"}})
		push(t, q, dbqueue.NewJob{Name: "send-mail", Queue: "mail"})
		delayed := push(t, q, dbqueue.NewJob{Name: "digest", Queue: "mail", Delay: time.Hour})
		uuid := failJob(t, q, "reports", "build-report", "report 7: disk full\n  at main.build()")

		st := s.stats()
		mail := st.queue("mail")
		if mail.Pending != 2 || mail.Delayed != 1 || mail.Reserved != 0 {
			t.Errorf("mail: %+v, want 2 pending and 1 delayed", mail)
		}
		if r := st.queue("reports"); r.Failed != 1 || r.Pending != 0 {
			t.Errorf("reports (failed jobs only): %+v, want listed with 1 failed", r)
		}
		if idle := st.queue("idle"); idle.Name != "idle" {
			t.Errorf("Options.Queues queue not listed: %+v", st.Queues)
		}
		if st.Totals.Pending != 2 || st.Totals.Delayed != 1 || st.Totals.Failed != 1 {
			t.Errorf("totals %+v", st.Totals)
		}

		home := s.page("")
		wantContains(t, "queues page", home, `data-queue="mail"`, `data-queue="reports"`, `data-queue="default"`,
			`href="static/style.css"`, `name="op" value="pause"`)
		if strings.Contains(home, `href="/`) || strings.Contains(home, `src="/`) || strings.Contains(home, `action="/`) {
			t.Errorf("queues page has a root-relative URL: it breaks under a prefix")
		}

		list := s.page("jobs?queue=mail&state=delayed")
		wantContains(t, "delayed jobs", list, fmt.Sprintf(`data-id="%d"`, delayed), "digest", "Run now")
		if strings.Contains(list, "send-mail") {
			t.Errorf("delayed list shows a pending job")
		}
		if all := s.page("jobs"); strings.Count(all, "data-id=") != 3 {
			t.Errorf("jobs page lists %d jobs, want 3", strings.Count(all, "data-id="))
		}
		wantContains(t, "job page", s.page(fmt.Sprintf("job?id=%d", delayed)), "digest", "delayed", `&#34;job&#34;: &#34;digest&#34;`)

		fl := s.page("failed")
		wantContains(t, "failed page", fl, uuid, "build-report", "report 7: disk full", "at main.build()", `value="retry"`)
		wantContains(t, "failed page of reports", s.page("failed?queue=reports"), uuid)
		if strings.Contains(s.page("failed?queue=mail"), uuid) {
			t.Errorf("failed page of queue mail shows a job of reports")
		}
		wantContains(t, "failed job page", s.page("failed-job?uuid="+uuid), "report 7: disk full\n  at main.build()", "build-report")

		for path, want := range map[string]int{
			"job?id=999999":        http.StatusNotFound,
			"job?id=x":             http.StatusBadRequest,
			"failed-job?uuid=nope": http.StatusNotFound,
			"jobs?state=running":   http.StatusBadRequest,
			"nowhere":              http.StatusNotFound,
			"static/nope.js":       http.StatusNotFound,
		} {
			if code, body := s.get(path); code != want {
				t.Errorf("GET %s: %d, want %d: %.200s", path, code, want, body)
			}
		}
		if code, body := s.get("static/app.js"); code != 200 || !strings.Contains(body, "api/stats") {
			t.Errorf("GET static/app.js: %d", code)
		}
	})
}

func TestActions(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		s := serve(t, q, dashboard.Options{})

		// pause and resume
		push(t, q, dbqueue.NewJob{Name: "a", Queue: "mail"})
		loc := s.act("op", "pause", "queue", "mail", "back", "./")
		if loc != "./" {
			t.Errorf("pause redirects to %q, want ./", loc)
		}
		if p, _ := q.Paused(ctx, "mail"); !p {
			t.Errorf("mail not paused")
		}
		if !s.stats().queue("mail").Paused {
			t.Errorf("api/stats does not show mail paused right after the action")
		}
		wantContains(t, "queues page after pause", s.page(""), "Paused queue &#34;mail&#34;", `value="resume"`)
		s.act("op", "resume", "queue", "mail")
		if p, _ := q.Paused(ctx, "mail"); p {
			t.Errorf("mail still paused after resume")
		}

		// retry one failed job: back on its queue, gone from failed_jobs
		u1 := failJob(t, q, "reports", "r1", "boom 1")
		u2 := failJob(t, q, "reports", "r2", "boom 2")
		loc = s.act("op", "retry", "uuid", u1, "back", "failed?queue=reports")
		if !strings.HasPrefix(loc, "failed?") || !strings.Contains(loc, "queue=reports") {
			t.Errorf("retry redirects to %q, want the failed page it came from", loc)
		}
		if got := failedUUIDs(t, q); len(got) != 1 || got[0] != u2 {
			t.Errorf("after retry failed_jobs holds %v, want only %s", got, u2)
		}
		if sz, _ := q.Size(ctx, "reports"); sz.Pending != 1 {
			t.Errorf("reports has %d pending after retry, want 1", sz.Pending)
		}
		// the same uuid again: gone
		form := url.Values{"csrf": {s.token()}, "op": {"retry"}, "uuid": {u1}}
		if code, _, body := s.post(form); code != http.StatusNotFound || !strings.Contains(body, u1) {
			t.Errorf("retry of a retried job: %d, want 404 naming it: %.300s", code, body)
		}

		// forget
		s.act("op", "forget", "uuid", u2)
		if got := failedUUIDs(t, q); len(got) != 0 {
			t.Errorf("after forget failed_jobs holds %v", got)
		}
		form = url.Values{"csrf": {s.token()}, "op": {"forget"}, "uuid": {u2}}
		if code, _, _ := s.post(form); code != http.StatusNotFound {
			t.Errorf("forget of a forgotten job: %d, want 404", code)
		}

		// retry-all of one queue, then of all
		failJob(t, q, "reports", "r3", "boom")
		failJob(t, q, "other", "o1", "boom")
		s.act("op", "retry-all", "queue", "reports")
		if got := failedUUIDs(t, q); len(got) != 1 {
			t.Errorf("retry-all of reports left %d failed jobs, want 1 (of queue other)", len(got))
		}
		s.act("op", "retry-all")
		if got := failedUUIDs(t, q); len(got) != 0 {
			t.Errorf("retry-all left %d failed jobs", len(got))
		}

		// flush
		failJob(t, q, "x", "x1", "boom")
		failJob(t, q, "y", "y1", "boom")
		loc = s.act("op", "flush")
		if got := failedUUIDs(t, q); len(got) != 0 {
			t.Errorf("flush left %d failed jobs", len(got))
		}
		wantContains(t, "queues page after flush", s.page(""), "Deleted all 2 failed jobs")

		// run-now and cancel
		id := push(t, q, dbqueue.NewJob{Name: "later", Queue: "cron", Delay: time.Hour})
		s.act("op", "run-now", "id", fmt.Sprint(id))
		if j, err := q.Job(ctx, id); err != nil || j.State != dbqueue.JobPending {
			t.Errorf("after run-now job %d: %v, %v; want pending", id, j, err)
		}
		s.act("op", "cancel", "id", fmt.Sprint(id))
		if _, err := q.Job(ctx, id); !errors.Is(err, dbqueue.ErrJobNotFound) {
			t.Errorf("after cancel job %d: %v, want gone", id, err)
		}

		// bad input says what is wrong
		for _, c := range []struct {
			fields []string
			code   int
			says   string
		}{
			{[]string{"op", "pause"}, 400, "no queue"},
			{[]string{"op", "explode"}, 400, "unknown action"},
			{[]string{}, 400, "no action"},
			{[]string{"op", "cancel", "id", "-3"}, 400, "positive"},
			{[]string{"op", "cancel", "id", "99999999"}, 404, "no such job"},
		} {
			form := url.Values{"csrf": {s.token()}}
			for i := 0; i+1 < len(c.fields); i += 2 {
				form.Set(c.fields[i], c.fields[i+1])
			}
			code, _, body := s.post(form)
			if code != c.code || !strings.Contains(body, c.says) {
				t.Errorf("POST %v: %d, want %d saying %q: %.300s", c.fields, code, c.code, c.says, body)
			}
		}
		if code, _ := s.get("action"); code != http.StatusMethodNotAllowed {
			t.Errorf("GET action: %d, want 405", code)
		}
	})
}

func TestReadOnly(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		s := serve(t, q, dashboard.Options{ReadOnly: true})
		push(t, q, dbqueue.NewJob{Name: "a", Queue: "mail", Delay: time.Hour})
		uuid := failJob(t, q, "mail", "b", "boom")
		for _, page := range []string{"", "jobs", "failed", "failed-job?uuid=" + uuid} {
			body := s.page(page)
			if strings.Contains(body, `name="op"`) || strings.Contains(body, `action="action"`) {
				t.Errorf("read-only page %q shows an action form", page)
			}
			wantContains(t, "read-only page "+page, body, "read-only")
		}
		for _, fields := range [][]string{
			{"op", "pause", "queue", "mail"}, {"op", "retry", "uuid", uuid}, {"op", "forget", "uuid", uuid}, {"op", "flush"},
		} {
			form := url.Values{"csrf": {s.token()}}
			for i := 0; i+1 < len(fields); i += 2 {
				form.Set(fields[i], fields[i+1])
			}
			if code, _, body := s.post(form); code != http.StatusForbidden || !strings.Contains(body, "read-only") {
				t.Errorf("read-only POST %v: %d, want 403: %.200s", fields, code, body)
			}
		}
		if p, _ := q.Paused(ctx, "mail"); p {
			t.Errorf("read-only dashboard paused a queue")
		}
		if got := failedUUIDs(t, q); len(got) != 1 {
			t.Errorf("read-only dashboard changed failed_jobs: %v", got)
		}
	})
}

// tamper flips one bit of a token's signature. Rewriting its last two
// characters as "AA", as this test did, left the token's bytes as they
// were whenever the next-to-last was already "A" and the last carried
// only padding bits: one token in 256, so TestCSRF failed about one run in
// 85 (three databases).
func tamper(t *testing.T, token string) string {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(raw) < 9 {
		t.Fatalf("token %q: %v", token, err)
	}
	raw[len(raw)-1] ^= 1
	return base64.RawURLEncoding.EncodeToString(raw)
}

func TestCSRF(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		s := serve(t, q, dashboard.Options{})
		uuid := failJob(t, q, "mail", "b", "boom")
		other := serve(t, q, dashboard.Options{}) // another process: another secret
		good := s.token()
		cases := []struct {
			name   string
			token  string
			header []string
		}{
			{"no token", "", nil},
			{"garbage token", "abc", nil},
			{"another dashboard's token", other.token(), nil},
			{"tampered token", tamper(t, good), nil},
			{"cross-site fetch", good, []string{"Sec-Fetch-Site", "cross-site"}},
			{"same-site but other origin", good, []string{"Sec-Fetch-Site", "same-site"}},
			{"foreign Origin", good, []string{"Sec-Fetch-Site", "", "Origin", "https://evil.example"}},
		}
		for _, c := range cases {
			form := url.Values{"op": {"forget"}, "uuid": {uuid}}
			if c.token != "" {
				form.Set("csrf", c.token)
			}
			if code, _, body := s.post(form, c.header...); code != http.StatusForbidden {
				t.Errorf("%s: %d, want 403: %.200s", c.name, code, body)
			}
		}
		if got := failedUUIDs(t, q); len(got) != 1 {
			t.Fatalf("a refused action changed failed_jobs: %v", got)
		}
		// A client that sends neither header (curl) with a good token is
		// let through: the token is the check.
		form := url.Values{"csrf": {good}, "op": {"forget"}, "uuid": {uuid}}
		if code, _, body := s.post(form, "Sec-Fetch-Site", "", "Origin", ""); code != http.StatusSeeOther {
			t.Errorf("good token, no browser headers: %d, want 303: %.200s", code, body)
		}
	})
}

func TestAuthorize(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		// Anyone with the header may look; only admins may act.
		s := serve(t, q, dashboard.Options{Authorize: func(r *http.Request) error {
			role := r.Header.Get("X-Role")
			switch {
			case role == "":
				return errors.New("sign in first")
			case r.Method == http.MethodPost && role != "admin":
				return fmt.Errorf("role %s may not act", role)
			}
			return nil
		}})
		push(t, q, dbqueue.NewJob{Name: "a", Queue: "mail"})
		if code, body := s.get(""); code != http.StatusForbidden || !strings.Contains(body, "sign in first") {
			t.Errorf("no role: %d, want 403 with the hook's error: %.200s", code, body)
		}
		if code, _ := s.get("api/stats"); code != http.StatusForbidden {
			t.Errorf("no role, api/stats: %d, want 403", code)
		}
		if code, _ := s.get("static/app.js"); code != http.StatusForbidden {
			t.Errorf("no role, static asset: %d, want 403", code)
		}
		viewer := func(role string) *http.Client {
			c := noRedirects(s.srv.Client())
			c.Transport = roleTransport{role, http.DefaultTransport}
			return c
		}
		s.client = viewer("viewer")
		s.page("")
		form := url.Values{"csrf": {s.token()}, "op": {"pause"}, "queue": {"mail"}}
		if code, _, body := s.post(form); code != http.StatusForbidden || !strings.Contains(body, "may not act") {
			t.Errorf("viewer's action: %d, want 403: %.200s", code, body)
		}
		if p, _ := q.Paused(ctx, "mail"); p {
			t.Fatalf("a refused action paused the queue")
		}
		s.client = viewer("admin")
		s.act("op", "pause", "queue", "mail")
		if p, _ := q.Paused(ctx, "mail"); !p {
			t.Errorf("admin's action did not pause the queue")
		}
	})
}

type roleTransport struct {
	role string
	rt   http.RoundTripper
}

func (r roleTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("X-Role", r.role)
	return r.rt.RoundTrip(req)
}

// TestPrefix mounts the dashboard under a path with http.StripPrefix, as
// the README shows, and follows its links and redirects.
func TestPrefix(t *testing.T) {
	db := dbtest.New(t, dbqueue.SQLite)
	q := db.Queue(t)
	d, err := dashboard.New(q, dashboard.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, strip := range []string{"/admin/queue", "/admin/queue/"} {
		t.Run(strip, func(t *testing.T) {
			mux := http.NewServeMux()
			mux.Handle("/admin/queue/", http.StripPrefix(strip, d))
			srv := httptest.NewServer(mux)
			defer srv.Close()
			s := &site{t: t, srv: srv, client: noRedirects(srv.Client()), prefix: "/admin/queue"}
			uuid := failJob(t, q, "mail", "b", "boom")
			home := s.page("")
			// Every link of the page, resolved as a browser would, must stay
			// under the prefix and answer.
			base, _ := url.Parse(srv.URL + "/admin/queue/")
			for _, m := range regexp.MustCompile(`(?:href|src)="([^"]*)"`).FindAllStringSubmatch(home, -1) {
				ref, err := url.Parse(strings.ReplaceAll(m[1], "&amp;", "&"))
				if err != nil {
					t.Fatal(err)
				}
				u := base.ResolveReference(ref)
				if !strings.HasPrefix(u.Path, "/admin/queue/") {
					t.Errorf("link %q leaves the prefix: %s", m[1], u.Path)
					continue
				}
				res, err := s.client.Get(u.String())
				if err != nil {
					t.Fatal(err)
				}
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					t.Errorf("link %q → %s: %d", m[1], u.Path, res.StatusCode)
				}
			}
			form := url.Values{"csrf": {s.token()}, "op": {"retry"}, "uuid": {uuid}, "back": {"failed"}}
			code, loc, body := s.post(form)
			if code != http.StatusSeeOther {
				t.Fatalf("POST under the prefix: %d: %.300s", code, body)
			}
			action, _ := url.Parse(srv.URL + "/admin/queue/action")
			ref, _ := url.Parse(loc)
			if got := action.ResolveReference(ref).Path; got != "/admin/queue/failed" {
				t.Errorf("redirect %q resolves to %s, want /admin/queue/failed", loc, got)
			}
		})
	}
}

// TestBackIsNoOpenRedirect: the back field only names the dashboard's
// own pages.
func TestBackIsNoOpenRedirect(t *testing.T) {
	db := dbtest.New(t, dbqueue.SQLite)
	q := db.Queue(t)
	s := serve(t, q, dashboard.Options{})
	for back, want := range map[string]string{
		"https://evil.example/":    "./",
		"//evil.example/x":         "./",
		"/jobs":                    "./",
		`\\evil.example`:           "./",
		"jobs?queue=mail":          "jobs?queue=mail",
		"failed":                   "failed",
		"failed?flash=you+are+out": "failed",
	} {
		loc := s.act("op", "pause", "queue", "q", "back", back)
		if loc != want {
			t.Errorf("back %q redirects to %q, want %s", back, loc, want)
		}
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	db := dbtest.New(t, dbqueue.SQLite)
	q := db.Queue(t)
	if _, err := dashboard.New(nil, dashboard.Options{}); err == nil || !strings.Contains(err.Error(), "nil queue") {
		t.Errorf("nil queue: %v", err)
	}
	for name, opts := range map[string]dashboard.Options{
		"Interval": {Interval: -time.Second},
		"100ms":    {Interval: time.Millisecond},
		"History":  {History: 1},
		"Secret":   {Secret: []byte("short")},
		"empty":    {Queues: []string{" "}},
		"Trusted":  {TrustedOrigins: []string{"not a url"}},
	} {
		if _, err := dashboard.New(q, opts); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("New(%+v): %v, want an error naming %s", opts, err, name)
		}
	}
}

// TestThroughput works jobs between two samples and reads the rates.
func TestThroughput(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		s := serve(t, q, dashboard.Options{Interval: 100 * time.Millisecond})
		for range 10 {
			push(t, q, dbqueue.NewJob{Name: "n", Queue: "work"})
		}
		first := s.stats()
		if first.Totals.Pushed != nil {
			t.Errorf("the first sample has rates: %+v", first.Totals)
		}
		jobs, err := q.Reserve(ctx, 6, "work")
		if err != nil || len(jobs) != 6 {
			t.Fatalf("reserve: %d, %v", len(jobs), err)
		}
		for _, j := range jobs[:4] {
			if err := q.Delete(ctx, j); err != nil {
				t.Fatal(err)
			}
		}
		if err := q.Fail(ctx, jobs[4], errors.New("boom")); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			push(t, q, dbqueue.NewJob{Name: "n", Queue: "work"})
		}
		// A request takes the next sample once Interval has passed.
		var full struct{ History []dashboard.Point }
		dbtest.WaitFor(t, 10*time.Second, "a second sample", func() bool {
			if err := json.Unmarshal([]byte(s.page("api/stats")), &full); err != nil {
				t.Fatal(err)
			}
			return len(full.History) >= 2
		})
		if len(full.History) != 2 {
			t.Fatalf("history has %d points, want 2", len(full.History))
		}
		p, prev := full.History[1], full.History[0]
		dt := time.Duration(p.Time-prev.Time) * time.Millisecond
		perMin := func(n float64) float64 { return n * float64(time.Minute) / float64(dt) }
		near := func(got *float64, want float64) bool {
			return got != nil && *got > want*0.95 && *got < want*1.05
		}
		// 3 pushed; depth went 10 → 8 (4 deleted, 1 failed, 1 still
		// reserved, 3 new): 5 processed; 1 failed.
		if !near(p.Pushed, perMin(3)) || !near(p.Processed, perMin(5)) || !near(p.FailedRate, perMin(1)) {
			t.Errorf("rates over %v: pushed %v processed %v failed %v; want %.0f, %.0f, %.0f per minute",
				dt, deref(p.Pushed), deref(p.Processed), deref(p.FailedRate), perMin(3), perMin(5), perMin(1))
		}
		if p.Pending != 7 || p.Reserved != 1 || p.Failed != 1 {
			t.Errorf("depth %+v, want 7 pending, 1 reserved, 1 failed", p)
		}
	})
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestDrainedQueueLeaves: a queue that empties stays listed while the
// history lasts, then goes; named and paused queues stay.
func TestDrainedQueueLeaves(t *testing.T) {
	db := dbtest.New(t, dbqueue.SQLite)
	q := db.Queue(t)
	// The history spans 10 × 100ms.
	s := serve(t, q, dashboard.Options{Interval: 100 * time.Millisecond, History: 10, Queues: []string{"named"}})
	push(t, q, dbqueue.NewJob{Name: "a", Queue: "temp"})
	push(t, q, dbqueue.NewJob{Name: "a", Queue: "held"})
	if st := s.stats(); st.queue("temp").Pending != 1 || st.queue("held").Pending != 1 {
		t.Fatalf("temp or held missing: %+v", st.Queues)
	}
	// held is paused, as from the dashboard, then both drain.
	if err := q.Pause(ctx, "held"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"temp", "held"} {
		if _, err := q.Clear(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	// A request takes the next sample once Interval has passed.
	drained := s.stats().Totals.Time
	var st stats
	dbtest.WaitFor(t, 10*time.Second, "the sample after the drain", func() bool { st = s.stats(); return st.Totals.Time > drained })
	if st.queue("temp").Name != "temp" {
		t.Errorf("temp left at once when drained: %+v", st.Queues)
	}
	if !dbtest.Until(20*time.Second, func() bool { st = s.stats(); return st.queue("temp").Name != "temp" }) {
		t.Errorf("temp still listed after the history: %+v", st.Queues)
	}
	for _, name := range []string{"named", "held", "default"} {
		if st.queue(name).Name != name {
			t.Errorf("%s not listed: %+v", name, st.Queues)
		}
	}
}
