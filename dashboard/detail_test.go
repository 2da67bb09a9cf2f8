package dashboard_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/dashboard"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// hostile is a job's text that must stay text on every page: markup that
// would run, an attribute break-out and bidi controls that would show
// the operator reversed text.
const hostile = `<script>alert(1)</script>"><img src=x onerror=alert(2)>` + "\u202e\u2066RTL"

// hostileInert reports whether a page shows hostile only as text.
func hostileInert(body string) bool {
	return !strings.Contains(body, "<script>alert") && !strings.Contains(body, "<img src=x") &&
		strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;")
}

// The job page shows the errors of earlier attempts in order, the
// reservation's holder and expiry, and the chain; the failed job page the
// errors its job brought along; hostile text in any of them stays text;
// Options.Redact hides a payload field on every page that shows one, and
// a search cannot find the hidden value.
func TestJobPagesShowHistoryAndRedact(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		s := serve(t, q, dashboard.Options{Redact: dbqueue.RedactFields("data.password")})
		queue := strings.Repeat("q<\u202e", 51) // 255 bytes
		id, err := q.PushChain(ctx,
			dbqueue.NewJob{Name: hostile, Queue: queue, Data: map[string]string{"password": "hunter2", "note": hostile}},
			dbqueue.NewJob{Name: "Welcome", Queue: queue})
		if err != nil {
			t.Fatal(err)
		}
		for _, cause := range []string{"first " + hostile, "second failure"} {
			jobs, err := q.Reserve(ctx, 1, queue)
			if err != nil || len(jobs) != 1 {
				t.Fatal(jobs, err)
			}
			if err := q.ReleaseAfterError(ctx, jobs[0], 0, errors.New(cause)); err != nil {
				t.Fatal(err)
			}
		}
		held, err := q.Reserve(ctx, 1, queue)
		if err != nil || len(held) != 1 {
			t.Fatal(held, err)
		}
		page := s.page(fmt.Sprintf("job?id=%d", id))
		first, second := strings.Index(page, "first &lt;script&gt;"), strings.Index(page, "second failure")
		if first < 0 || second < first {
			t.Errorf("job page: the two errors are not shown in order")
		}
		wantContains(t, "job page", page, "Earlier errors", `<th scope="col" class="n">Attempt</th>`, "Held by", "until",
			"1 more after this: Welcome", dbqueue.Redacted)
		if !hostileInert(page) || strings.Contains(page, "hunter2") {
			t.Errorf("job page: hostile text not inert, or the redacted field shown:\n%s", page)
		}

		if err := q.Fail(ctx, held[0], errors.New("third: "+hostile)); err != nil {
			t.Fatal(err)
		}
		uuid := held[0].Payload.UUID
		fpage := s.page("failed-job?uuid=" + url.QueryEscape(uuid))
		wantContains(t, "failed job page", fpage, "Earlier errors", "second failure", dbqueue.Redacted)
		if !hostileInert(fpage) || strings.Contains(fpage, "hunter2") {
			t.Errorf("failed job page: hostile text not inert, or the redacted field shown:\n%s", fpage)
		}
		if list := s.page("failed"); strings.Contains(list, "hunter2") {
			t.Errorf("failed list shows the redacted field")
		}

		found := s.page("search?in=failed&text=" + url.QueryEscape("second failure"))
		if !strings.Contains(found, "No failed job found") {
			t.Errorf("failed search by a text only the error history holds found a job: the history is not what a search reads")
		}
		found = s.page("search?in=failed&name=" + url.QueryEscape(hostile))
		wantContains(t, "failed search by name", found, "failed-job?uuid=", "Read the newest 1 rows, which is all of them")
		if !hostileInert(found) {
			t.Errorf("failed search page: hostile text not inert")
		}
		if page := s.page("search?in=failed&text=hunter2"); !strings.Contains(page, "No failed job found") {
			t.Errorf("a search for a redacted value found the job")
		}
		if page := s.page("search?in=failed&queue=" + url.QueryEscape(queue)); !strings.Contains(page, "failed-job?uuid=") || !hostileInert(page) {
			t.Errorf("failed search by a 255-byte queue name found nothing")
		}

		// Jobs: by id, and beyond a window the page links to older rows.
		other := push(t, q, dbqueue.NewJob{Name: "Other", Queue: queue})
		if page := s.page(fmt.Sprintf("search?in=jobs&id=%d", other)); !strings.Contains(page, fmt.Sprintf(`href="job?id=%d"`, other)) || !strings.Contains(page, "Found by id") {
			t.Errorf("search by id:\n%s", page)
		}
		if page := s.page("search?in=jobs&text=Other"); !strings.Contains(page, fmt.Sprintf(`href="job?id=%d"`, other)) {
			t.Errorf("search by text found nothing")
		}
		for path, want := range map[string]int{
			"search?in=elsewhere&text=x": http.StatusBadRequest,
			"search?id=x":                http.StatusBadRequest,
			"search?before=-1&text=x":    http.StatusBadRequest,
		} {
			if code, _ := s.get(path); code != want {
				t.Errorf("GET %s: %d, want %d", path, code, want)
			}
		}
		if code, _ := s.as("evil.example", http.MethodGet, "search?text=x", nil); code != http.StatusMisdirectedRequest {
			t.Errorf("search page for a rebound host name: %d, want 421", code)
		}
	})
}
