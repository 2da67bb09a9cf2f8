package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// monitor's -max-age and -max-failure-rate: exit 3 over each limit, 0
// within, a JSON line per check with -json-lines, and the alert on
// stderr naming the queue and the limit.
func TestMonitorAgeAndFailureRate(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		// "reports" has a job due ten minutes ago; "mail" has no job left
		// (its failures emptied it), and 2 of its 10 ended jobs failed in
		// the last minutes (the 100 failures an hour ago are outside the
		// window).
		db.Exec(t, "INSERT INTO jobs (queue, payload, attempts, available_at, created_at) VALUES ('reports', '{}', 0, "+db.Now()+" - 600, "+db.Now()+" - 600)")
		db.Exec(t, "INSERT INTO jobs_metrics (bucket, queue, kind, processed, failed) VALUES (("+db.Now()+" - 60) / 60 * 60, 'mail', 'send', 8, 2)")
		db.Exec(t, "INSERT INTO jobs_metrics (bucket, queue, kind, processed, failed) VALUES (("+db.Now()+" - 3600) / 60 * 60, 'mail', 'send', 0, 100)")
		if db.Dialect == "mysql" { // MySQL's / is not integer division
			db.Exec(t, "UPDATE jobs_metrics SET bucket = bucket - MOD(bucket, 60)")
		}

		r := dbq(t, db, "monitor", "-max-age", "5m")
		if r.code() != exitThreshold || !strings.Contains(r.errOut, "queue reports: oldest pending job due for 10m") || !strings.Contains(r.out, "ALERT") {
			t.Errorf("monitor -max-age 5m: exit %d, stdout\n%s\nstderr %s", r.code(), r.out, r.errOut)
		}
		if r := dbq(t, db, "monitor", "-max-age", "20m"); r.code() != exitOK || strings.Contains(r.out, "ALERT") {
			t.Errorf("monitor -max-age 20m: exit %d (%v)\n%s", r.code(), r.err, r.out)
		}

		r = dbq(t, db, "monitor", "-max-failure-rate", "0.1", "-window", "5m")
		if r.code() != exitThreshold || !strings.Contains(r.errOut, "queue mail: failure rate 0.200") || !strings.Contains(r.out, "2/10") {
			t.Errorf("monitor -max-failure-rate 0.1: exit %d, stdout\n%s\nstderr %s", r.code(), r.out, r.errOut)
		}
		if r := dbq(t, db, "monitor", "-max-failure-rate", "0.25", "-window", "5m"); r.code() != exitOK {
			t.Errorf("monitor -max-failure-rate 0.25: exit %d (%v)\n%s%s", r.code(), r.err, r.out, r.errOut)
		}
		// Two hours back, the old failures count too.
		if r := dbq(t, db, "monitor", "-max-failure-rate", "0.25", "-window", "2h"); r.code() != exitThreshold {
			t.Errorf("monitor -max-failure-rate 0.25 -window 2h: exit %d (%v)", r.code(), r.err)
		}

		// One JSON line per queue and check.
		r = dbq(t, db, "monitor", "-json-lines", "-max", "0", "-max-age", "5m", "-max-failure-rate", "0.5")
		if r.code() != exitThreshold {
			t.Errorf("monitor -json-lines: exit %d (%v)", r.code(), r.err)
		}
		lines := strings.Split(strings.TrimSpace(r.out), "\n")
		got := map[string]string{}
		for _, l := range lines {
			var ch monitorCheck
			if err := json.Unmarshal([]byte(l), &ch); err != nil {
				t.Fatalf("line %q: %v", l, err)
			}
			got[ch.Queue+" "+ch.Check] = ch.Status
		}
		want := map[string]string{
			"default pending": "OK", "default age": "OK", "default failure_rate": "OK",
			"mail pending": "OK", "mail age": "OK", "mail failure_rate": "OK",
			"reports pending": "ALERT", "reports age": "ALERT", "reports failure_rate": "OK",
		}
		if len(lines) != len(want) {
			t.Errorf("%d lines, want %d:\n%s", len(lines), len(want), r.out)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("check %s: %q, want %q", k, got[k], v)
			}
		}

		// -json keeps its one report, with the checks in it.
		r = dbq(t, db, "monitor", "-json", "-max-failure-rate", "0.1")
		rep := decode[monitorReport](t, r.out)
		if r.code() != exitThreshold || !rep.Alert || len(rep.Checks) != 3 || rep.MaxFailureRate == nil || *rep.Window != 300 {
			t.Errorf("monitor -json -max-failure-rate: exit %d, %+v", r.code(), rep)
		}
		for _, bad := range [][]string{
			{"monitor", "-max-failure-rate", "2"},
			{"monitor", "-window", "10s", "-max-failure-rate", "0.1"},
			{"monitor", "-json", "-json-lines"},
		} {
			if r := dbq(t, db, bad...); r.code() != exitUsage {
				t.Errorf("%q: exit %d (%v), want usage", bad, r.code(), r.err)
			}
		}
	})
}
