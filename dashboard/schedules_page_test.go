package dashboard_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/dbqueue/dbqueue/dashboard"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// TestSchedulesSection: the workers page lists the periodic schedules the
// schedulers recorded, with their state, names that are HTML escaped
// (they are user text); without the schedules table the section says so
// and the workers still show.
func TestSchedulesSection(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		s := serve(t, db.Queue(t), dashboard.Options{ReadOnly: true})
		if body := s.page("workers"); !strings.Contains(body, `id="no-schedules"`) {
			t.Errorf("no schedules: the page does not say so")
		}
		hostile := `<img src=x onerror=alert(1)>`
		now := db.Now()
		insert := "INSERT INTO jobs_schedules (schedule_key, name, spec, queue, job, next_tick, last_tick, last_job_id, last_pushed_at, seen_at) VALUES "
		db.Exec(t, insert+"('k1', 'nightly-report', '0 3 * * *', 'reports', 'build-report', "+now+" + 3600, "+now+" - 82800, 42, "+now+" - 82800, "+now+" - 10)")
		db.Exec(t, insert+"('k2', ?, ?, ?, ?, "+now+" - 600, NULL, NULL, NULL, "+now+" - 3600)", hostile, hostile, hostile, hostile)

		body := s.page("workers")
		wantContains(t, "schedules section", body, "Periodic schedules", `data-schedule="nightly-report"`, "0 3 * * *",
			`<a href="job?id=42">42</a> build-report on <a href="jobs?queue=reports">reports</a>`, `<td class="state">ok</td>`,
			`<td class="state">unseen</td>`, "&lt;img src=x onerror=alert(1)&gt;")
		if strings.Contains(body, "<img src=x") {
			t.Errorf("a schedule named like HTML is not escaped")
		}

		seedOperatorView(t, db)
		db.Exec(t, "DROP TABLE jobs_schedules")
		code, body := s.get("workers")
		if code != http.StatusOK {
			t.Fatalf("workers page without the schedules table: %d %.300s", code, body)
		}
		wantContains(t, "without the schedules table", body, `id="schedules-error"`, "migrate", "app-1.example.internal")
	})
}
