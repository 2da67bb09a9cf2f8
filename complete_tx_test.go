package dbqueue_test

import (
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/driver/dbqpgx"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// effects is the table a transactional handler writes its work to: one
// row per applied effect, so a test counts effects apart from runs.
func effects(t *testing.T, db *dbtest.DB) {
	t.Helper()
	db.Exec(t, "CREATE TABLE effects (job_id BIGINT NOT NULL, note VARCHAR(100) NOT NULL)")
}

// work is a handler's write: its effect, inside tx.
func work(t *testing.T, db *dbtest.DB, tx *sql.Tx, job *dbqueue.Job) {
	t.Helper()
	if _, err := tx.ExecContext(ctx, db.Dialect.Rebind("INSERT INTO effects (job_id, note) VALUES (?, ?)"), job.ID, job.Name()); err != nil {
		t.Fatalf("the handler's write: %v", err)
	}
}

func begin(t *testing.T, db *dbtest.DB) *sql.Tx {
	t.Helper()
	tx, err := db.SQL.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	return tx
}

func commit(t *testing.T, tx *sql.Tx) {
	t.Helper()
	if err := tx.Commit(); err != nil {
		t.Fatalf("commit: %v", err)
	}
}

// expire makes every reservation older than any retry_after, as if its
// worker had stalled past it.
func expire(t *testing.T, db *dbtest.DB) {
	t.Helper()
	db.Exec(t, "UPDATE jobs SET reserved_at = reserved_at - 100000 WHERE reserved_at IS NOT NULL")
}

// A handler writes its effect and completes its job in one transaction:
// after the commit the effect is there once and the job is gone; a run
// whose transaction rolls back leaves neither its effect nor a finished
// job, and the job is still held for a release.
func TestCompleteTxCommitsTheEffectWithTheJob(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		effects(t, db)
		id := push(t, q, dbqueue.NewJob{Name: "charge"})

		job := reserve(t, q, 1)[0]
		tx := begin(t, db)
		work(t, db, tx, job)
		if err := q.CompleteTx(ctx, tx, job); err != nil {
			t.Fatalf("CompleteTx: %v", err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM effects"); n != 0 {
			t.Fatalf("a rolled-back run left %d effects", n)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE id = ? AND reserved_at IS NOT NULL", id); n != 1 {
			t.Fatal("a rolled-back completion finished the job")
		}
		if err := q.Release(ctx, job, 0); err != nil {
			t.Fatalf("release after the rollback: %v", err)
		}

		job = reserve(t, q, 1)[0]
		tx = begin(t, db)
		work(t, db, tx, job)
		if err := q.CompleteTx(ctx, tx, job); err != nil {
			t.Fatalf("CompleteTx: %v", err)
		}
		commit(t, tx)
		if n := db.Count(t, "SELECT COUNT(*) FROM effects WHERE job_id = ?", id); n != 1 {
			t.Fatalf("%d effects after one committed run, want 1", n)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 0 {
			t.Fatal("the completed job is still in jobs")
		}
		if again := reserve(t, q, 1); len(again) != 0 {
			t.Fatalf("job %d ran again after its transaction committed", again[0].ID)
		}
	})
}

// A worker stalls past retry_after; another takes the job and runs it.
// When the stale worker's handler then completes in its transaction, it
// learns it no longer holds the job before it commits, and its effect is
// rolled back: only the new holder's effect is applied.
func TestCompleteTxByAStaleHolderAppliesNothing(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		effects(t, db)
		push(t, q, dbqueue.NewJob{Name: "charge"})
		stale := reserve(t, q, 1)[0]
		expire(t, db)
		fresh := reserve(t, q, 1)
		if len(fresh) != 1 || fresh[0].ID != stale.ID {
			t.Fatalf("the expired job was not taken over: %v", fresh)
		}

		tx := begin(t, db)
		work(t, db, tx, stale)
		if err := q.CompleteTx(ctx, tx, stale); !errors.Is(err, dbqueue.ErrNotHeld) {
			t.Fatalf("CompleteTx by a stale holder: %v, want ErrNotHeld", err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE reserved_at IS NOT NULL"); n != 1 {
			t.Fatal("the stale holder's completion touched the new holder's run")
		}

		tx = begin(t, db)
		work(t, db, tx, fresh[0])
		if err := q.CompleteTx(ctx, tx, fresh[0]); err != nil {
			t.Fatalf("the new holder's CompleteTx: %v", err)
		}
		commit(t, tx)
		if n := db.Count(t, "SELECT COUNT(*) FROM effects"); n != 1 {
			t.Fatalf("%d effects, want the new holder's 1", n)
		}
	})
}

// Follow-up jobs pushed in the handler's transaction exist only if it
// commits, together with the completion.
func TestPushTxInsideACompletion(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		push(t, q, dbqueue.NewJob{Name: "order"})
		job := reserve(t, q, 1)[0]

		tx := begin(t, db)
		if _, err := q.PushTx(ctx, tx, dbqueue.NewJob{Name: "ship", Queue: "next"}); err != nil {
			t.Fatal(err)
		}
		if err := q.CompleteTx(ctx, tx, job); err != nil {
			t.Fatal(err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE queue = 'next'"); n != 0 {
			t.Fatal("a follow-up pushed in a rolled-back transaction exists")
		}

		tx = begin(t, db)
		if _, err := q.PushTx(ctx, tx, dbqueue.NewJob{Name: "ship", Queue: "next"}); err != nil {
			t.Fatal(err)
		}
		if err := q.CompleteTx(ctx, tx, job); err != nil {
			t.Fatal(err)
		}
		commit(t, tx)
		if next := reserve(t, q, 2, "default", "next"); len(next) != 1 || next[0].Name() != "ship" {
			t.Fatalf("after the commit: %v, want the follow-up alone", next)
		}
	})
}

// A chain's next link and a batch's count are written in the handler's
// transaction: a rollback leaves the chain where it was and the batch
// uncounted; a commit pushes the link and counts the job.
func TestCompleteTxChainsAndBatches(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		if _, err := q.PushChain(ctx, dbqueue.NewJob{Name: "first"}, dbqueue.NewJob{Name: "second"}); err != nil {
			t.Fatal(err)
		}
		first := reserve(t, q, 1)[0]
		tx := begin(t, db)
		if err := q.CompleteTx(ctx, tx, first); err != nil {
			t.Fatal(err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 1 {
			t.Fatalf("%d jobs after a rolled-back chain step, want the first link alone", n)
		}
		tx = begin(t, db)
		if err := q.CompleteTx(ctx, tx, first); err != nil {
			t.Fatal(err)
		}
		commit(t, tx)
		if next := reserve(t, q, 2); len(next) != 1 || next[0].Name() != "second" {
			t.Fatalf("after the commit: %v, want the second link", next)
		}

		b, err := q.Batch(ctx, dbqueue.BatchOptions{Name: "two"}, dbqueue.NewJob{Name: "a", Queue: "b"}, dbqueue.NewJob{Name: "b", Queue: "b"})
		if err != nil {
			t.Fatal(err)
		}
		job := reserve(t, q, 1, "b")[0]
		tx = begin(t, db)
		if err := q.CompleteTx(ctx, tx, job); err != nil {
			t.Fatal(err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if got, _ := q.FindBatch(ctx, b.ID); got.PendingJobs != 2 {
			t.Fatalf("a rolled-back completion counted in its batch: %d pending", got.PendingJobs)
		}
		tx = begin(t, db)
		if err := q.CompleteTx(ctx, tx, job); err != nil {
			t.Fatal(err)
		}
		commit(t, tx)
		if got, _ := q.FindBatch(ctx, b.ID); got.PendingJobs != 1 {
			t.Fatalf("after the commit: %d pending, want 1", got.PendingJobs)
		}
	})
}

// A handler that waits for something snoozes its job: it runs again after
// the delay, and the attempt it used is given back, so snoozing never
// runs a job out of tries. A release with delay counts the attempt.
func TestSnoozeAndReleaseTx(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		id := push(t, q, dbqueue.NewJob{Name: "poll"})
		for i := 0; i < 3; i++ {
			job := reserve(t, q, 1)[0]
			if job.Attempts != 1 {
				t.Fatalf("run %d after %d snoozes: attempt %d, want 1", i+1, i, job.Attempts)
			}
			tx := begin(t, db)
			if err := q.SnoozeTx(ctx, tx, job, 0); err != nil {
				t.Fatalf("SnoozeTx: %v", err)
			}
			commit(t, tx)
		}

		job := reserve(t, q, 1)[0]
		tx := begin(t, db)
		if err := q.SnoozeTx(ctx, tx, job, time.Hour); err != nil {
			t.Fatal(err)
		}
		commit(t, tx)
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE id = ? AND reserved_at IS NULL AND attempts = 0 AND available_at >= "+db.Now()+" + 3590", id); n != 1 {
			t.Fatal("a snooze of an hour did not put the job back an hour later with its attempt given back")
		}
		if err := q.Delete(ctx, job); !errors.Is(err, dbqueue.ErrNotHeld) {
			t.Fatalf("the snoozed run still finishes the job: %v", err)
		}

		db.Exec(t, "UPDATE jobs SET available_at = "+db.Now()+" WHERE id = ?", id)
		job = reserve(t, q, 1)[0]
		tx = begin(t, db)
		if err := q.ReleaseTx(ctx, tx, job, time.Hour); err != nil {
			t.Fatal(err)
		}
		commit(t, tx)
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE id = ? AND reserved_at IS NULL AND attempts = 1 AND available_at >= "+db.Now()+" + 3590", id); n != 1 {
			t.Fatal("a release of an hour did not put the job back an hour later with its attempt counted")
		}

		// A snooze or release by a stale holder says so, and changes nothing.
		db.Exec(t, "UPDATE jobs SET available_at = "+db.Now()+" WHERE id = ?", id)
		stale := reserve(t, q, 1)[0]
		expire(t, db)
		fresh := reserve(t, q, 1)[0]
		for _, snooze := range []bool{true, false} {
			tx = begin(t, db)
			var err error
			if snooze {
				err = q.SnoozeTx(ctx, tx, stale, 0)
			} else {
				err = q.ReleaseTx(ctx, tx, stale, 0)
			}
			if !errors.Is(err, dbqueue.ErrNotHeld) {
				t.Fatalf("stale holder's snooze %v: %v, want ErrNotHeld", snooze, err)
			}
			commit(t, tx)
		}
		if err := q.Delete(ctx, fresh); err != nil {
			t.Fatalf("the new holder lost its run to a stale snooze: %v", err)
		}
	})
}

// A handler cancels its job: it is not retried, and it is in failed_jobs
// saying it was cancelled and why, where an operator looks. A cancelled
// chain link stops its chain; a cancelled batch job counts as failed.
func TestCancelTxRecordsTheCancellation(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		if _, err := q.PushChain(ctx, dbqueue.NewJob{Name: "refund"}, dbqueue.NewJob{Name: "notify"}); err != nil {
			t.Fatal(err)
		}
		job := reserve(t, q, 1)[0]
		tx := begin(t, db)
		if err := q.CancelTx(ctx, tx, job, "order 42 was closed"); err != nil {
			t.Fatalf("CancelTx: %v", err)
		}
		commit(t, tx)
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 0 {
			t.Fatalf("%d jobs left: a cancelled link must stop its chain and not come back", n)
		}
		var exception string
		if err := db.SQL.QueryRow("SELECT exception FROM failed_jobs").Scan(&exception); err != nil {
			t.Fatalf("failed_jobs holds no cancelled job: %v", err)
		}
		if !strings.Contains(exception, "cancelled by its handler: order 42 was closed") {
			t.Fatalf("failed_jobs exception %q, want the cancellation and its reason", exception)
		}

		b, err := q.Batch(ctx, dbqueue.BatchOptions{AllowFailures: true}, dbqueue.NewJob{Name: "a"}, dbqueue.NewJob{Name: "b"})
		if err != nil {
			t.Fatal(err)
		}
		job = reserve(t, q, 1)[0]
		tx = begin(t, db)
		if err := q.CancelTx(ctx, tx, job, ""); err != nil {
			t.Fatal(err)
		}
		commit(t, tx)
		if got, _ := q.FindBatch(ctx, b.ID); got.FailedJobs != 1 || got.PendingJobs != 2 {
			t.Fatalf("batch after a cancelled job: %d failed, %d pending; want 1 and 2", got.FailedJobs, got.PendingJobs)
		}
	})
}

// The transactional ends refuse what they cannot use with an error that
// says what to pass, and leave the job alone.
func TestTxEndsRefuseBadInput(t *testing.T) {
	db := dbtest.New(t, dbqueue.SQLite)
	q := db.Queue(t)
	push(t, q, dbqueue.NewJob{Name: "x"})
	job := reserve(t, q, 1)[0]
	if err := q.CompleteTx(ctx, nil, job); err == nil || !strings.Contains(err.Error(), "nil *sql.Tx") {
		t.Errorf("CompleteTx(nil tx): %v", err)
	}
	tx := begin(t, db)
	if err := q.CompleteTx(ctx, tx, nil); err == nil || !strings.Contains(err.Error(), "nil job") {
		t.Errorf("CompleteTx(nil job): %v", err)
	}
	for _, d := range []time.Duration{-time.Second, dbqueue.MaxDelay + time.Hour} {
		if err := q.SnoozeTx(ctx, tx, job, d); err == nil || !strings.Contains(err.Error(), "from 0 to") {
			t.Errorf("SnoozeTx(%v): %v", d, err)
		}
	}
	if _, err := q.ResolveCommit(ctx, nil); err == nil {
		t.Error("ResolveCommit(nil) did not fail")
	}
	commit(t, tx)
	if err := q.Delete(ctx, job); err != nil {
		t.Fatalf("the job was changed by refused calls: %v", err)
	}
}

// ResolveCommit reads what a transaction that ended a job did, from the
// job's row: gone, still held, or not ours.
func TestResolveCommitReadsTheRow(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		for range 3 {
			push(t, q, dbqueue.NewJob{Name: "x"})
		}
		jobs := reserve(t, q, 3)

		tx := begin(t, db)
		if err := q.CompleteTx(ctx, tx, jobs[0]); err != nil {
			t.Fatal(err)
		}
		commit(t, tx)
		tx = begin(t, db)
		if err := q.CompleteTx(ctx, tx, jobs[1]); err != nil {
			t.Fatal(err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		tx = begin(t, db)
		if err := q.SnoozeTx(ctx, tx, jobs[2], 0); err != nil {
			t.Fatal(err)
		}
		commit(t, tx)
		for i, want := range []dbqueue.CommitOutcome{dbqueue.CommitApplied, dbqueue.CommitRolledBack, dbqueue.CommitNotHeld} {
			got, err := q.ResolveCommit(ctx, jobs[i])
			if err != nil || got != want {
				t.Errorf("job %d: %v, %v; want %v", i, got, err, want)
			}
		}
	})
}

// The same on a pgx pool: a handler's pgx transaction holds its effect,
// a follow-up push and the job's end; a stale holder's is refused before
// its commit; snooze and cancel are written in the transaction.
func TestCompleteInPgxTransaction(t *testing.T) {
	pool, q := pgxQueue(t)
	if _, err := pool.Exec(ctx, "CREATE TABLE effects (job_id BIGINT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	count := func(query string) int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, query).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	push(t, q, dbqueue.NewJob{Name: "charge"})
	job := reserve(t, q, 1)[0]
	for _, commit := range []bool{false, true} {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO effects (job_id) VALUES ($1)", job.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := dbqpgx.PushTx(ctx, q, tx, dbqueue.NewJob{Name: "receipt", Queue: "next"}); err != nil {
			t.Fatal(err)
		}
		if err := dbqpgx.CompleteTx(ctx, q, tx, job); err != nil {
			t.Fatalf("dbqpgx.CompleteTx: %v", err)
		}
		if !commit {
			_ = tx.Rollback(ctx)
			if n := count("SELECT COUNT(*) FROM effects") + count("SELECT COUNT(*) FROM jobs WHERE queue = 'next'"); n != 0 {
				t.Fatalf("a rolled-back pgx transaction left %d rows", n)
			}
			continue
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if count("SELECT COUNT(*) FROM effects") != 1 || count("SELECT COUNT(*) FROM jobs WHERE queue = 'next'") != 1 || count("SELECT COUNT(*) FROM jobs WHERE queue = 'default'") != 0 {
		t.Fatal("after the commit: want one effect, the follow-up, and the job gone")
	}

	push(t, q, dbqueue.NewJob{Name: "poll"})
	stale := reserve(t, q, 1)[0]
	if _, err := pool.Exec(ctx, "UPDATE jobs SET reserved_at = reserved_at - 100000 WHERE reserved_at IS NOT NULL"); err != nil {
		t.Fatal(err)
	}
	fresh := reserve(t, q, 1)[0]
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := dbqpgx.CompleteTx(ctx, q, tx, stale); !errors.Is(err, dbqueue.ErrNotHeld) {
		t.Fatalf("stale holder's dbqpgx.CompleteTx: %v, want ErrNotHeld", err)
	}
	_ = tx.Rollback(ctx)
	tx, _ = pool.Begin(ctx)
	if err := dbqpgx.SnoozeTx(ctx, q, tx, fresh, 0); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	again := reserve(t, q, 1)[0]
	if again.Attempts != fresh.Attempts {
		t.Fatalf("after a snooze: attempt %d, want %d again", again.Attempts, fresh.Attempts)
	}
	tx, _ = pool.Begin(ctx)
	if err := dbqpgx.CancelTx(ctx, q, tx, again, "not needed"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if count("SELECT COUNT(*) FROM failed_jobs WHERE exception LIKE '%cancelled by its handler: not needed%'") != 1 {
		t.Fatal("the cancelled job is not in failed_jobs")
	}
	my := dbtest.New(t, dbqueue.SQLite).Queue(t)
	if err := dbqpgx.CompleteTx(ctx, my, tx, again); err == nil || !strings.Contains(err.Error(), "PostgreSQL") {
		t.Fatalf("pgx tx on a SQLite queue: %v", err)
	}
}

// Snooze without a transaction of the caller's: the job comes back after
// the delay with its attempt given back; a stale holder's snooze says so.
func TestSnoozeGivesTheAttemptBack(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		push(t, q, dbqueue.NewJob{Name: "poll"})
		for i := 0; i < 3; i++ {
			job := reserve(t, q, 1)[0]
			if job.Attempts != 1 {
				t.Fatalf("after %d snoozes: attempt %d, want 1", i, job.Attempts)
			}
			if err := q.Snooze(ctx, job, 0); err != nil {
				t.Fatalf("Snooze: %v", err)
			}
			if err := q.Snooze(ctx, job, 0); !errors.Is(err, dbqueue.ErrNotHeld) {
				t.Fatalf("a second snooze of the same run: %v, want ErrNotHeld", err)
			}
		}
	})
}
