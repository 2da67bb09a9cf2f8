package worker_test

import (
	"context"
	"database/sql"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/driver/dbqpgx"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/worker"
)

// A transactional handler that ignores its context runs past its timeout;
// the worker gives its job up and runs it again, and that run ends it.
// Then the first wakes, writes its effect (with a context of its own) and
// returns nil. That late run must apply nothing: the effect lands once.
func TestHandleTxIgnoringItsContextAppliesNothingLate(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := sqlQueue(t, db, dbqueue.WithRetryAfter(stubbornRetryAfter))
		stubbornTx(t, db, q, func(w *worker.Worker, handle stubborn, opt worker.HandlerOption) {
			worker.HandleTx(w, "stubborn", func(ctx context.Context, tx *sql.Tx, job *dbqueue.Job) error {
				return handle(ctx, job, func(ctx context.Context) error { return effect(ctx, db, tx, job) })
			}, opt)
		})
	})
}

// The same with a pgx.Tx, which, unlike a *sql.Tx, stays open when its
// context ends.
func TestHandleTxPgxIgnoringItsContextAppliesNothingLate(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t, dbqueue.Postgres)
	pool, err := pgxpool.New(bg, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	q, err := dbqueue.New(bg, dbqpgx.New(pool), dbqueue.WithRetryAfter(stubbornRetryAfter))
	if err != nil {
		t.Fatal(err)
	}
	db.Exec(t, "CREATE TABLE effects (job_id BIGINT NOT NULL, attempt INT NOT NULL)")
	stubbornTx(t, db, q, func(w *worker.Worker, handle stubborn, opt worker.HandlerOption) {
		worker.HandleTx(w, "stubborn", func(ctx context.Context, tx pgx.Tx, job *dbqueue.Job) error {
			return handle(ctx, job, func(ctx context.Context) error {
				_, err := tx.Exec(ctx, "INSERT INTO effects (job_id, attempt) VALUES ($1, $2)", job.ID, job.Attempts)
				return err
			})
		}, opt)
	})
}

// stubbornRetryAfter is the shortest retry_after a 200ms timeout allows:
// a job whose handler ignores its context is left reserved until then.
const stubbornRetryAfter = 6 * time.Second

// stubborn is the body of a transactional handler; write writes its
// effect in the job's transaction.
type stubborn func(ctx context.Context, job *dbqueue.Job, write func(context.Context) error) error

// stubbornTx runs the scenario with the handler register registers, with
// opt: its first run waits, ignoring its context, until the worker has
// given it up and another run has ended the job, then writes and returns
// nil; its second run writes and returns nil.
func stubbornTx(t *testing.T, db *dbtest.DB, q *dbqueue.Queue, register func(*worker.Worker, stubborn, worker.HandlerOption)) {
	t.Helper()
	w, _ := newWorker(t, q, worker.Options{Concurrency: 2, Tries: 3, Timeout: 200 * time.Millisecond, Backoff: []time.Duration{0}, Sleep: 50 * time.Millisecond})
	wake := make(chan struct{})
	// lateDone is closed when the worker is done with the late run: its
	// handler returned and its transaction committed or rolled back.
	lateDone := make(chan struct{})
	var runs atomic.Int64
	late := worker.WithMiddleware(func(next worker.HandlerFunc) worker.HandlerFunc {
		return func(ctx context.Context, job *dbqueue.Job) error {
			first := runs.Load() == 0
			err := next(ctx, job)
			if first {
				close(lateDone)
			}
			return err
		}
	})
	register(w, func(ctx context.Context, job *dbqueue.Job, write func(context.Context) error) error {
		if runs.Add(1) > 1 {
			return write(ctx)
		}
		<-wake // ignores ctx
		if err := write(context.Background()); err != nil {
			t.Logf("the late run's write: %v", err)
		}
		return nil
	}, late)
	id, err := q.Push(bg, dbqueue.NewJob{Name: "stubborn"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	ran := make(chan error, 1)
	go func() { ran <- w.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-ran; err != nil {
			t.Error(err)
		}
	}()
	// The worker gives the first run up past its timeout, leaves the job
	// reserved until retry_after, and then runs it again on its other
	// goroutine, which ends it.
	if !dbtest.Until(20*time.Second, func() bool { return db.Count(t, "SELECT COUNT(*) FROM jobs WHERE id = ?", id) == 0 }) {
		close(wake)
		t.Fatal("the job of a handler that ignores its context was never given up and run again")
	}
	// Now the late run wakes, writes and returns nil.
	close(wake)
	select {
	case <-lateDone:
	case <-time.After(10 * time.Second):
		t.Fatal("the late run never returned")
	}
	if n := runs.Load(); n != 2 {
		t.Fatalf("the handler ran %d times, want 2", n)
	}
	if n := db.Count(t, "SELECT COUNT(*) FROM effects WHERE job_id = ?", id); n != 1 {
		t.Fatalf("job %d's effect landed %d times, want once", id, n)
	}
	if n := db.Count(t, "SELECT COUNT(*) FROM jobs") + db.Count(t, "SELECT COUNT(*) FROM failed_jobs"); n != 0 {
		t.Fatalf("%d rows left in jobs and failed_jobs", n)
	}
}
