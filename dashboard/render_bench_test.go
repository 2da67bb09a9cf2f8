package dashboard

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// BenchmarkRender renders each page on a large table, on every dialect:
//
//	go test ./dashboard -run '^$' -bench Render -benchtime 10x
//
// "queues10k" holds 10,000 queues of 3 jobs each and 10,000 failed jobs;
// "jobs1M" holds 1,000,000 jobs in 4 queues (7 in 10 pending, 2 delayed,
// 1 reserved) and 200,000 failed jobs. Every iteration takes a fresh
// sample of the counts (the cost a page pays once per Interval, however
// many pages are open); the target is under 300 ms a page. It runs only
// with -bench: seeding takes a while.
func BenchmarkRender(b *testing.B) {
	sets := []struct {
		name           string
		jobs, queues   int
		failed, fqueue int
		minutes        int // metrics rows: this many minutes back, per queue
	}{
		{"queues10k", 30_000, 10_000, 10_000, 10_000, 1},
		{"jobs1M", 1_000_000, 4, 200_000, 4, 7 * 24 * 60},
	}
	for _, d := range dbtest.Dialects {
		for _, set := range sets {
			b.Run(string(d)+"/"+set.name, func(b *testing.B) {
				db := dbtest.New(b, d)
				seed(b, db, set.jobs, set.queues, set.failed, set.fqueue, set.minutes)
				q := db.Queue(b)
				dash, err := New(q, Options{})
				if err != nil {
					b.Fatal(err)
				}
				// Wait for every sample: the benchmark measures it, not
				// the older sample a page shows while a slow one runs.
				dash.stats.wait = time.Hour
				for _, page := range []string{"", "jobs", "jobs?queue=q1&state=delayed", "failed", "failed?queue=q2", "api/stats",
					"metrics", "metrics?range=week", "workers"} {
					b.Run(strings.NewReplacer("?", "_", "&", "_", "=", "-").Replace("page-"+page), func(b *testing.B) {
						cpu0 := cpuTime()
						for b.Loop() {
							dash.stats.invalidate()
							get(b, dash, page)
						}
						// The machine may be shared: the process's CPU time per
						// page (SQLite's work included, the servers' not) is
						// steadier than the wall time.
						b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
					})
				}
			})
		}
	}
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// get renders a page and fails on anything but 200.
func get(b *testing.B, h http.Handler, page string) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1/"+page, nil))
	if rec.Code != http.StatusOK {
		b.Fatalf("GET %s: %d %.300s", page, rec.Code, rec.Body.String())
	}
	io.Copy(io.Discard, rec.Body)
}

// seed bulk-inserts jobs and failed jobs with INSERT … SELECT over a
// generated series of numbers: the fastest insert every dialect has.
func seed(b *testing.B, db *dbtest.DB, jobs, queues, failedJobs, failedQueues, minutes int) {
	b.Helper()
	ctx := context.Background()
	// 0 … 10^k-1 from a cross join of digit tables: plain SQL on all three.
	digits := "(SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 " +
		"UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)"
	series := func(n int) string {
		var from, expr []string
		for i, p := 0, 1; p < n; i, p = i+1, p*10 {
			from = append(from, fmt.Sprintf("%s d%d", digits, i))
			expr = append(expr, fmt.Sprintf("d%d.d*%d", i, p))
		}
		return fmt.Sprintf("(SELECT %s AS n FROM %s) s WHERE n < %d", strings.Join(expr, "+"), strings.Join(from, ", "), n)
	}
	concat := func(a, b string) string {
		if db.Dialect == dbqueue.MySQL {
			return "CONCAT(" + a + ", " + b + ")"
		}
		return a + " || " + b
	}
	name := func(n int) string { return concat("'q'", asText(db.Dialect, fmt.Sprintf("n %% %d", n))) }
	payload := `'{"uuid":"00000000-0000-4000-8000-000000000000","displayName":"bench","job":"bench","maxTries":3,"data":{"n":1}}'`
	now := db.Now()
	stmts := []string{
		"INSERT INTO jobs (queue, payload, attempts, reserved_at, available_at, created_at) SELECT " + name(queues) + ", " + payload + ", " +
			"CASE WHEN n % 10 = 9 THEN 1 ELSE 0 END, " +
			"CASE WHEN n % 10 = 9 THEN " + now + " ELSE NULL END, " +
			"CASE WHEN n % 10 IN (7, 8) THEN " + now + " + 3600 ELSE " + now + " - 60 END, " +
			now + " - 120 FROM " + series(jobs),
		"INSERT INTO failed_jobs (uuid, connection, queue, payload, exception) SELECT " +
			concat("'u'", asText(db.Dialect, "n")) + ", 'database', " +
			name(failedQueues) + ", " + payload + ", 'RuntimeException: bench' FROM " + series(failedJobs),
		// A minute per queue (queues10k) or a week of minutes of 4
		// queues (jobs1M), one kind each, with a runtime and a wait.
		"INSERT INTO jobs_metrics (bucket, queue, kind, processed, failed, released, rt08, wt00) SELECT " +
			"(" + now + " - 60 * " + intDiv(db.Dialect, "n", queues) + ") - (" + now + " % 60), " + name(queues) + ", 'bench', 50, 1, 2, 53, 53 FROM " +
			series(queues*minutes),
	}
	for _, s := range stmts {
		if _, err := db.SQL.ExecContext(ctx, s); err != nil {
			b.Fatalf("seed: %v\n%s", err, s)
		}
	}
	db.RollUpMetrics(b) // the hours workers write beside the minutes
	switch db.Dialect {
	case dbqueue.Postgres:
		db.SQL.ExecContext(ctx, "VACUUM ANALYZE jobs")
		db.SQL.ExecContext(ctx, "VACUUM ANALYZE failed_jobs")
	case dbqueue.MySQL:
		db.SQL.ExecContext(ctx, "ANALYZE TABLE jobs, failed_jobs")
	case dbqueue.SQLite:
		db.SQL.ExecContext(ctx, "ANALYZE")
	}
}

// asText casts an integer expression to text in the dialect.
func asText(d dbqueue.Dialect, expr string) string {
	switch d {
	case dbqueue.Postgres:
		return "CAST(" + expr + " AS text)"
	case dbqueue.MySQL:
		return "CAST(" + expr + " AS CHAR(20))"
	}
	return "CAST(" + expr + " AS TEXT)"
}

// intDiv is expr / n in integers, in the dialect.
func intDiv(d dbqueue.Dialect, expr string, n int) string {
	if d == dbqueue.MySQL {
		return fmt.Sprintf("(%s DIV %d)", expr, n)
	}
	return fmt.Sprintf("(%s / %d)", expr, n)
}
