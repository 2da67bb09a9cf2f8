package dbqueue_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// The reply to a COMMIT can be lost after the server acted on it, or the
// COMMIT can be lost on its way: the client sees the same error. A worker
// that then asks ResolveCommit must get the server's answer, even while
// the COMMIT is still in flight — never a guess from a row read before
// the server decided.
func TestResolveCommitWaitsOutACommitInFlight(t *testing.T) {
	for _, d := range []dbqueue.Dialect{dbqueue.Postgres, dbqueue.MySQL} {
		for _, delivered := range []bool{true, false} {
			name := string(d) + "/commit-lost"
			if delivered {
				name = string(d) + "/reply-lost"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				db := dbtest.New(t, d)
				resolveInFlight(t, db, delivered)
			})
		}
	}
}

func resolveInFlight(t *testing.T, db *dbtest.DB, delivered bool) {
	q := db.Queue(t)
	effects(t, db)
	id := push(t, q, dbqueue.NewJob{Name: "charge"})
	job := reserve(t, q, 1)[0]

	proxy, dsn := db.HoldProxy(t)
	through, _, err := dbqueue.OpenSQL(dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer through.Close()
	tx, err := through.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	holder := backendID(t, db, tx)
	work(t, db, tx, job)
	if err := q.CompleteTx(ctx, tx, job); err != nil {
		t.Fatal(err)
	}

	proxy.Hold()
	committed := make(chan error, 1)
	go func() { committed <- tx.Commit() }()
	select {
	case <-proxy.Held():
	case <-time.After(10 * time.Second):
		t.Fatal("the COMMIT never reached the proxy")
	}

	resolved := make(chan answer, 1)
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	go func() {
		o, err := q.ResolveCommit(rctx, job)
		resolved <- answer{o, err}
	}()
	// The server has not decided yet: the resolver must wait for it.
	waitBlockedBy(t, db, holder, resolved)

	if delivered {
		proxy.Deliver()
	} else {
		proxy.Abort()
	}
	select {
	case err := <-committed:
		if err == nil {
			t.Fatal("Commit reported success though its reply was dropped")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Commit never returned")
	}
	a := <-resolved
	if a.err != nil {
		t.Fatalf("ResolveCommit: %v", a.err)
	}
	effectsN := db.Count(t, "SELECT COUNT(*) FROM effects")
	jobsN := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE id = ?", id)
	if delivered {
		if a.o != dbqueue.CommitApplied || effectsN != 1 || jobsN != 0 {
			t.Fatalf("reply lost: resolved %v with %d effects and %d job rows; want applied, 1 and 0", a.o, effectsN, jobsN)
		}
		return
	}
	if a.o != dbqueue.CommitRolledBack || effectsN != 0 || jobsN != 1 {
		t.Fatalf("COMMIT lost: resolved %v with %d effects and %d job rows; want rolled back, 0 and 1", a.o, effectsN, jobsN)
	}
	if err := q.Release(ctx, job, 0); err != nil {
		t.Fatalf("releasing the job the rollback left held: %v", err)
	}
}

// answer is what ResolveCommit returned.
type answer struct {
	o   dbqueue.CommitOutcome
	err error
}

func (a answer) String() string { return a.o.String() }

// backendID is the server's id of tx's connection.
func backendID(t *testing.T, db *dbtest.DB, tx *sql.Tx) int64 {
	t.Helper()
	query := "SELECT pg_backend_pid()"
	if db.Dialect == dbqueue.MySQL {
		query = "SELECT CONNECTION_ID()"
	}
	var id int64
	if err := tx.QueryRowContext(ctx, query).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// waitBlockedBy waits until some session waits for a lock that the
// session holder holds, failing if the resolver answers first.
func waitBlockedBy(t *testing.T, db *dbtest.DB, holder int64, early <-chan answer) {
	t.Helper()
	query, args := "SELECT COUNT(*) FROM pg_stat_activity WHERE ? = ANY(pg_blocking_pids(pid))", []any{holder}
	if db.Dialect == dbqueue.MySQL {
		// MariaDB takes the lock of a primary-key read while it plans the
		// statement, where its lock-wait tables do not reliably show the
		// wait: the resolver's locking read running on the server, not
		// answered, is the wait (a read that does not lock answers at once).
		query, args = `SELECT COUNT(*) FROM information_schema.PROCESSLIST
WHERE DB = DATABASE() AND INFO LIKE 'SELECT reservation_token%FOR UPDATE%'`, nil
	}
	var answered *answer
	waiting := dbtest.Until(20*time.Second, func() bool {
		select {
		case a := <-early:
			answered = &a
			return true
		default:
		}
		return db.Count(t, query, args...) > 0
	})
	if answered == nil {
		select {
		case a := <-early:
			answered = &a
		default:
		}
	}
	if answered != nil {
		t.Fatalf("ResolveCommit answered %v (%v) while the COMMIT was still held: it read around the lock", *answered, answered.err)
	}
	if !waiting {
		t.Fatal("ResolveCommit never waited for the transaction in flight")
	}
}
