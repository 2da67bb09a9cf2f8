package dbqueue_test

import (
	"encoding/json"
	"testing"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// TestPostgresClaimStaysOnIndexes rebuilds the state behind the stall of
// the hour's soak (docs/measurements/churn.md, "One stall"): a jobs table of mostly
// empty pages, an ANALYZE that saw few live rows, then a backlog that fills
// the free space. The planner then prices an index scan at several pages a
// row and plans a claim of 1,000 as a read of the whole table and a sort
// (on PostgreSQL 15: a sequential scan, then a merge join walking the
// primary key). Both claim statements, run as Claim runs them (after
// PostgresClaimPlanner in their transaction), must read the ready index in
// order and probe the primary key, and a Reserve must take the queue's
// first jobs.
func TestPostgresClaimStaysOnIndexes(t *testing.T) {
	db := dbtest.New(t, dbqueue.Postgres)
	db.Exec(t, "ALTER TABLE jobs SET (autovacuum_enabled = off)")
	fillJobs(t, db, "bench", 300_000, 0, false)
	db.Exec(t, "DELETE FROM jobs WHERE id % 250 <> 0")
	db.Exec(t, "VACUUM (TRUNCATE false) jobs")
	analyze(t, db)
	fillJobs(t, db, "bench", 250_000, 0, false)

	full, fromCursor, planner := dbqueue.PostgresClaims()
	explain := func(stmt string, settings bool, args ...any) pgNode {
		t.Helper()
		tx, err := db.SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback() // EXPLAIN ANALYZE ran the claim
		if settings {
			if _, err := tx.ExecContext(ctx, planner); err != nil {
				t.Fatal(err)
			}
		}
		var raw string
		if err := tx.QueryRowContext(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+stmt, args...).Scan(&raw); err != nil {
			t.Fatal(err)
		}
		var plans []struct {
			Plan pgNode  `json:"Plan"`
			Time float64 `json:"Execution Time"`
		}
		if err := json.Unmarshal([]byte(raw), &plans); err != nil || len(plans) != 1 {
			t.Fatalf("JSON plan %s: %v", raw, err)
		}
		t.Logf("settings %v: %.1f ms", settings, plans[0].Time)
		return plans[0].Plan
	}
	// readsTable names what in a plan reads past the claim's rows: the
	// whole table, a sort of every ready row, or a join that walks the
	// primary key or hashes the table.
	readsTable := func(root pgNode) string {
		found := ""
		root.walk(nil, func(n, _ *pgNode) {
			switch {
			case found != "":
			case n.Type == "Seq Scan" || n.Type == "Bitmap Heap Scan" && n.Relation == "jobs" && len(n.Plans) > 0 && n.Plans[0].Index != "jobs_pkey",
				n.Type == "Sort", n.Type == "Merge Join", n.Type == "Hash Join":
				found = n.Type
			}
		})
		return found
	}
	for _, c := range []struct {
		name string
		stmt string
		args []any
	}{
		{"full claim", full, []any{"bench", 90, 1000, "bench", 1000, 1000}},
		{"claim from the cursor", fromCursor, []any{"bench", 0, 0, 1000}},
	} {
		if what := readsTable(explain(c.stmt, false, c.args...)); what != "" {
			t.Logf("%s without the planner settings: %s (the state misleads the planner)", c.name, what)
		} else {
			t.Logf("%s without the planner settings: on its indexes (this server's planner is not misled)", c.name)
		}
		plan := explain(c.stmt, true, c.args...)
		if what := readsTable(plan); what != "" {
			t.Errorf("%s under PostgresClaimPlanner: %s; want the ready index in order and primary-key probes", c.name, what)
		}
		usesReady := false
		plan.walk(nil, func(n, _ *pgNode) { usesReady = usesReady || n.Index == "jobs_queue_ready_idx" })
		if !usesReady {
			t.Errorf("%s under PostgresClaimPlanner does not read jobs_queue_ready_idx", c.name)
		}
	}

	want := db.IDs(t, "SELECT id FROM jobs WHERE reserved_at IS NULL ORDER BY available_at, id LIMIT 1000")
	jobs := reserve(t, db.Queue(t), 1000, "bench")
	if len(jobs) != len(want) {
		t.Fatalf("reserved %d jobs, want %d", len(jobs), len(want))
	}
	for i, j := range jobs {
		if j.ID != want[i] {
			t.Fatalf("job %d of the claim is id %d, want %d: the claim did not take the queue's first jobs", i, j.ID, want[i])
		}
	}
}
