package dbqueue_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// MySQL's and PostgreSQL's claims start from a cursor past the rows their
// Queue took. A job released due at once can land behind it; the next
// claim must still take the first ready row in claim order (available_at,
// id), which is that job when the rows are due in the same second.
func TestClaimTakesTheReleasedJobFirst(t *testing.T) {
	for _, how := range []string{"Release", "ReleaseTx"} {
		t.Run(how, func(t *testing.T) {
			dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
				q := db.Queue(t)
				jobs := make([]dbqueue.NewJob, 10)
				for i := range jobs {
					jobs[i] = dbqueue.NewJob{Name: "work"}
				}
				ids, err := q.PushMany(ctx, jobs)
				if err != nil {
					t.Fatal(err)
				}
				held := reserve(t, q, 5)
				if len(held) != 5 || held[4].ID != ids[4] {
					t.Fatalf("reserved %d jobs, want the first five", len(held))
				}
				switch how {
				case "Release":
					err = q.Release(ctx, held[1], 0)
				case "ReleaseTx":
					tx, terr := db.SQL.BeginTx(ctx, nil)
					if terr != nil {
						t.Fatal(terr)
					}
					if err = q.ReleaseTx(ctx, tx, held[1], 0); err == nil {
						err = tx.Commit()
					}
				}
				if err != nil {
					t.Fatal(err)
				}
				// Due in the second the claims took the first five: the
				// released job sits behind the cursor, before the sixth.
				var at int64
				if err := db.SQL.QueryRowContext(ctx, db.Dialect.Rebind("SELECT available_at FROM jobs WHERE id = ?"), ids[4]).Scan(&at); err != nil {
					t.Fatal(err)
				}
				if _, err := db.SQL.ExecContext(ctx, db.Dialect.Rebind("UPDATE jobs SET available_at = ? WHERE reserved_at IS NULL"), at); err != nil {
					t.Fatal(err)
				}
				got := reserve(t, q, 1)
				if len(got) != 1 || got[0].ID != ids[1] {
					t.Fatalf("reserved %v, want the released job %d", jobIDs(got), ids[1])
				}
				if got := reserve(t, q, 10); len(got) != 5 || got[0].ID != ids[5] {
					t.Fatalf("then reserved %v, want the five after the first five", jobIDs(got))
				}
			})
		})
	}
}

// PostgreSQL keeps the index entry of every claimed row until VACUUM, at
// the head of the queue's range of the ready index. The claim from the
// cursor must start its index scan at the cursor (a row comparison in the
// Index Cond) and so read a few buffers where a scan from the head of the
// queue reads past every dead entry.
func TestPostgresClaimFromCursorSkipsDeadEntries(t *testing.T) {
	db := dbtest.New(t, dbqueue.Postgres)
	if _, err := db.SQL.ExecContext(ctx, "ALTER TABLE jobs SET (autovacuum_enabled = off)"); err != nil {
		t.Fatal(err)
	}
	const total, done = 20_000, 19_000
	fillJobs(t, db, "bench", total, 0, false)
	analyze(t, db)
	// Claim and finish the first 19,000, as workers would.
	var lastAV, lastID int64
	if err := db.SQL.QueryRowContext(ctx, `WITH c AS (UPDATE jobs SET reserved_at = available_at
  WHERE id IN (SELECT id FROM jobs ORDER BY available_at, id LIMIT $1) RETURNING id, available_at)
SELECT available_at, id FROM c ORDER BY available_at DESC, id DESC LIMIT 1`, done).Scan(&lastAV, &lastID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SQL.ExecContext(ctx, "DELETE FROM jobs WHERE reserved_at IS NOT NULL"); err != nil {
		t.Fatal(err)
	}

	buffers := func(arm string, args ...any) (int, pgNode) {
		t.Helper()
		tx, err := db.SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		var raw string
		if err := tx.QueryRowContext(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+db.Dialect.Rebind(armSelect(db.Dialect, arm)), args...).Scan(&raw); err != nil {
			t.Fatal(err)
		}
		var plans []struct {
			Plan pgNode `json:"Plan"`
		}
		if err := json.Unmarshal([]byte(raw), &plans); err != nil || len(plans) != 1 {
			t.Fatalf("JSON plan %s: %v", raw, err)
		}
		p := plans[0].Plan
		return p.SharedHit + p.SharedRead, p
	}
	// Twice from the head: the first scan also marks the dead entries it
	// passes, as claims under load do; the second reads what they read.
	buffers("ready", "bench", 10)
	fromHead, _ := buffers("ready", "bench", 10)
	fromCursor, plan := buffers("ready from the cursor", "bench", lastAV, lastID, 10)
	t.Logf("buffers of a claim of 10 behind %d finished jobs: %d from the head of the queue, %d from the cursor", done, fromHead, fromCursor)
	var scan *pgNode
	plan.walk(nil, func(n, _ *pgNode) {
		if n.Index == wantIndex[dbqueue.Postgres]["ready"] {
			scan = n
		}
	})
	if scan == nil {
		t.Fatalf("the claim from the cursor does not read %s", wantIndex[dbqueue.Postgres]["ready"])
	}
	if !strings.Contains(scan.IndexCond, "ROW(available_at, id) > ROW(") {
		t.Errorf("the cursor is not where the index scan starts: Index Cond %s", scan.IndexCond)
	}
	if fromCursor*5 > fromHead {
		t.Errorf("a claim from the cursor read %d buffers, from the head %d: want a fifth or less", fromCursor, fromHead)
	}
}

// The batched statements that end held rows find them by id. After an
// ANALYZE that saw no reserved row, PostgreSQL's generic plan took the
// partial index of reserved rows for "reserved_at IS NOT NULL" and hashed
// every entry of it — every row in flight and, until VACUUM, every
// finished one — on each delete of a claim's jobs.
func TestPostgresBatchedEndFindsRowsByID(t *testing.T) {
	db := dbtest.New(t, dbqueue.Postgres)
	q := db.Queue(t)
	fillJobs(t, db, "default", 2_000, 0, false)
	analyze(t, db) // nothing reserved yet
	if got := reserve(t, q, 1_000); len(got) != 1_000 {
		t.Fatalf("reserved %d jobs, want 1,000", len(got))
	}
	conn := genericPlans(t, db)
	args := []string{"('{1,2}', 1, 1)", "('{1,2}', '{1,1}', '{1,1}')", "('{1,2}', '{1,1}', '{1,1}', '{0,0}', '{NULL,NULL}')"}
	for i, stmt := range dbqueue.PostgresHeldText() {
		plan := genericPlan(t, conn, fmt.Sprintf("held_%d", i), stmt, args[i])
		if strings.Contains(plan, "jobs_queue_reserved_idx") || !strings.Contains(plan, "jobs_pkey") {
			t.Errorf("generic plan of\n%s\nreads the reserved rows' index, not the primary key:\n%s", stmt, plan)
		}
	}
}
