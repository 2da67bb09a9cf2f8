package dbqueue_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

func operator(t *testing.T, db *dbtest.DB) dialect.Operator {
	t.Helper()
	d, err := dialect.For(string(db.Dialect), dialect.DefaultTables, dialect.MySQLServer{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// pool opens dsn as the dialect's SQL runs on it.
func pool(t *testing.T, dsn string) sqldb.DB {
	t.Helper()
	db, _, err := dbqueue.OpenSQL(dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return sqldb.SQLDB(db, false)
}

// Two pools (one with MySQL's DSN flags) add to the same minute: the row
// holds the sums. Names that differ only in case or trailing spaces, and
// names of 255 bytes, are rows of their own.
func TestMetricsUpsertAdds(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		op := operator(t, db)
		long := ("Mail é 名前 " + strings.Repeat("q", 255))[:255]
		names := []string{"mail", "Mail", "mail ", long}
		rows := func(n int64) []dialect.MetricRow {
			var out []dialect.MetricRow
			for _, name := range names {
				r := dialect.MetricRow{Queue: name, Kind: name, Processed: n, Failed: 1, Released: 2}
				r.Runtime[3], r.Wait[0] = n, 1
				out = append(out, r)
			}
			return out
		}
		flagged := db.DSN
		if db.Dialect == dbqueue.MySQL {
			flagged = withParams(db.DSN, "clientFoundRows=true&parseTime=true&loc=Local")
		}
		pools := []sqldb.DB{pool(t, db.DSN), pool(t, flagged)}
		for attempt := 0; ; attempt++ {
			db.Exec(t, "DELETE FROM jobs_metrics")
			for i, p := range pools {
				if err := op.AddMetrics(ctx, p, rows(int64(10*(i+1)))); err != nil {
					t.Fatal(err)
				}
			}
			// Two minutes when the writes fell on both sides of one.
			if db.Count(t, "SELECT COUNT(DISTINCT bucket) FROM jobs_metrics") == 1 || attempt == 2 {
				break
			}
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs_metrics"); n != len(names) {
			t.Fatalf("%d rows, want %d: one per name, the two writes added", n, len(names))
		}
		for _, name := range names {
			if n := db.Count(t, "SELECT processed + failed + released + rt03 + wt00 FROM jobs_metrics WHERE queue = ? AND kind = ?", name, name); n != 30+2+4+30+2 {
				t.Errorf("row %q sums to %d, want 68", name, n)
			}
		}
		q := db.Queue(t)
		m, err := q.Metrics(ctx, dbqueue.MetricsQuery{Queue: long})
		if err != nil {
			t.Fatal(err)
		}
		if m.Total.Processed != 30 || m.Total.Failed != 2 || m.Total.Released != 4 || len(m.Groups) != 1 || m.Groups[0].Kind != long {
			t.Fatalf("metrics of the long queue: %+v", m)
		}
		// Bucket 3 is [1ms, 2ms).
		if p := m.Total.RuntimeP50; p < time.Millisecond || p >= 2*time.Millisecond {
			t.Errorf("runtime p50 %v, want within [1ms, 2ms)", p)
		}
		if m, _ := q.Metrics(ctx, dbqueue.MetricsQuery{Queue: "mail "}); m.Total.Processed != 30 {
			t.Errorf("queue %q: %+v, want its own 30", "mail ", m.Total)
		}
	})
}

// Metrics sums minutes into steps, with empty steps present, and filters
// by queue and kind.
func TestMetricsSteps(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		var now int64
		if err := db.SQL.QueryRow("SELECT " + db.Now()).Scan(&now); err != nil {
			t.Fatal(err)
		}
		base := now/60*60 - 3600
		ins := func(minute int, queue, kind string, processed, failed int64) {
			db.Exec(t, "INSERT INTO jobs_metrics (bucket, queue, kind, processed, failed, rt05, wt10) VALUES (?, ?, ?, ?, ?, ?, ?)",
				base+int64(minute)*60, queue, kind, processed, failed, processed, processed)
		}
		ins(0, "a", "x", 1, 0)
		ins(1, "a", "x", 2, 1)
		ins(1, "b", "y", 4, 0)
		ins(5, "a", "y", 8, 0)
		ins(6, "a", "x", 100, 0)  // past Until
		ins(-1, "a", "x", 100, 0) // before Since
		m, err := q.Metrics(ctx, dbqueue.MetricsQuery{Since: time.Unix(base, 0), Until: time.Unix(base+6*60, 0), Step: 2 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		want := []int64{7, 0, 8}
		if len(m.Points) != len(want) || m.Step != 2*time.Minute {
			t.Fatalf("%d points of %v, want 3 of 2m", len(m.Points), m.Step)
		}
		for i, p := range m.Points {
			if p.Processed != want[i] || !p.Start.Equal(time.Unix(base+int64(i)*120, 0)) {
				t.Errorf("point %d: %d processed at %v, want %d at %v", i, p.Processed, p.Start, want[i], time.Unix(base+int64(i)*120, 0))
			}
		}
		if m.Total.Processed != 15 || m.Total.Failed != 1 || len(m.Groups) != 3 {
			t.Fatalf("total %+v, groups %+v", m.Total, m.Groups)
		}
		// Without groups: the same points, the same total, no groups.
		ng, err := q.Metrics(ctx, dbqueue.MetricsQuery{Since: time.Unix(base, 0), Until: time.Unix(base+6*60, 0), Step: 2 * time.Minute, NoGroups: true})
		if err != nil || ng.Total.Processed != 15 || ng.Total.Failed != 1 || len(ng.Groups) != 0 || ng.Points[2].Processed != 8 ||
			ng.Total.WaitP50 != m.Total.WaitP50 {
			t.Fatalf("NoGroups: total %+v, %d groups, %v", ng.Total, len(ng.Groups), err)
		}
		// Bucket 5 is [4ms, 8ms); bucket 10 is [128ms, 256ms).
		if p := m.Points[0].RuntimeP95; p < 4*time.Millisecond || p >= 8*time.Millisecond {
			t.Errorf("runtime p95 %v, want in [4ms, 8ms)", p)
		}
		if p := m.Total.WaitP50; p < 128*time.Millisecond || p >= 256*time.Millisecond {
			t.Errorf("wait p50 %v, want in [128ms, 256ms)", p)
		}
		m, err = q.Metrics(ctx, dbqueue.MetricsQuery{Since: time.Unix(base, 0), Until: time.Unix(base+6*60, 0), Queue: "a", Kind: "x"})
		if err != nil || m.Total.Processed != 3 || len(m.Points) != 6 || m.Points[1].Processed != 2 || m.Total.FailureRate() != 0.25 {
			t.Fatalf("queue a, kind x: %+v, %v", m.Total, err)
		}
		// The default: the last hour up to the database's now.
		if m, err := q.Metrics(ctx, dbqueue.MetricsQuery{}); err != nil || len(m.Points) != 61 {
			t.Fatalf("default range: %d points, %v; want 61 minutes", len(m.Points), err)
		}
		// Whatever second Until falls on (the 59th of a minute is an Until
		// on the next minute's start), a zero Since gives Until's minute
		// and the hour before it.
		for _, until := range []int64{base, base + 1, base + 59} {
			m, err := q.Metrics(ctx, dbqueue.MetricsQuery{Until: time.Unix(until, 0)})
			if err != nil || len(m.Points) != 61 {
				t.Errorf("Until %ds into a minute: %d points, %v; want 61 minutes", until-base, len(m.Points), err)
			}
		}
		for _, c := range []struct {
			mq   dbqueue.MetricsQuery
			want string
		}{
			{dbqueue.MetricsQuery{Window: 30 * 24 * time.Hour}, "raise Step"},
			{dbqueue.MetricsQuery{Since: time.Unix(base, 0), Until: time.Unix(base, 0)}, "not before Until"},
			{dbqueue.MetricsQuery{Step: -time.Minute}, "negative"},
		} {
			if _, err := q.Metrics(ctx, c.mq); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%+v: %v, want an error saying %q", c.mq, err, c.want)
			}
		}
		if _, err := q.Metrics(ctx, dbqueue.MetricsQuery{Window: 7 * 24 * time.Hour, Step: 7 * time.Minute}); err != nil {
			t.Errorf("a week in 7-minute steps: %v", err)
		}
	})
}

// Pruning deletes at most its limit, oldest minutes first, and never a
// minute within the retention.
func TestPruneMetricsBounded(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		op := operator(t, db)
		var now int64
		if err := db.SQL.QueryRow("SELECT " + db.Now()).Scan(&now); err != nil {
			t.Fatal(err)
		}
		const day = 24 * 3600
		for i := range 12 {
			db.Exec(t, "INSERT INTO jobs_metrics (bucket, queue, kind) VALUES (?, 'q', 'k')", now/60*60-8*day-int64(i)*60)
		}
		for i := range 3 {
			db.Exec(t, "INSERT INTO jobs_metrics (bucket, queue, kind) VALUES (?, 'q', 'k')", now/60*60-int64(i)*60)
		}
		pool := pool(t, db.DSN)
		n, err := op.PruneMetrics(ctx, pool, 7*day, 5)
		if err != nil || n != 5 {
			t.Fatalf("first prune: %d, %v; want 5", n, err)
		}
		// The five oldest went.
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs_metrics WHERE bucket < ?", now/60*60-8*day-6*60); n != 0 {
			t.Fatalf("%d of the oldest minutes left", n)
		}
		total := int64(5)
		for {
			n, err := op.PruneMetrics(ctx, pool, 7*day, 5)
			if err != nil {
				t.Fatal(err)
			}
			if n > 5 {
				t.Fatalf("a prune of at most 5 deleted %d", n)
			}
			if n == 0 {
				break
			}
			total += n
		}
		if total != 12 || db.Count(t, "SELECT COUNT(*) FROM jobs_metrics") != 3 {
			t.Fatalf("pruned %d, %d left; want 12 pruned and the 3 recent minutes kept", total, db.Count(t, "SELECT COUNT(*) FROM jobs_metrics"))
		}
	})
}

// Tables migrated before version 9: the read says to migrate.
func TestMetricsMissingTable(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		db.Exec(t, "DROP TABLE jobs_metrics")
		db.Exec(t, "DROP TABLE jobs_workers")
		if _, err := q.Metrics(ctx, dbqueue.MetricsQuery{}); err == nil || !strings.Contains(err.Error(), "migrate") {
			t.Errorf("Metrics without its table: %v; want an error saying to migrate", err)
		}
		if _, err := q.Workers(ctx); err == nil || !strings.Contains(err.Error(), "migrate") {
			t.Errorf("Workers without its table: %v; want an error saying to migrate", err)
		}
	})
}

// digits is a derived table of the ten digits.
const digits = "(SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4" +
	" UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)"

// The metrics reads walk the primary key's range of minutes, not the
// table: a week of minutes of many queues must not be read to sum the
// last five.
func TestMetricsReadUsesBucketRange(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		// A week of minutes for 3 queues and kinds: 30,240 rows.
		fill := map[dbqueue.Dialect]string{
			dbqueue.Postgres: "INSERT INTO jobs_metrics (bucket, queue, kind, processed) SELECT m * 60, 'q' || (m % 3), 'k' || (m % 3), 1 FROM generate_series(1, 30240) AS m",
			// Digits cross-joined: MySQL 8 stops recursion at 1,000 rows.
			dbqueue.MySQL: "INSERT INTO jobs_metrics (bucket, queue, kind, processed) SELECT m * 60, CONCAT('q', m % 3), CONCAT('k', m % 3), 1 FROM" +
				" (SELECT a.d + 10 * b.d + 100 * c.d + 1000 * e.d + 10000 * f.d + 1 AS m FROM " + digits + " a, " + digits + " b, " + digits + " c, " + digits + " e, " + digits + " f) n WHERE m <= 30240",
			dbqueue.SQLite: "INSERT INTO jobs_metrics (bucket, queue, kind, processed) WITH RECURSIVE s(m) AS (SELECT 1 UNION ALL SELECT m + 1 FROM s WHERE m < 30240)" +
				" SELECT m * 60, 'q' || (m % 3), 'k' || (m % 3), 1 FROM s",
		}[db.Dialect]
		db.Exec(t, fill)
		db.Exec(t, map[dbqueue.Dialect]string{dbqueue.Postgres: "ANALYZE jobs_metrics", dbqueue.MySQL: "ANALYZE TABLE jobs_metrics", dbqueue.SQLite: "ANALYZE"}[db.Dialect])
		d, err := dialect.For(string(db.Dialect), dialect.DefaultTables, dialect.MySQLServer{})
		if err != nil {
			t.Fatal(err)
		}
		for _, byGroup := range []bool{false, true} {
			r := dialect.MetricsRange{From: 30000 * 60, To: 30005 * 60, Step: 60, Queue: "q1"}
			query, args := dialect.MetricsSumText(d, r, byGroup)
			explain := map[dbqueue.Dialect]string{dbqueue.Postgres: "EXPLAIN ", dbqueue.MySQL: "EXPLAIN ", dbqueue.SQLite: "EXPLAIN QUERY PLAN "}[db.Dialect]
			rows, err := db.SQL.Query(explain+query, args...)
			if err != nil {
				t.Fatal(err)
			}
			cols, _ := rows.Columns()
			var plan []string
			for rows.Next() {
				vals := make([]any, len(cols))
				ptrs := make([]any, len(cols))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				if err := rows.Scan(ptrs...); err != nil {
					t.Fatal(err)
				}
				var line []string
				for i, v := range vals {
					if b, ok := v.([]byte); ok {
						v = string(b)
					}
					line = append(line, cols[i]+"="+strings.TrimSpace(fmt.Sprint(v)))
				}
				plan = append(plan, strings.Join(line, " "))
			}
			rows.Close()
			text := strings.Join(plan, "\n")
			var ok bool
			switch db.Dialect {
			case dbqueue.Postgres:
				ok = strings.Contains(text, "jobs_metrics_pkey") && !strings.Contains(text, "Seq Scan")
			case dbqueue.MySQL:
				ok = strings.Contains(text, "type=range") && strings.Contains(text, "key=PRIMARY")
			case dbqueue.SQLite:
				ok = strings.Contains(text, "SEARCH jobs_metrics USING INDEX") && strings.Contains(text, "(bucket>? AND bucket<?)")
			}
			if !ok {
				t.Errorf("grouped by queue and kind %v: the plan does not read a range of the primary key:\n%s", byGroup, text)
			}
		}
	})
}

// A schema migrated before the operator's tables existed (or with one of
// them dropped) gets, from each operator read, an error that is
// ErrNoTables, names the missing table and says to migrate, not one that
// blames the jobs tables.
func TestOperatorTablesMissingSayMigrate(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		db.Exec(t, "DROP TABLE jobs_metrics")
		db.Exec(t, "DROP TABLE jobs_workers")
		_, err := q.Metrics(ctx, dbqueue.MetricsQuery{})
		wantErr(t, "Metrics", err, "jobs_metrics", "migrate up")
		_, err = q.Workers(ctx)
		wantErr(t, "Workers", err, "jobs_workers", "migrate up")
		for what, err := range map[string]error{"Metrics": must2(q.Metrics(ctx, dbqueue.MetricsQuery{})), "Workers": must2(q.Workers(ctx))} {
			if !errors.Is(err, sqldb.ErrNoTables) {
				t.Errorf("%s: %v, want ErrNoTables", what, err)
			}
			if strings.Contains(err.Error(), "jobs and failed_jobs tables are missing") {
				t.Errorf("%s: %q blames the jobs tables for a missing operator table", what, err)
			}
		}
	})
}

// must2 keeps the error of a two-value call.
func must2[T any](_ T, err error) error { return err }
