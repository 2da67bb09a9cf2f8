package periodic_test

import (
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/periodic"
)

func TestScheduleChecks(t *testing.T) {
	if _, err := periodic.Cron("@every 5s"); err == nil || !strings.Contains(err.Error(), "periodic.Every") {
		t.Errorf("Cron(@every): %v, want a refusal pointing at Every", err)
	}
	if _, err := periodic.Cron("61 * * * *"); err == nil {
		t.Error("Cron accepted minute 61")
	}
	// CRON_TZ moves the ticks; without it they are UTC whatever time.Local is.
	berlin := periodic.MustCron("CRON_TZ=Europe/Berlin 0 3 * * *")
	from := time.Date(2026, 1, 10, 0, 0, 0, 0, time.UTC)
	if got := berlin.Next(from).UTC().Hour(); got != 2 {
		t.Errorf("03:00 Berlin in January is %d:00 UTC, want 2", got)
	}
	if got := periodic.MustCron("0 3 * * *").Next(from.In(time.FixedZone("x", 5*3600))); got.UTC().Hour() != 3 {
		t.Errorf("0 3 * * * ticked at %v, want 03:00 UTC", got)
	}
	// Every: strictly after, aligned to the epoch.
	if got := periodic.Every(10 * time.Second).Next(time.Unix(100, 0)).Unix(); got != 110 {
		t.Errorf("Every(10s).Next(100) = %d, want 110", got)
	}

	q := dbtest.New(t, dbqueue.SQLite).Queue(t)
	newJob := func(time.Time) dbqueue.NewJob { return dbqueue.NewJob{Name: "x"} }
	for _, bad := range [][]periodic.Job{
		{{Name: "a", Schedule: periodic.Every(1500 * time.Millisecond), New: newJob}},
		{{Name: "a", Schedule: periodic.Every(0), New: newJob}},
		{{Name: "", Schedule: periodic.Every(time.Second), New: newJob}},
		{{Name: "a", Schedule: periodic.Every(time.Second), New: newJob}, {Name: "a", Schedule: periodic.Every(time.Minute), New: newJob}},
		{{Name: "a", New: newJob}},
		// A NUL in the name could make two schedules share a lock.
		{{Name: "a\x00every 1s", Schedule: periodic.Every(time.Second), New: newJob}},
	} {
		if _, err := periodic.New(q, bad, periodic.Options{}); err == nil {
			t.Errorf("New accepted %+v", bad)
		}
	}
}
