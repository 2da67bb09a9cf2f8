package dashboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/dashboard"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/worker"
)

// EnvScreenshots names a directory: TestBrowser writes PNG screenshots of
// the pages there (docs/images holds the committed ones).
const EnvScreenshots = "DBQUEUE_SCREENSHOTS"

// chromium finds a Chromium or Chrome binary: $DBQUEUE_CHROMIUM, or one on
// the PATH. Without one the test skips, except under CI, where it fails
// (.ci/install-chromium installs Debian's).
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("DBQUEUE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no chromium on the PATH (apt-get install chromium, or set DBQUEUE_CHROMIUM): the browser test does not run"
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// startBrowser starts one headless browser for the test, closed at its
// end. Each subtest opens its own tab.
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	exe := chromium(t)
	// Not t.TempDir: the browser's helpers may still write in it for a
	// moment after it stops, and t.TempDir fails the test on that.
	dir, err := os.MkdirTemp("", "dbqueue-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.UserDataDir(dir),
		chromedp.NoSandbox, // tests run as root in CI containers
		chromedp.DisableGPU,
		// Keep a browser on a machine without network from calling home.
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("hide-scrollbars", true),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	browser, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
		for range 50 {
			if os.RemoveAll(dir) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	// The first Run starts the browser; it must not carry a timeout.
	start := time.Now()
	defer func() { t.Logf("%s started in %v", exe, time.Since(start).Round(time.Millisecond)) }()
	if _, err := chromedp.Run(browser, chromedp.Evaluate[int](`1`)); err != nil {
		t.Fatalf("start %s: %v", exe, err)
	}
	return browser
}

// TestBrowser drives the dashboard in headless Chromium: the counts follow
// jobs being pushed and worked, and a failed job retried with a click on
// the failed jobs page runs again. With DBQUEUE_SCREENSHOTS=dir it also
// writes screenshots of the pages (on SQLite).
func TestBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no browser")
	}
	browser := startBrowser(t)
	shots := os.Getenv(EnvScreenshots)
	// One dialect at a time: a browser and a worker per dialect in
	// parallel is much for a small CI machine.
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			db := dbtest.New(t, d)
			dir := ""
			if d == dbqueue.SQLite {
				dir = shots
			}
			start := time.Now()
			browse(t, browser, db, dir)
			t.Logf("%s: browser scenario took %v", d, time.Since(start).Round(time.Millisecond))
		})
	}
}

func browse(t *testing.T, browser context.Context, db *dbtest.DB, shots string) {
	q := db.Queue(t)
	srv, base := mounted(t, q, dashboard.Options{Interval: 200 * time.Millisecond})

	tab, closeTab := chromedp.NewContext(browser)
	defer closeTab()
	do(t, tab, "open the queues page", chromedp.EmulateViewport(1280, 860), chromedp.Navigate(base))
	waitFor(t, tab, "the first refresh", `document.body.dataset.updated`)

	// Jobs pushed while the page is open show up in its counts.
	for i := range 6 {
		push(t, q, dbqueue.NewJob{Name: "send-mail", Queue: "mail", Data: map[string]int{"user": i}})
	}
	push(t, q, dbqueue.NewJob{Name: "digest", Queue: "mail", Delay: time.Hour, Data: map[string]string{"period": "weekly"}})
	push(t, q, dbqueue.NewJob{Name: "build-report", Queue: "reports", Delay: time.Hour, Data: map[string]int{"report": 7}})
	waitFor(t, tab, "6 pending jobs", text("#total-pending")+` === "6" && `+cell("mail", "pending")+` === "6"`)
	waitFor(t, tab, "2 delayed jobs", text("#total-delayed")+` === "2"`)

	// A worker works them; the counts fall to zero.
	var flakyRuns atomic.Int32
	ranAgain := make(chan struct{})
	w, err := worker.New(q, worker.Options{
		Queues: []string{"mail"}, Concurrency: 2, Sleep: 20 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler), Name: "browser-test",
		// Record soon, so the pages read what it did.
		MetricsInterval: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	w.Handle("send-mail", func(ctx context.Context, job *dbqueue.Job) error {
		// Some work, so that the page sees the jobs reserved and the
		// charts have a slope.
		select {
		case <-time.After(150 * time.Millisecond):
		case <-ctx.Done():
		}
		return nil
	})
	w.Handle("flaky", func(ctx context.Context, job *dbqueue.Job) error {
		if flakyRuns.Add(1) == 1 {
			return errors.New("smtp: 451 4.7.1 greylisted, try again later\n" +
				"  at mail.(*Client).Send (mail/client.go:88)\n" +
				"  at main.sendWelcome (jobs/welcome.go:31)")
		}
		close(ranAgain)
		return nil
	}, worker.WithTries(1))
	workCtx, stopWorker := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := w.Run(workCtx); err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("worker: %v", err)
		}
	})
	defer func() {
		stopWorker()
		wg.Wait()
	}()
	waitFor(t, tab, "the worker to empty the mail queue",
		text("#total-pending")+` === "0" && `+text("#total-reserved")+` === "0" && `+cell("mail", "pending")+` === "0"`)
	waitFor(t, tab, "a depth line", `document.querySelectorAll("#chart-depth polyline").length > 0`)
	if max := maxProcessed(t, srv.URL+"/admin/queue/api/stats"); max <= 0 {
		t.Errorf("the history shows no processed jobs after 6 were worked")
	}

	// What the worker recorded: its heartbeat on the workers page, its
	// six jobs in the metrics and in the queues page's chart.
	clickAndLoad(t, tab, "open the workers page", `header nav a[href="workers"]`)
	waitFor(t, tab, "the worker's row", `document.querySelectorAll("#workers tbody tr").length === 1 && `+
		text("#workers tbody tr")+`.includes("browser-test") && `+text("#workers tbody tr")+`.includes("mail")`)
	// The worker writes every 100ms: wait for its six jobs in the table,
	// then read the page once.
	for deadline := time.Now().Add(20 * time.Second); ; {
		m, err := q.Metrics(ctx, dbqueue.MetricsQuery{})
		if err != nil {
			t.Fatal(err)
		}
		if m.Total.Processed >= 6 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker recorded %d processed jobs, want 6", m.Total.Processed)
		}
		time.Sleep(50 * time.Millisecond) // polling the table, not synchronising
	}
	clickAndLoad(t, tab, "open the metrics page", `header nav a[href="metrics"]`)
	waitFor(t, tab, "6 processed", text("#m-processed")+` === "6"`)
	waitFor(t, tab, "send-mail's row", `document.querySelector('#metrics-groups tr[data-kind="send-mail"] td.processed').textContent === "6"`)
	do(t, tab, "back to the queues", chromedp.Navigate(base))
	waitFor(t, tab, "the recorded throughput", `Array.from(document.querySelectorAll("#q-throughput tbody tr td:first-of-type")).some(function (td) { return parseFloat(td.textContent) > 0; })`)

	// A job that fails shows up as failed.
	push(t, q, dbqueue.NewJob{Name: "flaky", Queue: "mail", Data: map[string]string{"to": "ann@example.com"}})
	waitFor(t, tab, "1 failed job", text("#total-failed")+` === "1" && `+cell("mail", "failed")+` === "1"`)
	if shots != "" {
		screenshot(t, tab, shots, "dashboard-queues.png")
		do(t, tab, "open the jobs page", chromedp.Navigate(base+"jobs"))
		waitFor(t, tab, "the jobs list", `document.querySelectorAll("tr[data-id]").length === 2`)
		screenshot(t, tab, shots, "dashboard-jobs.png")
		do(t, tab, "back to the queues", chromedp.Navigate(base))
		waitFor(t, tab, "a refresh", `document.body.dataset.updated`)
	}

	// Retry it with a click on the failed jobs page: it runs again.
	clickAndLoad(t, tab, "follow the failed count", "#total-failed")
	waitFor(t, tab, "the failed job's row", `document.querySelector("tr[data-uuid] button.retry") !== null`)
	waitFor(t, tab, "its exception", `document.querySelector("td.exception summary").textContent.includes("greylisted")`)
	if shots != "" {
		do(t, tab, "open the exception", chromedp.Click(chromedp.CSS("td.exception summary")))
		waitFor(t, tab, "the open exception", `document.querySelector("td.exception details").open`)
		screenshot(t, tab, shots, "dashboard-failed.png")
	}
	clickAndLoad(t, tab, "click Retry", "tr[data-uuid] button.retry")
	waitFor(t, tab, "the retry's message and an empty list",
		`document.querySelector("#flash") !== null && document.querySelector("#flash").textContent.includes("Retried") && document.querySelector("#no-failed") !== null`)
	select {
	case <-ranAgain:
	case <-time.After(20 * time.Second):
		t.Fatalf("the retried job did not run again (ran %d times)", flakyRuns.Load())
	}
	do(t, tab, "open the queues page", chromedp.Navigate(base))
	waitFor(t, tab, "no failed and no pending jobs",
		text("#total-failed")+` === "0" && `+text("#total-pending")+` === "0" && `+text("#total-reserved")+` === "0"`)
	if n := flakyRuns.Load(); n != 2 {
		t.Errorf("flaky ran %d times, want 2 (once failing, once after the retry)", n)
	}
}

// mounted serves a dashboard under a prefix, as an application would, and
// returns the server and the dashboard's URL; the server closes when the
// test ends.
func mounted(t *testing.T, q *dbqueue.Queue, opts dashboard.Options) (*httptest.Server, string) {
	t.Helper()
	d, err := dashboard.New(q, opts)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/admin/queue/", http.StripPrefix("/admin/queue", d))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, srv.URL + "/admin/queue/"
}

// text is a JavaScript expression for an element's text.
func text(sel string) string {
	return fmt.Sprintf(`(document.querySelector(%q) || {}).textContent`, sel)
}

// cell is a JavaScript expression for a queue's count in the queues table.
func cell(queue, class string) string {
	return text(fmt.Sprintf(`tr[data-queue=%q] td.%s`, queue, class))
}

func do(t *testing.T, tab context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(tab, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// clickAndLoad clicks an element that loads another page, and waits for
// that page's load event.
func clickAndLoad(t *testing.T, tab context.Context, what, sel string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 20*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(chromedp.CSS(sel)))); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// waitFor polls a JavaScript condition in the page until it holds, and
// fails with the page's text when it does not within 20 seconds.
func waitFor(t *testing.T, tab context.Context, what, cond string) {
	t.Helper()
	_, err := chromedp.Run(tab, chromedp.Poll[bool]("!!("+cond+")",
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(20*time.Second)))
	if err != nil {
		page, _ := chromedp.Run(tab, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		t.Fatalf("waiting for %s (%s): %v\nthe page says:\n%s", what, cond, err, page)
	}
}

func screenshot(t *testing.T, tab context.Context, dir, name string) {
	t.Helper()
	// A short viewport, so the full-page shot ends where the page does.
	do(t, tab, "shrink the viewport", chromedp.EmulateViewport(1280, 200))
	png, err := chromedp.Run(tab, chromedp.FullScreenshot(100)) // 100: PNG
	do(t, tab, "restore the viewport", chromedp.EmulateViewport(1280, 860))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", filepath.Join(dir, name))
}

// maxProcessed is the highest processed rate in the dashboard's history.
func maxProcessed(t *testing.T, url string) float64 {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	var st struct{ History []dashboard.Point }
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatalf("api/stats: %v: %s", err, body)
	}
	best := 0.0
	for _, p := range st.History {
		if p.Processed != nil && *p.Processed > best {
			best = *p.Processed
		}
	}
	return best
}
