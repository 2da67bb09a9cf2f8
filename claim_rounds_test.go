package dbqueue_test

import (
	"database/sql"
	"testing"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// A MySQL claim that locks some jobs in its first round and finds no more
// candidates in the next must still mark the ones it locked as reserved.
// It used to return them unmarked: still pending in the table, so another
// claim took them too and they ran twice (found by two workers sharing a
// batch's last jobs).
func TestClaimMarksJobsOfEarlierRounds(t *testing.T) {
	db := dbtest.New(t, dbqueue.MySQL)
	q := db.Queue(t)
	// Claiming 2 reads 4 candidates: all 4 jobs. Another claimer holds 3,
	// so the first round locks one, and the second finds no candidates.
	ids, err := q.PushMany(ctx, []dbqueue.NewJob{{Name: "j"}, {Name: "j"}, {Name: "j"}, {Name: "j"}})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.SQL.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	rows, err := tx.Query("SELECT id FROM jobs WHERE id <= ? FOR UPDATE", ids[2])
	if err != nil {
		t.Fatal(err)
	}
	rows.Close()
	got := reserve(t, q, 2)
	if len(got) != 1 || got[0].ID != ids[3] {
		t.Fatalf("reserved %v, want job %d alone", got, ids[3])
	}
	if got[0].Attempts != 1 {
		t.Errorf("the claimed job reads attempt %d, want 1", got[0].Attempts)
	}
	if n := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE id = ? AND reserved_at IS NOT NULL AND attempts = 1", ids[3]); n != 1 {
		t.Fatalf("the claimed job is not reserved in the table: another claim would run it again")
	}
	if err := q.Delete(ctx, got[0]); err != nil {
		t.Fatalf("delete by the claim's holder: %v", err)
	}
}
