package periodic_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/periodic"
)

// Two processes keep one 1s schedule on queues opened with the DSN a user
// wrote, clientFoundRows=true among them on MySQL/MariaDB (the server then
// reports rows matched, not changed): each tick is still pushed once.
func TestTwoSchedulersDSNFlags(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs for about 4s")
	}
	variants := map[dbqueue.Dialect][]string{
		dbqueue.Postgres: {""},
		dbqueue.SQLite:   {""},
		dbqueue.MySQL:    {"", "clientFoundRows=true", "clientFoundRows=true&interpolateParams=false&parseTime=true&loc=Local"},
	}
	for _, d := range dbtest.Dialects {
		for _, params := range variants[d] {
			t.Run(string(d)+"/"+params, func(t *testing.T) {
				t.Parallel()
				db := dbtest.New(t, d)
				dsn := db.DSN
				if params != "" {
					sep := "?"
					if strings.Contains(dsn, "?") {
						sep = "&"
					}
					dsn += sep + params
				}
				runCtx, stop := context.WithCancel(context.Background())
				var wg sync.WaitGroup
				for range 2 {
					q := (&dbtest.DB{Dialect: d, DSN: dsn}).Queue(t)
					s, err := periodic.New(q, []periodic.Job{{
						Name:     "tick",
						Schedule: periodic.Every(time.Second),
						New: func(tick time.Time) dbqueue.NewJob {
							return dbqueue.NewJob{Name: "tick", Data: tickData{Tick: tick.Unix()}}
						},
					}}, periodic.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
					if err != nil {
						t.Fatal(err)
					}
					wg.Go(func() {
						if err := s.Run(runCtx); err != nil {
							t.Errorf("Run: %v", err)
						}
					})
				}
				dbtest.Until(10*time.Second, func() bool { return distinct(ticks(t, db)) >= 3 }) // checked below
				stop()
				wg.Wait()
				got := ticks(t, db)
				if distinct(got) < 3 {
					t.Fatalf("%d ticks pushed in 10s, want at least 3", distinct(got))
				}
				if len(got) != distinct(got) {
					t.Fatalf("ticks pushed: %v; want each tick once", got)
				}
			})
		}
	}
}

func distinct(ts []tickData) int {
	seen := map[int64]bool{}
	for _, d := range ts {
		seen[d.Tick] = true
	}
	return len(seen)
}
