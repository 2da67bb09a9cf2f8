package periodic_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/periodic"
)

// runSideBySide runs each job in a scheduler of its own, on a queue of its
// own from open (a process each: the old definition and the new one during
// a rolling deploy), until the test ends, and returns how many times each
// was asked for a job to push.
func runSideBySide(t *testing.T, open func() *dbqueue.Queue, jobs ...periodic.Job) []*atomic.Int64 {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	tries := make([]*atomic.Int64, len(jobs))
	for i, j := range jobs {
		n := &atomic.Int64{}
		tries[i] = n
		build := j.New
		j.New = func(tick time.Time) dbqueue.NewJob {
			n.Add(1)
			return build(tick)
		}
		s, err := periodic.New(open(), []periodic.Job{j}, periodic.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Run(ctx); err != nil {
				t.Errorf("Run: %v", err)
			}
		}()
	}
	return tries
}

// pushedTicks counts the jobs pushed for each tick, on every queue: each
// job's data holds its tick as "tick".
func pushedTicks(t *testing.T, db *dbtest.DB) map[int64]int {
	t.Helper()
	rows, err := db.SQL.Query("SELECT payload FROM jobs")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int64]int{}
	for rows.Next() {
		var raw []byte
		if err := rows.Scan(&raw); err != nil {
			t.Fatal(err)
		}
		p, err := dbqueue.DecodePayload(raw)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			Tick int64 `json:"tick"`
		}
		if err := json.Unmarshal(p.Data, &d); err != nil {
			t.Fatal(err)
		}
		out[d.Tick]++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// A rolling deploy runs the old and the new definition of a schedule at
// once, against one database. Whatever changed — the schedule's name, its
// interval, or the job it pushes — no tick is pushed twice, and both
// processes take part.
func TestRollingDeployPushesEachTickOnce(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs for about 6s")
	}
	job := func(name, queue string, extra map[string]any) func(time.Time) dbqueue.NewJob {
		return func(tick time.Time) dbqueue.NewJob {
			data := map[string]any{"tick": tick.Unix()}
			for k, v := range extra {
				data[k] = v
			}
			return dbqueue.NewJob{Name: name, Queue: queue, Data: data}
		}
	}
	cases := []struct {
		name     string
		old, new periodic.Job
	}{
		{"renamed",
			periodic.Job{Name: "report", Schedule: periodic.Every(time.Second), New: job("report", "", nil)},
			periodic.Job{Name: "nightly-report", Schedule: periodic.Every(time.Second), New: job("report", "", nil)}},
		{"interval changed",
			periodic.Job{Name: "report", Schedule: periodic.Every(time.Second), New: job("report", "", nil)},
			periodic.Job{Name: "report", Schedule: periodic.Every(2 * time.Second), New: job("report", "", nil)}},
		{"job, queue and data changed",
			periodic.Job{Name: "report", Schedule: periodic.Every(time.Second), New: job("report", "", nil)},
			periodic.Job{Name: "report", Schedule: periodic.Every(time.Second), New: job("report-v2", "reports", map[string]any{"v": 2})}},
	}
	// Each case on each dialect has its own database, so all nine wait
	// out their six ticks at once.
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
				tries := runSideBySide(t, func() *dbqueue.Queue { return db.Queue(t) }, c.old, c.new)
				eachTickOnce(t, db, tries)
			})
		})
	}
}

// eachTickOnce waits for six ticks, pushed while every scheduler tried,
// and checks that none was pushed twice.
func eachTickOnce(t *testing.T, db *dbtest.DB, tries []*atomic.Int64) {
	t.Helper()
	var got map[int64]int
	if !dbtest.Until(20*time.Second, func() bool {
		got = pushedTicks(t, db)
		all := true
		for _, n := range tries {
			all = all && n.Load() > 0
		}
		return len(got) >= 6 && all
	}) {
		t.Fatalf("after 20s: %d ticks pushed, want 6 with every scheduler trying", len(got))
	}
	var list []int64
	for tick, n := range got {
		list = append(list, tick)
		if n != 1 {
			t.Errorf("tick %v pushed %d times, want once", time.Unix(tick, 0).UTC(), n)
		}
	}
	sort.Slice(list, func(i, j int) bool { return list[i] < list[j] })
	t.Logf("ticks %v", list)
}

// A MySQL DSN with clientFoundRows=true makes an INSERT that met a
// duplicate key report one row, as if it had inserted. Two processes on
// such a DSN, running one schedule, still push each tick once.
func TestTickLocksWithClientFoundRows(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs for about 6s")
	}
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		dsn := db.DSN
		if db.Dialect == dbqueue.MySQL {
			sep := "?"
			if strings.Contains(dsn, "?") {
				sep = "&"
			}
			dsn += sep + "clientFoundRows=true"
		}
		open := func() *dbqueue.Queue {
			q, err := dbqueue.Open(context.Background(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { q.Close() })
			return q
		}
		job := periodic.Job{Name: "report", Schedule: periodic.Every(time.Second), New: func(tick time.Time) dbqueue.NewJob {
			return dbqueue.NewJob{Name: "report", Data: map[string]int64{"tick": tick.Unix()}}
		}}
		eachTickOnce(t, db, runSideBySide(t, open, job, job))
	})
}
