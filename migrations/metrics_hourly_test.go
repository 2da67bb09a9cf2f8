package migrations_test

import (
	"testing"

	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/migrations"
)

// An installation at version 10 with minutes recorded upgrades to 00011:
// the hourly table holds each hour's sums of those minutes, and down
// drops it and leaves the minutes.
func TestUpRollsUpRecordedMinutes(t *testing.T) {
	eachEmpty(t, func(t *testing.T, db *dbtest.DB) {
		migrateBelow(t, db, "00011")
		const hour = 1_800_000_000 / 3600 * 3600
		for _, r := range []struct {
			bucket          int64
			queue           string
			processed, rt23 int64
		}{
			{hour, "mail", 3, 1}, {hour + 60, "mail", 4, 0}, {hour + 3540, "mail", 5, 2},
			{hour + 3600, "mail", 7, 0}, {hour + 60, "MAIL", 11, 0},
		} {
			db.Exec(t, "INSERT INTO jobs_metrics (bucket, queue, kind, processed, rt23) VALUES (?, ?, 'k', ?, ?)", r.bucket, r.queue, r.processed, r.rt23)
		}
		m, err := migrations.New(db.SQL, db.Dialect, migrations.WithLogger(nil))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Up(ctx); err != nil {
			t.Fatal(err)
		}
		for _, w := range []struct {
			bucket          int64
			queue           string
			processed, rt23 int
		}{{hour, "mail", 12, 3}, {hour + 3600, "mail", 7, 0}, {hour, "MAIL", 11, 0}} {
			if n := db.Count(t, "SELECT processed FROM jobs_metrics_hourly WHERE bucket = ? AND queue = ?", w.bucket, w.queue); n != w.processed {
				t.Errorf("hour %d of %q: %d processed, want %d", w.bucket, w.queue, n, w.processed)
			}
			if n := db.Count(t, "SELECT rt23 FROM jobs_metrics_hourly WHERE bucket = ? AND queue = ?", w.bucket, w.queue); n != w.rt23 {
				t.Errorf("hour %d of %q: rt23 %d, want %d", w.bucket, w.queue, n, w.rt23)
			}
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs_metrics_hourly"); n != 3 {
			t.Errorf("%d hourly rows, want 3", n)
		}
		// Down to 00010: the later ones first, then 00011.
		downBelow(t, m, 11)
		wantTables(t, db, false, "jobs_metrics_hourly")
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs_metrics"); n != 5 {
			t.Errorf("down left %d minutes, want 5", n)
		}
	})
}
