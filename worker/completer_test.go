package worker

import (
	"context"
	"database/sql"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// A completed job whose row another transaction has locked does not hold
// the batch back: the other jobs of the batch are deleted at once, the
// locked one is carried to a later batch, neither deleted nor reported
// lost, and deleted once the lock goes. (MySQL's dialect deletes skipping
// locked rows; the others delete waiting.)
func TestCompleterCarriesLockedRows(t *testing.T) {
	db := dbtest.New(t, dbqueue.MySQL)
	ctx := context.Background()
	q := db.Queue(t)
	if _, err := q.PushMany(ctx, []dbqueue.NewJob{{Name: "a"}, {Name: "b"}, {Name: "c"}}); err != nil {
		t.Fatal(err)
	}
	jobs, err := q.Reserve(ctx, 3)
	if err != nil || len(jobs) != 3 {
		t.Fatalf("reserved %d, %v", len(jobs), err)
	}
	tx, err := db.SQL.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var id int64
	if err := tx.QueryRow("SELECT id FROM jobs WHERE id = ? FOR UPDATE", jobs[1].ID).Scan(&id); err != nil {
		t.Fatal(err)
	}
	logs := &levelCount{n: map[string]int{}}
	w, err := New(q, Options{Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	r := &run{w: w}
	defer r.openWrites(ctx)()
	c := newCompleter(r)
	for _, j := range jobs {
		c.add(j)
	}
	// Until the other two rows are gone: a completer that waited on the
	// lock never gets there while it is held.
	for deadline := time.Now().Add(10 * time.Second); db.Count(t, "SELECT COUNT(*) FROM jobs") != 1; {
		if time.Now().After(deadline) {
			t.Fatalf("%d jobs left with one row locked, want the other two deleted without waiting", db.Count(t, "SELECT COUNT(*) FROM jobs"))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if left := db.IDs(t, "SELECT id FROM jobs"); len(left) != 1 || left[0] != jobs[1].ID {
		t.Fatalf("left %v, want the locked job %d", left, jobs[1].ID)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	c.close()
	if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 0 {
		t.Fatalf("%d jobs left after the lock went and the completer closed, want none", n)
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	for msg, n := range logs.n {
		if strings.HasPrefix(msg, "WARN") || strings.HasPrefix(msg, "ERROR") {
			t.Errorf("logged %q %d times: a row skipped for a lock is not lost", msg, n)
		}
	}
}
