package dbqueue_test

import (
	"testing"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// A transactional handler ends its job among many reserved ones on a
// table whose statistics were taken while nothing was reserved (an
// ANALYZE of a fresh backlog, as autovacuum does): completing or
// releasing the one job reads that row through the primary key, not every
// reserved row. On PostgreSQL it read all of them (the planner took the
// partial index of reserved rows, which its statistics said was empty),
// so each job's transaction cost as much as the worker's prefetch was
// deep.
func TestTxEndReadsOnlyItsRow(t *testing.T) {
	const backlog, held = 2_000, 1_000
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		jobs := make([]dbqueue.NewJob, backlog)
		for i := range jobs {
			jobs[i] = dbqueue.NewJob{Name: "charge"}
		}
		if _, err := q.PushMany(ctx, jobs); err != nil {
			t.Fatal(err)
		}
		analyze(t, db) // nothing reserved yet
		var got []*dbqueue.Job
		for len(got) < held {
			got = append(got, reserve(t, q, held-len(got))...)
		}

		tx := begin(t, db)
		if err := q.CompleteTx(ctx, tx, got[held/2]); err != nil {
			t.Fatalf("CompleteTx: %v", err)
		}
		if err := q.ReleaseTx(ctx, tx, got[held/2+1], 0); err != nil {
			t.Fatalf("ReleaseTx: %v", err)
		}
		if db.Dialect == dbqueue.Postgres {
			// What this transaction has read of jobs so far.
			var fetched int64
			if err := tx.QueryRowContext(ctx, `SELECT COALESCE(SUM(idx_tup_fetch), 0) + COALESCE(SUM(seq_tup_read), 0)
FROM pg_stat_xact_user_tables WHERE relname = 'jobs' AND schemaname = current_schema()`).Scan(&fetched); err != nil {
				t.Fatal(err)
			}
			if fetched > 10 {
				t.Errorf("ending 2 of %d reserved jobs read %d rows of jobs: the rows were not found by id", held, fetched)
			}
		}
		commit(t, tx)
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE id = ?", got[held/2].ID); n != 0 {
			t.Fatal("the completed job is still there")
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE id = ? AND reserved_at IS NULL", got[held/2+1].ID); n != 1 {
			t.Fatal("the released job was not put back")
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE reserved_at IS NOT NULL"); n != held-2 {
			t.Fatalf("%d jobs reserved, want the other %d untouched", n, held-2)
		}
	})
}
