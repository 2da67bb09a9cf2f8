package worker_test

import (
	"context"
	"database/sql"
	"sync"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/worker"
)

// Twenty transactional handlers of a MySQL queue that Open made run at
// once and commit: their connections stay in the pool for the next jobs,
// rather than all but two being closed as they commit (database/sql's
// default) and reopened, TCP and authentication and all, for the next job.
func TestTransactionalHandlersKeepTheirConnections(t *testing.T) {
	const n = 20
	db := dbtest.New(t, dbqueue.MySQL)
	q := db.Queue(t)
	var dbName string
	if err := db.SQL.QueryRow("SELECT DATABASE()").Scan(&dbName); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := q.Push(bg, dbqueue.NewJob{Name: "hold", Data: i}); err != nil {
			t.Fatal(err)
		}
	}
	var (
		mu      sync.Mutex
		running int
		all     = make(chan struct{})
	)
	w, _ := newWorker(t, q, worker.Options{Concurrency: n, Prefetch: n, StopWhenEmpty: true, Timeout: 20 * time.Second})
	worker.HandleTx(w, "hold", func(ctx context.Context, tx *sql.Tx, job *dbqueue.Job) error {
		if _, err := tx.ExecContext(ctx, "SELECT 1"); err != nil {
			return err
		}
		mu.Lock()
		running++
		if running == n {
			close(all)
		}
		mu.Unlock()
		select { // every handler holds its transaction until all do
		case <-all:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	if err := runUntil(t, w, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	if left := db.Count(t, "SELECT COUNT(*) FROM jobs"); left != 0 {
		t.Fatalf("%d jobs left", left)
	}
	// The connections of dbtest's own handle are idle in this database
	// too; the queue's pool must keep (nearly) all of its n.
	var open int
	if err := db.SQL.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = ?", dbName).Scan(&open); err != nil {
		t.Fatal(err)
	}
	if open < n {
		t.Errorf("%d connections open on the test's database after %d transactional handlers committed; want at least %d kept for the next jobs", open, n, n)
	}
}
