package periodic_test

import (
	"testing"
	"time"

	"github.com/dbqueue/dbqueue/periodic"
)

// FuzzCron: any string either is refused or gives a schedule whose ticks,
// stepped one from the other as a scheduler does, from a fixed instant on
// a daylight-saving day, strictly increase, come within the horizon, and
// take little time to compute; nothing panics or hangs. Seeds are in
// testdata/fuzz/FuzzCron.
func FuzzCron(f *testing.F) {
	for _, seed := range []string{
		"* * * * *", "0 3 * * *", "*/5 * * * *", "0 0 30 2 *", "0 0 29 2 *",
		"CRON_TZ=America/New_York 30 1 * * *", "CRON_TZ=Australia/Sydney 30 2 * * *",
		"TZ=Pacific/Apia 0 * * * *", "@hourly", "@every 1s", "", "61 * * * *",
	} {
		f.Add(seed)
	}
	from := time.Date(2026, 11, 1, 5, 45, 0, 0, time.UTC) // 01:45 EDT, before New York turns back
	f.Fuzz(func(t *testing.T, expr string) {
		s, err := periodic.Cron(expr)
		if err != nil {
			return
		}
		if s.String() != expr {
			t.Errorf("Cron(%q).String() = %q", expr, s.String())
		}
		start := time.Now()
		prev := from
		for range 200 {
			next := s.Next(prev)
			if next.IsZero() {
				break // none left: the scheduler stops the job
			}
			if !next.After(prev) {
				t.Fatalf("Cron(%q): tick %v after %v does not move forward", expr, next, prev)
			}
			if next.Sub(prev) > 11*366*24*time.Hour {
				t.Fatalf("Cron(%q): tick %v is more than ten years after %v", expr, next, prev)
			}
			prev = next
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("Cron(%q): 200 ticks took %v", expr, d)
		}
	})
}
