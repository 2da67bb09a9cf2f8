package main

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// `dbqueue schedules` lists the schedules table: each schedule's spec,
// next and last tick, the job pushed, and whether a scheduler keeps it
// (ok), has let a tick pass (late) or has not written it for long
// (unseen); names escaped for the terminal, and as stored in JSON.
func TestSchedulesCommand(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		if out := must(t, db, "schedules"); !strings.Contains(out, "no periodic schedules recorded") {
			t.Errorf("schedules with none: %q", out)
		}
		if out := must(t, db, "schedules", "-json"); strings.TrimSpace(out) != "[]" {
			t.Errorf("schedules -json with none: %q, want []", out)
		}
		now := db.Now()
		insert := "INSERT INTO jobs_schedules (schedule_key, name, spec, queue, job, next_tick, last_tick, last_job_id, last_pushed_at, seen_at) VALUES "
		db.Exec(t, insert+"('k1', 'nightly', '0 3 * * *', 'reports', 'report', "+now+" + 3600, "+now+" - 82800, 42, "+now+" - 82799, "+now+" - 10)")
		db.Exec(t, insert+"('k2', 'stuck', 'every 1m0s', '', '', "+now+" - 600, NULL, NULL, NULL, "+now+" - 60)")
		db.Exec(t, insert+"('k3', ?, 'every 1h0m0s', ?, 'x', "+now+" + 60, "+now+" - 3540, 7, "+now+" - 3540, "+now+" - 7200)", hostile, hostile)

		out := must(t, db, "schedules")
		if !utf8.ValidString(out) {
			t.Fatalf("not UTF-8: %q", out)
		}
		for _, c := range out {
			if terminalUnsafe(c, true) {
				t.Fatalf("schedules printed %U: %q", c, out)
			}
		}
		for _, want := range []string{"nightly", "0 3 * * *", "42 report on reports", "stuck", `evil\x1b[2J`} {
			if !strings.Contains(out, want) {
				t.Errorf("schedules: no %q in\n%s", want, out)
			}
		}
		status := map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
			f := strings.Fields(l)
			name, _, _ := strings.Cut(f[0], `\x1b`) // the hostile name is cut to its first escape
			status[name] = f[len(f)-1]
		}
		if status["nightly"] != "ok" || status["stuck"] != "late" || status["evil"] != "unseen" {
			t.Errorf("statuses %q\n%s", status, out)
		}

		list := decode[[]scheduleRow](t, must(t, db, "schedules", "-json"))
		byName := map[string]scheduleRow{}
		for _, r := range list {
			byName[r.Name] = r
		}
		n, s, h := byName["nightly"], byName["stuck"], byName[hostile]
		if len(list) != 3 || n.Spec != "0 3 * * *" || n.LastJobID != 42 || n.LastQueue != "reports" || n.LastJob != "report" ||
			n.NextTick == nil || n.LastTick == nil || n.NextTick.Sub(*n.LastTick).Seconds() != 86400 || n.Status != "ok" || n.SeenAgo < 10 {
			t.Errorf("nightly: %+v", n)
		}
		if s.Status != "late" || s.LastTick != nil || s.LastPushed != nil || s.LastJobID != 0 {
			t.Errorf("stuck: %+v", s)
		}
		if h.Status != "unseen" || h.LastQueue != hostile || h.SeenAgo < 7200 {
			t.Errorf("the hostile name's row: %+v", h)
		}
	})
}
