package main

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/worker"
)

// `dbqueue stats` reads what a real worker recorded: per queue and kind,
// the counts, the rate over the window and percentiles that fall in the
// histogram bucket of the true value, in the table and as JSON, over an
// hour (the minutes), a day and a week (the hours the worker wrote beside
// them).
func TestStatsFromAWorkerRun(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		ctx := context.Background()
		q := db.Queue(t)
		pushJob := func(job dbqueue.NewJob) {
			t.Helper()
			if _, err := q.Push(ctx, job); err != nil {
				t.Fatal(err)
			}
		}
		for range 6 {
			pushJob(dbqueue.NewJob{Name: "send-mail", Queue: "mail"})
		}
		for range 2 {
			pushJob(dbqueue.NewJob{Name: "charge", Queue: "billing", MaxTries: 1})
		}
		pushJob(dbqueue.NewJob{Name: "flaky", Queue: "billing", MaxTries: 3, Backoff: []time.Duration{time.Hour}})
		// Every mail job became due 100 s ago: its wait is 100 s (bucket
		// [65.5 s, 131 s) of the histogram).
		db.Exec(t, "UPDATE jobs SET available_at = available_at - 100 WHERE queue = 'mail'")

		w, err := worker.New(q, worker.Options{Queues: []string{"mail", "billing"}, StopWhenEmpty: true})
		if err != nil {
			t.Fatal(err)
		}
		var (
			mu      sync.Mutex
			slowest time.Duration // of the mail handler's runs, as it measured them
		)
		w.Handle("send-mail", func(ctx context.Context, job *dbqueue.Job) error {
			start := time.Now()
			time.Sleep(10 * time.Millisecond) // the runtime measured: at least 10 ms, bucket [8 ms, 16 ms) or above
			mu.Lock()
			slowest = max(slowest, time.Since(start))
			mu.Unlock()
			return nil
		})
		w.Handle("charge", func(ctx context.Context, job *dbqueue.Job) error { return errors.New("card declined") })
		w.Handle("flaky", func(ctx context.Context, job *dbqueue.Job) error { return errors.New("try again") })
		if err := w.Run(ctx); err != nil { // records its counts as it returns
			t.Fatal(err)
		}

		for _, window := range []string{"1h", "24h", "7d"} {
			r := decode[statsReport](t, must(t, db, "stats", "-window", window, "-json"))
			wantWindow := map[string]float64{"1h": 3600, "24h": 86400, "7d": 7 * 86400}[window]
			if r.Window != wantWindow || !r.Since.Before(r.Until) || r.Until.Sub(r.Since).Seconds() < wantWindow {
				t.Errorf("-window %s: range %v to %v, window %v", window, r.Since, r.Until, r.Window)
			}
			if len(r.Groups) != 3 {
				t.Fatalf("-window %s: groups %+v, want billing/charge, billing/flaky, mail/send-mail", window, r.Groups)
			}
			charge, flaky, mail := r.Groups[0], r.Groups[1], r.Groups[2]
			if charge.Queue != "billing" || charge.Kind != "charge" || charge.Failed != 2 || charge.Processed != 0 || charge.FailureRate != 1 {
				t.Errorf("-window %s: charge %+v", window, charge)
			}
			if flaky.Kind != "flaky" || flaky.Released != 1 || flaky.Processed+flaky.Failed != 0 {
				t.Errorf("-window %s: flaky %+v", window, flaky)
			}
			if mail.Queue != "mail" || mail.Kind != "send-mail" || mail.Processed != 6 || mail.Failed+mail.Released != 0 || mail.FailureRate != 0 {
				t.Errorf("-window %s: mail %+v", window, mail)
			}
			if want := 6 / (wantWindow / 60); mail.PerMinute != want {
				t.Errorf("-window %s: mail per minute %v, want %v", window, mail.PerMinute, want)
			}
			// Every run took at least 10 ms (bucket [8 ms, 16 ms) or above); an
			// estimate is within its bucket, so at most twice the slowest run
			// (a loaded machine oversleeps), plus the worker's own overhead.
			if most := 2*slowest.Seconds() + 0.005; mail.RuntimeP50 < 0.008 || mail.RuntimeP95 > most || mail.RuntimeP50 > mail.RuntimeP95 {
				t.Errorf("-window %s: mail runtime p50 %v p95 %v, want from 8ms to %vs", window, mail.RuntimeP50, mail.RuntimeP95, most)
			}
			if mail.WaitP50 < 65.5 || mail.WaitP95 >= 131.1 {
				t.Errorf("-window %s: mail wait p50 %v p95 %v, want both in [65.5s, 131s)", window, mail.WaitP50, mail.WaitP95)
			}
			if charge.WaitP95 >= 65 {
				t.Errorf("-window %s: charge wait p95 %v: the billing jobs were due at once", window, charge.WaitP95)
			}
			tot := r.Total
			if tot.Processed != 6 || tot.Failed != 2 || tot.Released != 1 || tot.PerMinute != 9/(wantWindow/60) || tot.FailureRate != 0.25 {
				t.Errorf("-window %s: total %+v", window, tot)
			}
		}

		out := must(t, db, "stats")
		for _, want := range []string{"QUEUE", "RUNTIME P50", "WAIT P95", "(all)", "factor of two"} {
			if !strings.Contains(out, want) {
				t.Errorf("stats: no %q in\n%s", want, out)
			}
		}
		lines := strings.Split(out, "\n")
		mailLine := ""
		for _, l := range lines {
			if strings.HasPrefix(l, "mail ") {
				mailLine = l
			}
		}
		if f := strings.Fields(mailLine); len(f) != 11 || f[1] != "send-mail" || f[2] != "6" || f[5] != "0.10" || f[6] != "0.0" ||
			!strings.HasSuffix(f[7], "ms") || !strings.HasSuffix(f[9], "s") {
			t.Errorf("stats: mail line %q", mailLine)
		}

		// -queue and -kind narrow the read.
		r := decode[statsReport](t, must(t, db, "stats", "-queue", "billing", "-json"))
		if len(r.Groups) != 2 || r.Total.Failed != 2 || r.Total.Released != 1 || r.Total.Processed != 0 {
			t.Errorf("stats -queue billing: %+v", r)
		}
		r = decode[statsReport](t, must(t, db, "stats", "-kind", "flaky", "-json"))
		if len(r.Groups) != 1 || r.Groups[0].Kind != "flaky" {
			t.Errorf("stats -kind flaky: %+v", r)
		}
		if out := must(t, db, "stats", "-queue", "nothing"); !strings.Contains(out, "no jobs finished") {
			t.Errorf("stats of an idle queue: %q", out)
		}
		if r := decode[statsReport](t, must(t, db, "stats", "-queue", "nothing", "-json")); r.Groups == nil || len(r.Groups) != 0 || r.Total.Processed != 0 {
			t.Errorf("stats -json of an idle queue: %+v", r)
		}
		for _, bad := range []string{"10s", "0", "week", "-1h", "90d", "xd"} {
			if r := dbq(t, db, "stats", "-window", bad); r.code() != exitUsage {
				t.Errorf("stats -window %s: exit %d (%v), want usage", bad, r.code(), r.err)
			}
		}
	})
}

// Queue and kind names are user text: the table escapes them, the JSON
// keeps them as stored.
func TestStatsEscapesNames(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		db.Exec(t, "INSERT INTO jobs_metrics (bucket, queue, kind, processed) VALUES ("+db.Now()+" - 30, ?, ?, 3)", hostile, hostile)
		if db.Dialect == dbqueue.MySQL {
			db.Exec(t, "UPDATE jobs_metrics SET bucket = bucket - MOD(bucket, 60)")
		} else {
			db.Exec(t, "UPDATE jobs_metrics SET bucket = bucket / 60 * 60")
		}
		out := must(t, db, "stats")
		for _, c := range out {
			if terminalUnsafe(c, true) {
				t.Fatalf("stats printed %U: %q", c, out)
			}
		}
		if !strings.Contains(out, `evil\x1b[2J`) {
			t.Errorf("stats: the name is not shown escaped:\n%s", out)
		}
		r := decode[statsReport](t, must(t, db, "stats", "-json"))
		if len(r.Groups) != 1 || r.Groups[0].Queue != hostile || r.Groups[0].Processed != 3 {
			t.Errorf("stats -json: %+v", r)
		}
	})
}
