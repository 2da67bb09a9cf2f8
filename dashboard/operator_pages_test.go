package dashboard_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/dashboard"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// num reads the number in the element with the id.
func num(t *testing.T, body, id string) string {
	t.Helper()
	m := regexp.MustCompile(`id="` + id + `">([^<]*)<`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no #%s in the page: %.500s", id, body)
	}
	return m[1]
}

// TestMetricsPage reads the metrics workers recorded: totals, the table by
// queue and kind with units in every heading, the charts' text
// alternatives, the filters, and names that are HTML.
func TestMetricsPage(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		s := serve(t, q, dashboard.Options{})
		processed := seedOperatorView(t, db)
		hostile := `<img src=x onerror=alert(1)>`
		db.Exec(t, fmt.Sprintf("INSERT INTO jobs_metrics (bucket, queue, kind, processed) VALUES (%d, '%s', '%s', 5)",
			seededMinute()-3600*24*3, hostile, hostile))
		db.RollUpMetrics(t) // the week reads hours

		body := s.page("metrics")
		if got := num(t, body, "m-processed"); got != fmt.Sprint(processed) {
			t.Errorf("processed in the last hour: %s, want %d", got, processed)
		}
		wantContains(t, "metrics page", body, "Processed (jobs)", "Throughput (jobs/min)", "Runtime p95 (ms)", "Wait p50 (ms)",
			`id="m-throughput"`, "<title id=\"m-throughput-title\">", "<desc id=\"m-throughput-desc\">", "<polyline",
			`data-kind="send-mail"`, `data-kind="build-report"`, "The numbers")
		if strings.Contains(body, hostile) {
			t.Errorf("the last hour shows the row of three days ago")
		}

		week := s.page("metrics?range=week&queue=" + "reports")
		if strings.Contains(week, `data-queue="mail"`) || !strings.Contains(week, `data-queue="reports"`) {
			t.Errorf("queue=reports: the table shows other queues or not reports")
		}
		week = s.page("metrics?range=week")
		if strings.Contains(week, "<img src=x") || !strings.Contains(week, "&lt;img src=x onerror=alert(1)&gt;") {
			t.Errorf("a queue named like HTML is not escaped: %s", week[strings.Index(week, "onerror")-40:][:120])
		}
		if got := num(t, week, "m-processed"); got != fmt.Sprint(processed+5) {
			t.Errorf("processed in the last week: %s, want %d", got, processed+5)
		}

		empty := s.page("metrics?kind=never-ran")
		wantContains(t, "an empty range", empty, `id="no-metrics"`, "no jobs finished in this range")
		if strings.Contains(empty, "<polyline") {
			t.Errorf("an empty range draws lines")
		}
		if code, body := s.get("metrics?range=year"); code != http.StatusBadRequest || !strings.Contains(body, "use hour, day or week") {
			t.Errorf("range=year: %d %.300s", code, body)
		}
	})
}

// TestMetricsPageOtherGroups: past 200 queue and kind pairs, the table
// shows the 200 busiest, busiest first, and a last row that sums and
// counts the rest.
func TestMetricsPageOtherGroups(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		s := serve(t, db.Queue(t), dashboard.Options{})
		var rows []string
		for i := range 203 {
			rows = append(rows, fmt.Sprintf("(%d, 'q%03d', 'k', %d)", seededMinute()-60, i, i+1))
		}
		db.Exec(t, "INSERT INTO jobs_metrics (bucket, queue, kind, processed) VALUES "+strings.Join(rows, ", "))
		db.RollUpMetrics(t)
		for _, page := range []string{"metrics", "metrics?range=week"} {
			body := s.page(page)
			if n := strings.Count(body, `<tr data-queue=`); n != 200 {
				t.Errorf("%s: %d rows of pairs, want 200", page, n)
			}
			if i, j := strings.Index(body, `data-queue="q202"`), strings.Index(body, `data-queue="q201"`); i < 0 || j < i {
				t.Errorf("%s: the busiest pair (q202) is not first", page)
			}
			if strings.Contains(body, `data-queue="q002"`) {
				t.Errorf("%s: a quiet pair (q002) is in the table", page)
			}
			at := strings.Index(body, `id="metrics-other"`)
			if at < 0 {
				t.Fatalf("%s: no row for the other pairs", page)
			}
			other := body[at:]
			wantContains(t, page+" other row", other, "3 other queue and kind pairs", `<td class="n processed">6</td>`)
			if got := num(t, body, "m-processed"); got != fmt.Sprint(203*204/2) {
				t.Errorf("%s: %s processed in all, want %d", page, got, 203*204/2)
			}
		}
	})
}

// TestWorkersPage lists the heartbeat rows with their units.
func TestWorkersPage(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		s := serve(t, q, dashboard.Options{ReadOnly: true})
		if body := s.page("workers"); !strings.Contains(body, `id="no-workers"`) {
			t.Errorf("no heartbeat rows: the page does not say so: %.500s", body)
		}
		seedOperatorView(t, db)
		body := s.page("workers")
		wantContains(t, "workers page", body, "app-1.example.internal", "app-2.example.internal", "4242", "v1.4.0",
			`<a href="jobs?queue=reports">reports</a>`, "Running (jobs)", "2 workers, running 3 jobs on 10 goroutines")
		if strings.Index(body, "app-1.example.internal") > strings.Index(body, "app-2.example.internal") {
			t.Errorf("the workers are not sorted by host")
		}
		if !strings.Contains(body, `href="workers" class="active"`) {
			t.Errorf("the nav does not mark the workers page")
		}
	})
}

// TestOperatorTablesMissing: on tables migrated before the metrics and
// workers tables, those pages say to migrate, and the queues page still
// shows its counts.
func TestOperatorTablesMissing(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		s := serve(t, q, dashboard.Options{})
		push(t, q, dbqueue.NewJob{Name: "send-mail", Queue: "mail"})
		db.Exec(t, "DROP TABLE jobs_metrics")
		db.Exec(t, "DROP TABLE jobs_workers")
		for _, page := range []string{"metrics", "workers"} {
			code, body := s.get(page)
			if code != http.StatusInternalServerError || !strings.Contains(body, "migrate") || !strings.Contains(body, " up") {
				t.Errorf("%s without its table: %d, want 500 saying to run migrate up: %.400s", page, code, body)
			}
		}
		body := s.page("")
		wantContains(t, "queues page without the metrics table", body, `data-queue="mail"`, "metrics unavailable", "migrate")
	})
}

// TestQueuesPaged: the queues page lists 100 queues a page, by name, and
// the refresh returns the same page.
func TestQueuesPaged(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		s := serve(t, q, dashboard.Options{})
		jobs := make([]dbqueue.NewJob, 250)
		for i := range jobs {
			jobs[i] = dbqueue.NewJob{Name: "n", Queue: fmt.Sprintf("q%03d", i)}
		}
		if _, err := q.PushMany(ctx, jobs); err != nil {
			t.Fatal(err)
		}
		rows := regexp.MustCompile(`<tr data-queue="([^"]*)"`)
		body := s.page("")
		got := rows.FindAllStringSubmatch(body, -1)
		// The default queue is listed too: 251 in all.
		if len(got) != 100 || got[0][1] != "default" || got[99][1] != "q098" {
			t.Fatalf("first page: %d rows, from %v", len(got), got[:min(2, len(got))])
		}
		wantContains(t, "first page", body, "100 on this page, more after", `href="?after=q098"`)
		body = s.page("?after=q098")
		got = rows.FindAllStringSubmatch(body, -1)
		if len(got) != 100 || got[0][1] != "q099" {
			t.Fatalf("second page: %d rows, from %v", len(got), got[:min(1, len(got))])
		}
		body = s.page("?after=q198")
		got = rows.FindAllStringSubmatch(body, -1)
		if len(got) != 51 || got[50][1] != "q249" || strings.Contains(body, `id="next-queues"`) {
			t.Fatalf("last page: %d rows, a next link: %v", len(got), strings.Contains(body, `id="next-queues"`))
		}
		st := s.stats()
		if len(st.Queues) != 100 {
			t.Errorf("api/stats: %d queues, want a page of 100", len(st.Queues))
		}
		// Following next from the first page lists every queue once, in
		// order, and stops.
		var walked []string
		for after, pages := "", 0; ; pages++ {
			if pages > 5 {
				t.Fatalf("more than 5 pages; walked %d names", len(walked))
			}
			var page struct {
				Queues []dashboard.QueueStats
				Count  int
				Next   string
			}
			if err := json.Unmarshal([]byte(s.page("api/stats?after="+url.QueryEscape(after))), &page); err != nil {
				t.Fatal(err)
			}
			if page.Count != len(page.Queues) {
				t.Errorf("count %d for a page of %d", page.Count, len(page.Queues))
			}
			for _, q := range page.Queues {
				walked = append(walked, q.Name)
			}
			if page.Next == "" {
				break
			}
			after = page.Next
		}
		want := []string{"default"}
		for i := range 250 {
			want = append(want, fmt.Sprintf("q%03d", i))
		}
		if !slices.Equal(walked, want) {
			t.Errorf("walked %d names, want %d in order, each once: %v…", len(walked), len(want), walked[:min(5, len(walked))])
		}
	})
}
