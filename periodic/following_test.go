package periodic

import (
	"slices"
	"testing"
	"time"
)

// The scheduler steps from tick to tick with following, from the
// database's clock in Unix seconds: across New York's autumn change a
// daily 01:30 comes once, and a wildcard hour comes every real hour.
func TestFollowingAcrossDaylightSaving(t *testing.T) {
	steps := func(expr string, from time.Time, n int) []string {
		s := MustCron(expr)
		var out []string
		u := from.Unix()
		for range n {
			next, ok := following(s, u)
			if !ok {
				t.Fatalf("%s: no tick after %v", expr, time.Unix(u, 0).UTC())
			}
			out = append(out, time.Unix(next, 0).UTC().Format("01-02T15:04"))
			u = next
		}
		return out
	}
	from := time.Date(2026, 10, 31, 12, 0, 0, 0, time.UTC)
	if got, want := steps("CRON_TZ=America/New_York 30 1 * * *", from, 3), []string{"11-01T05:30", "11-02T06:30", "11-03T06:30"}; !slices.Equal(got, want) {
		t.Errorf("daily 01:30: %v, want %v", got, want)
	}
	from = time.Date(2026, 11, 1, 4, 30, 0, 0, time.UTC)
	if got, want := steps("CRON_TZ=America/New_York 0 * * * *", from, 3), []string{"11-01T05:00", "11-01T06:00", "11-01T07:00"}; !slices.Equal(got, want) {
		t.Errorf("hourly: %v, want %v", got, want)
	}
}
