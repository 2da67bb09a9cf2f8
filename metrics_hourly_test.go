package dbqueue_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/internal/hist"
)

// metricsNow reads q's metrics or fails the test.
func metricsNow(t *testing.T, q *dbqueue.Queue, mq dbqueue.MetricsQuery) dbqueue.Metrics {
	t.Helper()
	m, err := q.Metrics(ctx, mq)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// dbNow reads the database clock.
func dbNow(t *testing.T, db *dbtest.DB) int64 {
	t.Helper()
	var now int64
	if err := db.SQL.QueryRow("SELECT " + db.Now()).Scan(&now); err != nil {
		t.Fatal(err)
	}
	return now
}

// A day of writes through the workers' statements (AddMetricsAt: the
// minute's upsert and the hour's, in one transaction), at random minutes,
// the last and first seconds of hours included: every sum of the hourly
// rows equals the same sum of the minutes, column for column (counts and
// both histograms), by step, by group and for the busiest groups. Then
// Queue.Metrics in whole hours reads the hours (it still answers with the
// minutes deleted) and falls back to the minutes where the hourly table
// is missing.
func TestMetricsHourlyMatchesMinutes(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		d, err := dialect.For(string(db.Dialect), dialect.DefaultTables, dialect.MySQLServer{})
		if err != nil {
			t.Fatal(err)
		}
		op := operator(t, db)
		p := pool(t, db.DSN)
		day := dbNow(t, db)/3600*3600 - 30*3600
		rnd := rand.New(rand.NewPCG(1, 2))
		pairs := [][2]string{{"mail", "send"}, {"mail", "digest"}, {"reports", "build"}, {"Mail", "send"}}
		at := func(i int) int64 {
			switch i % 5 {
			case 0:
				return day + int64(rnd.IntN(24))*3600 + 3599 // an hour's last second
			case 1:
				return day + int64(rnd.IntN(24))*3600 // an hour's first
			}
			return day + rnd.Int64N(24*3600)
		}
		for i := range 300 {
			var rows []dialect.MetricRow
			for _, pk := range pairs {
				if rnd.IntN(2) == 0 {
					continue
				}
				r := dialect.MetricRow{Queue: pk[0], Kind: pk[1], Processed: rnd.Int64N(50), Failed: rnd.Int64N(3), Released: rnd.Int64N(2)}
				r.Runtime[rnd.IntN(hist.Buckets)] = rnd.Int64N(40) + 1
				r.Wait[rnd.IntN(hist.Buckets)] = rnd.Int64N(40) + 1
				rows = append(rows, r)
			}
			if err := dialect.AddMetricsAt(ctx, d, p, at(i), rows); err != nil {
				t.Fatal(err)
			}
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs_metrics_hourly"); n < 24 {
			t.Fatalf("%d hourly rows after a day of writes", n)
		}
		for _, step := range []int64{3600, 2 * 3600, 5 * 3600} {
			for _, r := range []dialect.MetricsRange{
				{From: day, To: day + 24*3600, Step: step},
				{From: day + 3600, To: day + 20*3600, Step: step, Queue: "mail"},
				{From: day, To: day + 24*3600, Step: step, Kind: "send"},
				{From: day, To: day + 24*3600, Step: step, Top: 2},
			} {
				hr := r
				hr.Hourly = true
				for _, read := range []struct {
					name string
					sum  func(r dialect.MetricsRange) ([]dialect.MetricSum, error)
				}{
					{"SumMetrics", func(r dialect.MetricsRange) ([]dialect.MetricSum, error) { return op.SumMetrics(ctx, p, r) }},
					{"SumMetricGroups", func(r dialect.MetricsRange) ([]dialect.MetricSum, error) { return op.SumMetricGroups(ctx, p, r) }},
				} {
					minutes, err := read.sum(r)
					if err != nil {
						t.Fatal(err)
					}
					hours, err := read.sum(hr)
					if err != nil {
						t.Fatal(err)
					}
					if len(minutes) == 0 || !reflect.DeepEqual(minutes, hours) {
						t.Fatalf("%s %+v: the hours differ from the minutes:\nminutes %+v\nhours   %+v", read.name, r, minutes, hours)
					}
				}
			}
		}

		q := db.Queue(t)
		mq := dbqueue.MetricsQuery{Since: time.Unix(day, 0), Until: time.Unix(day+24*3600, 0), Step: time.Hour}
		byHour := metricsNow(t, q, mq)
		halves := metricsNow(t, q, dbqueue.MetricsQuery{Since: mq.Since, Until: mq.Until, Step: 30 * time.Minute})
		if len(byHour.Points) != 24 || len(halves.Points) != 48 {
			t.Fatalf("%d hourly points, %d half hours; want 24 and 48", len(byHour.Points), len(halves.Points))
		}
		for i, pt := range byHour.Points {
			a, b := halves.Points[2*i], halves.Points[2*i+1]
			if pt.Processed != a.Processed+b.Processed || pt.Failed != a.Failed+b.Failed || pt.Released != a.Released+b.Released {
				t.Errorf("hour %d: %d/%d/%d, its half hours %d/%d/%d", i, pt.Processed, pt.Failed, pt.Released,
					a.Processed+b.Processed, a.Failed+b.Failed, a.Released+b.Released)
			}
		}
		if byHour.Total != halves.Total || !reflect.DeepEqual(byHour.Groups, halves.Groups) || byHour.Total.Processed == 0 {
			t.Errorf("totals or groups differ: hours %+v, half hours %+v", byHour.Total, halves.Total)
		}

		// Without the hourly table, the same read sums the minutes.
		db.Exec(t, "ALTER TABLE jobs_metrics_hourly RENAME TO jobs_metrics_hourly_away")
		if m := metricsNow(t, q, mq); m.Total != byHour.Total || !reflect.DeepEqual(m.Points, byHour.Points) {
			t.Errorf("without the hourly table: total %+v, want the minutes' %+v", m.Total, byHour.Total)
		}
		db.Exec(t, "ALTER TABLE jobs_metrics_hourly_away RENAME TO jobs_metrics_hourly")

		// With the minutes gone, whole hours still read the hours.
		db.Exec(t, "DELETE FROM jobs_metrics")
		if m := metricsNow(t, q, mq); m.Total != byHour.Total {
			t.Errorf("hourly steps with no minutes: total %+v, want %+v read from the hours", m.Total, byHour.Total)
		}
		if m := metricsNow(t, q, dbqueue.MetricsQuery{Since: mq.Since, Until: mq.Until, Step: 30 * time.Minute}); m.Total.Processed != 0 {
			t.Errorf("half-hour steps with no minutes: %d processed, want 0 (they read minutes)", m.Total.Processed)
		}
	})
}

// A range in whole hours starts and ends on whole hours, so every hour's
// row falls in one step.
func TestMetricsHourlyRangeOnWholeHours(t *testing.T) {
	db := dbtest.New(t, dbqueue.SQLite)
	q := db.Queue(t)
	base := dbNow(t, db)/3600*3600 - 10*3600
	m := metricsNow(t, q, dbqueue.MetricsQuery{Since: time.Unix(base+1800, 0), Until: time.Unix(base+5*3600+60, 0), Step: 2 * time.Hour})
	if !m.Since.Equal(time.Unix(base, 0)) || !m.Until.Equal(time.Unix(base+6*3600, 0)) || len(m.Points) != 3 {
		t.Fatalf("range %v to %v in %d points; want %v to %v in 3", m.Since, m.Until, len(m.Points), time.Unix(base, 0), time.Unix(base+6*3600, 0))
	}
}

// TopGroups keeps the busiest pairs, busiest first, and sums the rest in
// Other; zero keeps every pair sorted by name, as before.
func TestMetricsTopGroups(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		base := dbNow(t, db)/3600*3600 - 3*3600
		finished := []int64{10, 50, 30, 20, 40, 30}
		for i, n := range finished {
			for _, minute := range []int64{0, 61} {
				db.Exec(t, "INSERT INTO jobs_metrics (bucket, queue, kind, processed, failed, released, rt05) VALUES (?, ?, 'k', ?, 1, 1, ?)",
					base+minute*60, fmt.Sprintf("q%d", i), n-2, n)
			}
		}
		db.RollUpMetrics(t)
		for _, step := range []time.Duration{time.Minute, time.Hour} {
			mq := dbqueue.MetricsQuery{Since: time.Unix(base, 0), Until: time.Unix(base+2*3600, 0), Step: step}
			all := metricsNow(t, q, mq)
			mq.TopGroups = 3
			top := metricsNow(t, q, mq)
			var names []string
			for _, g := range top.Groups {
				names = append(names, g.Queue)
			}
			// q2 and q5 tie at 30 each: by name.
			if fmt.Sprint(names) != "[q1 q4 q2]" || top.OtherGroups != 3 {
				t.Fatalf("step %v: top 3 %v with %d others; want [q1 q4 q2] and 3", step, names, top.OtherGroups)
			}
			// q0, q3, q5: 2 × (8 + 18 + 28) processed, 6 failed, 6 released.
			if o := top.Other; o.Processed != 108 || o.Failed != 6 || o.Released != 6 || o.RuntimeP50 == 0 {
				t.Errorf("step %v: other %+v; want 108 processed, 6 failed, 6 released", step, o)
			}
			if top.Total != all.Total || len(all.Groups) != 6 || all.Groups[0].Queue != "q0" || all.OtherGroups != 0 || all.Other.Processed != 0 {
				t.Errorf("step %v: total %+v vs %+v; without TopGroups %d groups from %s, %d others", step, top.Total, all.Total, len(all.Groups), all.Groups[0].Queue, all.OtherGroups)
			}
			mq.TopGroups = 10
			if m := metricsNow(t, q, mq); len(m.Groups) != 6 || m.OtherGroups != 0 || m.Other.Processed != 0 {
				t.Errorf("step %v: TopGroups above the pairs: %d groups, %d others", step, len(m.Groups), m.OtherGroups)
			}
		}
	})
}

// Pruning takes an hour with its last minute: an hour some of whose
// minutes are still kept stays.
func TestPruneMetricsHourly(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		op := operator(t, db)
		now := dbNow(t, db)
		const keep = 7 * 24 * 3600
		// Buckets need not be whole hours to be pruned: a minute's margin
		// either side of the cut keeps the test off the clock's tick.
		cut := now - keep
		gone := cut - 3600 - 60   // its last minute is older than the cut
		straddling := cut - 30*60 // its first minute is older, its last is not
		for _, b := range []int64{gone, straddling} {
			db.Exec(t, "INSERT INTO jobs_metrics_hourly (bucket, queue, kind, processed) VALUES (?, 'q', 'k', 1)", b)
		}
		if _, err := op.PruneMetrics(ctx, pool(t, db.DSN), keep, 100); err != nil {
			t.Fatal(err)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs_metrics_hourly WHERE bucket = ?", gone); n != 0 {
			t.Errorf("the hour that ended before the retention is kept")
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs_metrics_hourly WHERE bucket = ?", straddling); n != 1 {
			t.Errorf("the hour whose last minutes are within the retention went")
		}
	})
}
