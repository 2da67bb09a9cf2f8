package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/dashboard"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// axeScript reads axe-core's axe.min.js, which .ci/install-axe puts in
// testdata from npm. Without it the audit skips, except under CI.
func axeScript(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", "axe.min.js"))
	if err != nil {
		msg := "no testdata/axe.min.js (run bash .ci/install-axe): the accessibility audit does not run"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return string(src)
}

// seededMinute is the start of the current minute, the newest that
// seedOperatorView writes.
func seededMinute() int64 { return time.Now().Unix() / 60 * 60 }

// seedOperatorView writes what workers record, as they would: a half hour
// of metrics for two queues and three kinds, and two heartbeat rows. It
// returns the jobs processed in all.
func seedOperatorView(t *testing.T, db *dbtest.DB) (processedInAll int) {
	t.Helper()
	now := seededMinute()
	var rows []string
	for i := range 30 {
		for j, qk := range [][2]string{{"mail", "send-mail"}, {"mail", "digest"}, {"reports", "build-report"}} {
			processed := 20 + (i*7+j*5)%30
			processedInAll += processed
			rows = append(rows, fmt.Sprintf("(%d, '%s', '%s', %d, %d, %d, %d, %d, %d, %d)",
				now-int64(60*i), qk[0], qk[1], processed, (i+j)%4/3, (i*j)%3/2,
				processed/2, processed-processed/2, processed-2, 2))
		}
	}
	db.Exec(t, "INSERT INTO jobs_metrics (bucket, queue, kind, processed, failed, released, rt09, rt11, wt00, wt03) VALUES "+
		strings.Join(rows, ", "))
	db.RollUpMetrics(t)
	started := time.Now().Add(-3 * time.Hour).Unix()
	seen := time.Now().Unix()
	db.Exec(t, fmt.Sprintf("INSERT INTO jobs_workers (id, name, host, pid, version, queues, concurrency, running, processed, started_at, last_seen, expires_at) VALUES "+
		"('w1', 'default', 'app-1.example.internal', 4242, 'v1.4.0', '[\"mail\",\"reports\"]', 8, 3, 12873, %d, %d, %d), "+
		"('w2', 'reports', 'app-2.example.internal', 917, 'v1.4.0', '[\"reports\"]', 2, 0, 311, %d, %d, %d)",
		started, seen, seen+3600, started+600, seen-4, seen+3600))
	db.Exec(t, fmt.Sprintf("INSERT INTO jobs_schedules (schedule_key, name, spec, queue, job, next_tick, last_tick, last_job_id, last_pushed_at, seen_at) VALUES "+
		"('seeded', 'nightly-digest', '0 3 * * *', 'mail', 'digest', %d, %d, 7, %d, %d)", seen+3600, seen-82800, seen-82800, seen-30))
	return processedInAll
}

// TestBrowserAudit opens every page of the dashboard in headless Chromium,
// as a desktop and as a phone (390×844), and fails on what a person would
// trip over: a serious or critical axe-core accessibility violation, a
// page wider than the phone's screen, a nav link off screen or covered.
// It also clicks through the actions the other browser test does not:
// pause and resume, run now, cancel, retry all, delete one, delete all.
// With DBQUEUE_SCREENSHOTS=dir it writes the metrics, workers and phone
// screenshots.
func TestBrowserAudit(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no browser")
	}
	axe := axeScript(t)
	browser := startBrowser(t)
	shots := os.Getenv(EnvScreenshots)
	db := dbtest.New(t, dbqueue.SQLite) // the markup is the same on every database
	q := db.Queue(t)
	_, base := mounted(t, q, dashboard.Options{Interval: 200 * time.Millisecond, Queues: []string{"mail", "reports"}})

	seedOperatorView(t, db)
	for i := range 3 {
		push(t, q, dbqueue.NewJob{Name: "send-mail", Queue: "mail", Data: map[string]any{"to": fmt.Sprintf("user%d@example.com", i)}})
	}
	delayed := push(t, q, dbqueue.NewJob{Name: "digest", Queue: "mail", Delay: time.Hour, Data: map[string]string{"period": "weekly"}})
	report := push(t, q, dbqueue.NewJob{Name: "build-report", Queue: "reports", Delay: 2 * time.Hour, Data: map[string]int{"report": 7}})
	uuid := failJob(t, q, "mail", "charge-card", "card declined: insufficient funds\n  at billing.Charge (billing/charge.go:41)")
	failJob(t, q, "reports", "build-report", "pdf: font not found")

	pages := []string{
		"", "jobs", "jobs?state=delayed", fmt.Sprintf("job?id=%d", delayed), "failed", "failed?queue=mail",
		"failed-job?uuid=" + uuid, "metrics", "metrics?range=day", "metrics?range=week&queue=mail",
		"metrics?kind=nothing-recorded", "workers", "nowhere",
		"search", "search?in=jobs&name=send-mail", "search?in=failed&text=declined", "search?in=jobs&queue=mail&text=user1",
	}
	tab, closeTab := chromedp.NewContext(browser)
	defer closeTab()
	for _, page := range pages {
		t.Run("page="+page, func(t *testing.T) {
			do(t, tab, "desktop", chromedp.EmulateViewport(1280, 860), chromedp.Navigate(base+page))
			waitFor(t, tab, "the page", `document.readyState === "complete" && document.querySelector("main") !== null`)
			for _, scheme := range []string{"light", "dark"} {
				do(t, tab, scheme, colorScheme(scheme))
				runAxe(t, tab, axe, page+" ("+scheme+")")
			}
			do(t, tab, "phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile), chromedp.Navigate(base+page))
			waitFor(t, tab, "the page on a phone", `document.readyState === "complete" && document.querySelector("main") !== null`)
			checkPhone(t, tab, page)
		})
	}

	// The actions, clicked as a person would (confirmations accepted), and
	// the screenshots, in the light scheme.
	do(t, tab, "light", colorScheme("light"))
	do(t, tab, "desktop", chromedp.EmulateViewport(1280, 860), chromedp.Navigate(base))
	waitFor(t, tab, "the queues", cell("mail", "pending")+` === "3"`)
	clickAndLoad(t, tab, "pause mail", `tr[data-queue="mail"] button[value="pause"]`)
	waitFor(t, tab, "mail paused", `document.querySelector('tr[data-queue="mail"] .paused') !== null && document.querySelector("#flash") !== null`)
	if p, err := q.Paused(ctx, "mail"); err != nil || !p {
		t.Fatalf("after a click on Pause: paused %v, %v", p, err)
	}
	clickAndLoad(t, tab, "resume mail", `tr[data-queue="mail"] button[value="resume"]`)
	waitFor(t, tab, "mail running", `document.querySelector('tr[data-queue="mail"] button[value="pause"]') !== null`)

	do(t, tab, "the delayed jobs", chromedp.Navigate(base+"jobs?state=delayed"))
	acceptConfirms(t, tab)
	clickAndLoad(t, tab, "run now", fmt.Sprintf(`tr[data-id="%d"] button[value="run-now"]`, delayed))
	if j, err := q.Job(ctx, delayed); err != nil || j.State != dbqueue.JobPending {
		t.Fatalf("after Run now: %+v, %v; want it pending", j, err)
	}
	acceptConfirms(t, tab)
	clickAndLoad(t, tab, "cancel", fmt.Sprintf(`tr[data-id="%d"] button[value="cancel"]`, report))
	if _, err := q.Job(ctx, report); err == nil {
		t.Fatalf("job %d still there after Cancel", report)
	}

	do(t, tab, "the failed jobs", chromedp.Navigate(base+"failed"))
	acceptConfirms(t, tab)
	clickAndLoad(t, tab, "delete one", fmt.Sprintf(`tr[data-uuid="%s"] button.forget`, uuid))
	if got := failedUUIDs(t, q); len(got) != 1 {
		t.Fatalf("after Delete: failed jobs %v, want 1 left", got)
	}
	acceptConfirms(t, tab)
	clickAndLoad(t, tab, "retry all", "#retry-all")
	if got := failedUUIDs(t, q); len(got) != 0 {
		t.Fatalf("after Retry all: failed jobs %v, want none", got)
	}
	failJob(t, q, "mail", "charge-card", "card declined again")
	do(t, tab, "the failed jobs", chromedp.Navigate(base+"failed"))
	acceptConfirms(t, tab)
	clickAndLoad(t, tab, "delete all", "#flush")
	waitFor(t, tab, "an empty list", `document.querySelector("#no-failed") !== null`)
	if got := failedUUIDs(t, q); len(got) != 0 {
		t.Fatalf("after Delete all: failed jobs %v, want none", got)
	}

	// The recorded pages show what was recorded.
	do(t, tab, "metrics", chromedp.Navigate(base+"metrics"))
	waitFor(t, tab, "recorded throughput", `document.querySelectorAll("#m-throughput polyline").length === 3 && `+
		`document.querySelector('#metrics-groups tr[data-kind="send-mail"]') !== null`)
	if shots != "" {
		screenshot(t, tab, shots, "dashboard-metrics.png")
	}
	do(t, tab, "workers", chromedp.Navigate(base+"workers"))
	waitFor(t, tab, "two workers", `document.querySelectorAll("#workers tbody tr").length === 2 && `+
		text("#workers")+`.includes("app-1.example.internal")`)
	if shots != "" {
		screenshot(t, tab, shots, "dashboard-workers.png")
		do(t, tab, "phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile), chromedp.Navigate(base))
		waitFor(t, tab, "a refresh", `document.body.dataset.updated`)
		png, err := chromedp.Run(tab, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(shots, "dashboard-phone.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// colorScheme makes the page see prefers-color-scheme as scheme.
func colorScheme(scheme string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}})
		return err
	})
}

// acceptConfirms makes the page's confirm() dialogs say yes, as the
// person who clicks a dangerous button then does.
func acceptConfirms(t *testing.T, tab context.Context) {
	t.Helper()
	do(t, tab, "accept confirmations", chromedp.Evaluate[chromedp.Void](`window.confirm = function () { return true; }`))
}

// violation is an axe-core result, cut to what a failure message needs.
type violation struct {
	ID, Impact, Help string
	Nodes            []string
}

// runAxe runs axe-core on the page and fails on serious and critical
// violations.
func runAxe(t *testing.T, tab context.Context, axe, page string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 60*time.Second)
	defer cancel()
	script := axe + `;
axe.run(document, {resultTypes: ["violations"]}).then(function (r) {
  return JSON.stringify(r.violations.filter(function (v) { return v.impact === "serious" || v.impact === "critical"; })
    .map(function (v) { return {ID: v.id, Impact: v.impact, Help: v.help,
      Nodes: v.nodes.slice(0, 4).map(function (n) { return n.target.join(" ") + " — " + n.failureSummary; })}; }));
})`
	out, err := chromedp.Run(ctx, chromedp.Evaluate[string](script, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("axe on %q: %v", page, err)
	}
	var vs []violation
	if err := json.Unmarshal([]byte(out), &vs); err != nil {
		t.Fatalf("axe on %q: %v: %s", page, err, out)
	}
	for _, v := range vs {
		t.Errorf("page %q: axe %s (%s): %s\n  %s", page, v.ID, v.Impact, v.Help, strings.Join(v.Nodes, "\n  "))
	}
}

// checkPhone fails when the page is wider than the phone's screen, or a
// nav link is off screen or under something else.
func checkPhone(t *testing.T, tab context.Context, page string) {
	t.Helper()
	out, err := chromedp.Run(tab, chromedp.Evaluate[string](`(function () {
  var problems = [];
  var w = document.documentElement.clientWidth;
  if (document.documentElement.scrollWidth > w) {
    var wide = [];
    document.querySelectorAll("body *").forEach(function (e) {
      var r = e.getBoundingClientRect();
      if (r.right > w + 1 && !e.closest(".scroll, pre")) wide.push(e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") + (e.className && e.className.baseVal === undefined ? "." + e.className : "") + " right=" + Math.round(r.right));
    });
    problems.push("the page is " + document.documentElement.scrollWidth + "px wide on a " + w + "px screen: " + wide.slice(0, 5).join(", "));
  }
  document.querySelectorAll("header nav a").forEach(function (a) {
    var r = a.getBoundingClientRect();
    if (r.width === 0 || r.left < 0 || r.right > w || r.top < 0) {
      problems.push("nav link " + a.textContent + " is off screen: " + JSON.stringify(r));
      return;
    }
    var hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
    if (hit !== a && !a.contains(hit)) problems.push("nav link " + a.textContent + " is covered by " + (hit ? hit.tagName : "nothing"));
    if (r.height < 24) problems.push("nav link " + a.textContent + " is " + r.height + "px tall: too small to tap");
  });
  return problems.join("\n");
})()`))
	if err != nil {
		t.Fatalf("phone check of %q: %v", page, err)
	}
	if out != "" {
		t.Errorf("page %q at 390×844:\n%s", page, out)
	}
}
