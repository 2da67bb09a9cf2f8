package dbqueue_test

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// The read of which queues hold ready jobs probes each name on the
// claim's own indexes: with 20,000 delayed and 2,000 running jobs in one
// queue, the plan reads no table from end to end, hashes nothing, and
// uses the claim's indexes (both partial indexes on PostgreSQL and
// SQLite, the look from the queue's start on MySQL). An EXISTS over the
// same condition was planned as a scan of jobs on PostgreSQL and MariaDB.
func TestReadyQueuesPlanProbes(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		fillJobs(t, db, "bench", 20_000, 3600, false)
		fillJobs(t, db, "bench", 2_000, 0, true)
		analyze(t, db)
		query := dbqueue.ReadyText(db.Dialect)
		names := `'["bench","none"]'`
		switch db.Dialect {
		case dbqueue.Postgres:
			query = strings.NewReplacer("$1", "ARRAY['bench','none']", "$2", "90").Replace(query)
		default:
			query = strings.Replace(strings.Replace(query, "?", names, 1), "?", "90", 1)
		}
		var plan string
		switch db.Dialect {
		case dbqueue.Postgres:
			plan = strings.Join(queryLines(t, db.SQL, "EXPLAIN "+query), "\n")
			for _, bad := range []string{"Seq Scan on jobs", "hashed"} {
				if strings.Contains(plan, bad) {
					t.Errorf("plan has %q", bad)
				}
			}
			for _, index := range []string{"jobs_queue_ready_idx", "jobs_queue_reserved_idx"} {
				if !strings.Contains(plan, index) {
					t.Errorf("plan does not use %s", index)
				}
			}
		case dbqueue.SQLite:
			plan = strings.Join(planDetails(t, db.SQL, "EXPLAIN QUERY PLAN "+query, 3), "\n")
			if strings.Contains(plan, "SCAN jobs") {
				t.Error("plan scans jobs")
			}
			for _, index := range []string{"jobs_queue_ready_idx", "jobs_queue_reserved_idx"} {
				if !strings.Contains(plan, "SEARCH jobs USING INDEX "+index) && !strings.Contains(plan, "SEARCH jobs USING COVERING INDEX "+index) {
					t.Errorf("plan does not search %s", index)
				}
			}
		case dbqueue.MySQL:
			rows := mysqlPlan(t, db.SQL, "EXPLAIN "+query)
			jobsRows := 0
			for _, r := range rows {
				plan += strings.Join([]string{r["table"], r["type"], r["key"], r["extra"]}, " ") + "\n"
				if r["table"] != "jobs" {
					continue
				}
				jobsRows++
				if r["type"] == "ALL" || r["type"] == "index" || r["key"] != "jobs_queue_available_idx" {
					t.Errorf("jobs read by %s of key %q, want probes of jobs_queue_available_idx", r["type"], r["key"])
				}
			}
			if jobsRows != 1 {
				t.Errorf("%d reads of jobs in the plan, want one probe", jobsRows)
			}
		}
		t.Logf("%s plan:\n%s", db.Dialect, plan)
		var got []string
		rows, err := db.SQL.QueryContext(ctx, query)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var name string
			if err := rows.Scan(&name); err != nil {
				t.Fatal(err)
			}
			got = append(got, name)
		}
		if len(got) != 0 {
			t.Fatalf("ready queues %q: the jobs are delayed or held, none is ready", got)
		}
	})
}

// planDetails is the last of the cols columns of every row of query.
func planDetails(t *testing.T, db *sql.DB, query string, col int) []string {
	t.Helper()
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		out = append(out, detail)
	}
	return out
}

// mysqlPlan is EXPLAIN's rows as maps of lower-case column names.
func mysqlPlan(t *testing.T, db querier, query string) []map[string]string {
	t.Helper()
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var plan []map[string]string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		row := map[string]string{}
		for i, c := range cols {
			row[strings.ToLower(c)] = vals[i].String
		}
		plan = append(plan, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return plan
}
