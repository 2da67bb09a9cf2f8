package worker_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/driver/dbqmysql"
	"github.com/dbqueue/dbqueue/driver/dbqpgx"
	"github.com/dbqueue/dbqueue/driver/dbqsqlite"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/worker"
)

// sqlQueue is a queue on the test database's database/sql pool, whose
// transactional handlers get a *sql.Tx on every database.
func sqlQueue(t *testing.T, db *dbtest.DB, opts ...dbqueue.Option) *dbqueue.Queue {
	t.Helper()
	var drv dbqueue.Driver
	switch db.Dialect {
	case dbqueue.Postgres:
		drv = dbqpgx.NewSQL(db.SQL)
	case dbqueue.MySQL:
		drv = dbqmysql.New(db.SQL)
	default:
		drv = dbqsqlite.New(db.SQL)
	}
	q, err := dbqueue.New(bg, drv, opts...)
	if err != nil {
		t.Fatal(err)
	}
	db.Exec(t, "CREATE TABLE effects (job_id BIGINT NOT NULL, attempt INT NOT NULL)")
	return q
}

// effect is a transactional handler's write.
func effect(ctx context.Context, db *dbtest.DB, tx *sql.Tx, job *dbqueue.Job) error {
	_, err := tx.ExecContext(ctx, db.Dialect.Rebind("INSERT INTO effects (job_id, attempt) VALUES (?, ?)"), job.ID, job.Attempts)
	return err
}

// A transactional handler's write, a follow-up it pushes and its job's
// end commit together: a run that fails (an error, a panic) leaves
// nothing, and the run that succeeds leaves its effect once.
func TestHandleTxAppliesTheEffectOnce(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := sqlQueue(t, db)
		w, _ := newWorker(t, q, worker.Options{Tries: 5, Backoff: []time.Duration{0}})
		var runs atomic.Int64
		worker.HandleTx(w, "charge", func(ctx context.Context, tx *sql.Tx, job *dbqueue.Job) error {
			n := runs.Add(1)
			if err := effect(ctx, db, tx, job); err != nil {
				return err
			}
			if _, err := q.PushTx(ctx, tx, dbqueue.NewJob{Name: "receipt", Queue: "next"}); err != nil {
				return err
			}
			switch n {
			case 1:
				return errors.New("card declined")
			case 2:
				panic("handler bug")
			}
			return nil
		})
		id, err := q.Push(bg, dbqueue.NewJob{Name: "charge"})
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range []worker.Outcome{worker.OutcomeReleased, worker.OutcomeReleased, worker.OutcomeDone} {
			res := runOnce(t, w)
			if len(res) != 1 || res[0].Outcome != want {
				t.Fatalf("run %d: %+v, want %s", i+1, res, want)
			}
			effects := db.Count(t, "SELECT COUNT(*) FROM effects")
			followUps := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE queue = 'next'")
			if want != worker.OutcomeDone && (effects != 0 || followUps != 0) {
				t.Fatalf("run %d failed but left %d effects and %d follow-ups", i+1, effects, followUps)
			}
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM effects WHERE job_id = ? AND attempt = 3", id); n != 1 {
			t.Fatalf("%d effects of the third run, want 1", n)
		}
		if db.Count(t, "SELECT COUNT(*) FROM effects") != 1 || db.Count(t, "SELECT COUNT(*) FROM jobs WHERE queue = 'next'") != 1 ||
			db.Count(t, "SELECT COUNT(*) FROM jobs WHERE id = ?", id) != 0 {
			t.Fatal("after the successful run: want one effect, one follow-up, and the job gone")
		}
	})
}

// A handler that overruns its timeout has its transaction rolled back:
// its write never lands, and the job is retried as any timed-out job.
func TestHandleTxTimeoutRollsBack(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := sqlQueue(t, db)
		w, _ := newWorker(t, q, worker.Options{Tries: 3, Timeout: 200 * time.Millisecond})
		worker.HandleTx(w, "slow", func(ctx context.Context, tx *sql.Tx, job *dbqueue.Job) error {
			if err := effect(ctx, db, tx, job); err != nil {
				return err
			}
			<-ctx.Done()
			return ctx.Err()
		})
		if _, err := q.Push(bg, dbqueue.NewJob{Name: "slow"}); err != nil {
			t.Fatal(err)
		}
		res := runOnce(t, w)
		if len(res) != 1 || res[0].Outcome != worker.OutcomeReleased {
			t.Fatalf("%+v, want released after its timeout", res)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM effects"); n != 0 {
			t.Fatalf("a timed-out run left %d effects", n)
		}
	})
}

// A worker stalls past retry_after and another takes its job; the first
// run's write must not land when its handler finally returns. (A
// middleware stands in for the stall, before the transaction begins, so
// SQLite's one writer is free for the takeover.)
func TestHandleTxStaleHolderAppliesNothing(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := sqlQueue(t, db)
		var taken *dbqueue.Job
		stall := func(next worker.HandlerFunc) worker.HandlerFunc {
			return func(ctx context.Context, job *dbqueue.Job) error {
				db.Exec(t, "UPDATE jobs SET reserved_at = reserved_at - 100000 WHERE id = ?", job.ID)
				jobs, err := q.Reserve(ctx, 1)
				if err != nil || len(jobs) != 1 {
					t.Errorf("takeover: %v %v", jobs, err)
				} else {
					taken = jobs[0]
				}
				return next(ctx, job)
			}
		}
		w, logs := newWorker(t, q, worker.Options{Middleware: []worker.Middleware{stall}})
		worker.HandleTx(w, "charge", func(ctx context.Context, tx *sql.Tx, job *dbqueue.Job) error {
			return effect(ctx, db, tx, job)
		})
		if _, err := q.Push(bg, dbqueue.NewJob{Name: "charge"}); err != nil {
			t.Fatal(err)
		}
		res := runOnce(t, w)
		if len(res) != 1 || res[0].Outcome != worker.OutcomeNotHeld {
			t.Fatalf("%+v, want not held", res)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM effects"); n != 0 {
			t.Fatalf("the stale run left %d effects", n)
		}
		if taken == nil {
			t.Fatal("no takeover")
		}
		if err := q.Delete(bg, taken); err != nil {
			t.Fatalf("the new holder's run was disturbed: %v\n%s", err, logs)
		}
	})
}

// Snooze, ReleaseAfter and Cancel from a transactional handler are
// written in its transaction, atomically with its writes.
func TestHandleTxSnoozeReleaseCancel(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := sqlQueue(t, db)
		var failed atomic.Int64
		w, _ := newWorker(t, q, worker.Options{Tries: 1, Events: worker.Events{
			JobFailed: func(context.Context, *dbqueue.Job, error) { failed.Add(1) },
		}})
		var runs atomic.Int64
		worker.HandleTx(w, "poll", func(ctx context.Context, tx *sql.Tx, job *dbqueue.Job) error {
			if err := effect(ctx, db, tx, job); err != nil {
				return err
			}
			switch runs.Add(1) {
			case 1, 2:
				return worker.Snooze(0) // Tries 1: a counted attempt would fail the job next time
			case 3:
				return worker.ReleaseAfter(time.Hour)
			}
			return worker.Cancel("the order was closed")
		})
		id, err := q.Push(bg, dbqueue.NewJob{Name: "poll"})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			res := runOnce(t, w)
			if len(res) != 1 || res[0].Outcome != worker.OutcomeSnoozed || res[0].Job.Attempts != 1 {
				t.Fatalf("snooze %d: %+v, want snoozed on attempt 1", i+1, res)
			}
		}
		res := runOnce(t, w)
		if len(res) != 1 || res[0].Outcome != worker.OutcomeReleased || res[0].Delay != time.Hour {
			t.Fatalf("release: %+v, want released for an hour", res)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE id = ? AND attempts = 1 AND available_at > "+db.Now()+" + 3000", id); n != 1 {
			t.Fatal("the release did not delay the job by an hour with its attempt counted")
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM effects"); n != 3 {
			t.Fatalf("%d effects after two snoozes and a release, want 3 (each written with its outcome)", n)
		}
		db.Exec(t, "UPDATE jobs SET available_at = "+db.Now()+", attempts = 0 WHERE id = ?", id)
		res = runOnce(t, w)
		if len(res) != 1 || res[0].Outcome != worker.OutcomeCancelled || !errors.Is(res[0].Err, dbqueue.ErrCancelled) {
			t.Fatalf("cancel: %+v, want cancelled", res)
		}
		var exception string
		if err := db.SQL.QueryRow("SELECT exception FROM failed_jobs").Scan(&exception); err != nil || !strings.Contains(exception, "cancelled by its handler: the order was closed") {
			t.Fatalf("failed_jobs: %q %v", exception, err)
		}
		if db.Count(t, "SELECT COUNT(*) FROM effects") != 4 || db.Count(t, "SELECT COUNT(*) FROM jobs") != 0 || failed.Load() != 1 {
			t.Fatalf("after the cancel: want 4 effects, no job, one JobFailed event (got %d)", failed.Load())
		}
	})
}

// Typed jobs register a transactional handler by their kind.
type refund struct {
	Order int64 `json:"order"`
}

func (refund) Kind() string { return "refund" }

func TestRegisterTxTypedJobs(t *testing.T) {
	db := dbtest.New(t, dbqueue.SQLite)
	q := sqlQueue(t, db)
	w, _ := newWorker(t, q, worker.Options{})
	worker.RegisterTx(w, func(ctx context.Context, tx *sql.Tx, job *dbqueue.Job, r refund) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO effects (job_id, attempt) VALUES (?, ?)", r.Order, job.Attempts)
		return err
	})
	if _, err := dbqueue.PushArgs(bg, q, refund{Order: 42}); err != nil {
		t.Fatal(err)
	}
	if res := runOnce(t, w); len(res) != 1 || res[0].Outcome != worker.OutcomeDone {
		t.Fatalf("%+v", res)
	}
	if n := db.Count(t, "SELECT COUNT(*) FROM effects WHERE job_id = 42"); n != 1 {
		t.Fatalf("%d effects for order 42, want 1", n)
	}
}

// A queue on a pgx pool gives its handlers a pgx.Tx, or a *sql.Tx.
func TestHandleTxPgx(t *testing.T) {
	db := dbtest.New(t, dbqueue.Postgres)
	pool, err := pgxpool.New(bg, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	q, err := dbqueue.New(bg, dbqpgx.New(pool))
	if err != nil {
		t.Fatal(err)
	}
	db.Exec(t, "CREATE TABLE effects (job_id BIGINT NOT NULL, attempt INT NOT NULL)")
	w, _ := newWorker(t, q, worker.Options{Tries: 3, Backoff: []time.Duration{0}})
	var runs atomic.Int64
	worker.HandleTx(w, "charge", func(ctx context.Context, tx pgx.Tx, job *dbqueue.Job) error {
		if _, err := tx.Exec(ctx, "INSERT INTO effects (job_id, attempt) VALUES ($1, $2)", job.ID, job.Attempts); err != nil {
			return err
		}
		if _, err := dbqpgx.PushTx(ctx, q, tx, dbqueue.NewJob{Name: "receipt", Queue: "next"}); err != nil {
			return err
		}
		if runs.Add(1) == 1 {
			return errors.New("try again")
		}
		return nil
	})
	if _, err := q.Push(bg, dbqueue.NewJob{Name: "charge"}); err != nil {
		t.Fatal(err)
	}
	runOnce(t, w)
	if res := runOnce(t, w); len(res) != 1 || res[0].Outcome != worker.OutcomeDone {
		t.Fatalf("%+v", res)
	}
	if db.Count(t, "SELECT COUNT(*) FROM effects") != 1 || db.Count(t, "SELECT COUNT(*) FROM jobs WHERE queue = 'next'") != 1 {
		t.Fatal("want one effect and one follow-up")
	}

	// A *sql.Tx handler on the same pgx pool.
	worker.HandleTx(w, "refund", func(ctx context.Context, tx *sql.Tx, job *dbqueue.Job) error {
		if _, err := tx.ExecContext(ctx, "INSERT INTO effects (job_id, attempt) VALUES ($1, $2)", job.ID, -1); err != nil {
			return err
		}
		_, err := q.PushTx(ctx, tx, dbqueue.NewJob{Name: "receipt", Queue: "next"})
		return err
	})
	if _, err := q.Push(bg, dbqueue.NewJob{Name: "refund"}); err != nil {
		t.Fatal(err)
	}
	if res := runOnce(t, w); len(res) != 1 || res[0].Outcome != worker.OutcomeDone {
		t.Fatalf("*sql.Tx handler on a pgx pool: %+v", res)
	}
	if db.Count(t, "SELECT COUNT(*) FROM effects WHERE attempt = -1") != 1 || db.Count(t, "SELECT COUNT(*) FROM jobs WHERE queue = 'next'") != 2 {
		t.Fatal("the *sql.Tx handler on a pgx pool: want its effect and its follow-up")
	}
}

// A database/sql pool cannot give a pgx.Tx: registering one says which
// type to use instead.
func TestHandleTxRefusesAnotherTxType(t *testing.T) {
	db := dbtest.New(t, dbqueue.SQLite)
	w, _ := newWorker(t, sqlQueue(t, db), worker.Options{})
	defer func() {
		v := recover()
		if s, _ := v.(string); !strings.Contains(s, "*sql.Tx") || !strings.Contains(s, "pgx.Tx") {
			t.Fatalf("registering a pgx.Tx handler on a database/sql queue: %v", v)
		}
	}()
	worker.HandleTx(w, "wrong", func(context.Context, pgx.Tx, *dbqueue.Job) error { return nil })
}

// The reply to a transactional handler's COMMIT is lost after the server
// committed. The worker must find out the job is done — not release it,
// not run it again — so its effect stays applied exactly once.
//
// And when the COMMIT itself is lost on its way, the server rolls back:
// the worker must find that out too and run the job again, once.
func TestHandleTxCommitReplyLost(t *testing.T) {
	for _, c := range []struct {
		d    dbqueue.Dialect
		lost bool
	}{{dbqueue.Postgres, false}, {dbqueue.MySQL, false}, {dbqueue.Postgres, true}, {dbqueue.MySQL, true}} {
		d := c.d
		name := string(d) + "/reply-lost"
		if c.lost {
			name = string(d) + "/commit-lost"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := dbtest.New(t, d)
			proxy, dsn := db.HoldProxy(t)
			q, err := dbqueue.Open(bg, dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			db.Exec(t, "CREATE TABLE effects (job_id BIGINT NOT NULL, attempt INT NOT NULL)")
			w, logs := newWorker(t, q, worker.Options{Tries: 3, Backoff: []time.Duration{0}})
			var runs atomic.Int64
			insert := db.Dialect.Rebind("INSERT INTO effects (job_id, attempt) VALUES (?, ?)")
			fault := func(run int64) { // on the first run's COMMIT
				switch {
				case run > 1:
				case c.lost:
					proxy.LoseCommit()
				default:
					proxy.DropCommitReply()
				}
			}
			if d == dbqueue.Postgres {
				worker.HandleTx(w, "charge", func(ctx context.Context, tx pgx.Tx, job *dbqueue.Job) error {
					runs.Add(1)
					_, err := tx.Exec(ctx, insert, job.ID, job.Attempts)
					fault(runs.Load())
					return err
				})
			} else {
				worker.HandleTx(w, "charge", func(ctx context.Context, tx *sql.Tx, job *dbqueue.Job) error {
					runs.Add(1)
					_, err := tx.ExecContext(ctx, insert, job.ID, job.Attempts)
					fault(runs.Load())
					return err
				})
			}
			id, err := q.Push(bg, dbqueue.NewJob{Name: "charge"})
			if err != nil {
				t.Fatal(err)
			}
			res := runOnce(t, w)
			if c.lost {
				if len(res) != 1 || res[0].Outcome != worker.OutcomeReleased || db.Count(t, "SELECT COUNT(*) FROM effects") != 0 {
					t.Fatalf("%+v, want released with nothing applied: the commit never happened\n%s", res, logs)
				}
				if res = runOnce(t, w); len(res) != 1 || res[0].Outcome != worker.OutcomeDone {
					t.Fatalf("second run: %+v, want done", res)
				}
				runs.Add(-1) // the run that rolled back
			} else if len(res) != 1 || res[0].Outcome != worker.OutcomeDone {
				t.Fatalf("%+v, want done: the commit happened\n%s", res, logs)
			}
			if again := runOnce(t, w); len(again) != 0 {
				t.Fatalf("the job ran again: %+v", again)
			}
			if runs.Load() != 1 || db.Count(t, "SELECT COUNT(*) FROM effects") != 1 || db.Count(t, "SELECT COUNT(*) FROM jobs WHERE id = ?", id) != 0 {
				t.Fatalf("%d runs, %d effects, job row left %d: want 1, 1, 0", runs.Load(), db.Count(t, "SELECT COUNT(*) FROM effects"),
					db.Count(t, "SELECT COUNT(*) FROM jobs WHERE id = ?", id))
			}
		})
	}
}

// A plain handler snoozes and cancels too: the snoozed job comes back on
// the same attempt, and the cancelled one is in failed_jobs, saying so,
// with the failure hooks run.
func TestSnoozeAndCancelFromAPlainHandler(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		var hooked atomic.Int64
		w, _ := newWorker(t, q, worker.Options{Tries: 1})
		var runs atomic.Int64
		w.Handle("wait", func(ctx context.Context, job *dbqueue.Job) error {
			if runs.Add(1) <= 2 {
				return worker.Snooze(0)
			}
			return worker.Cancel("nothing to wait for")
		}, worker.OnFailure(func(_ context.Context, _ *dbqueue.Job, cause error) {
			if errors.Is(cause, dbqueue.ErrCancelled) {
				hooked.Add(1)
			}
		}))
		if _, err := q.Push(bg, dbqueue.NewJob{Name: "wait"}); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			res := runOnce(t, w)
			if len(res) != 1 || res[0].Outcome != worker.OutcomeSnoozed || res[0].Job.Attempts != 1 {
				t.Fatalf("snooze %d: %+v, want snoozed on attempt 1 (Tries 1)", i+1, res)
			}
		}
		res := runOnce(t, w)
		if len(res) != 1 || res[0].Outcome != worker.OutcomeCancelled {
			t.Fatalf("%+v, want cancelled", res)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM failed_jobs WHERE exception LIKE '%cancelled by its handler: nothing to wait for%'"); n != 1 || hooked.Load() != 1 {
			t.Fatalf("%d cancelled rows in failed_jobs, %d failure hooks; want 1 and 1", n, hooked.Load())
		}
	})
}

// A batch of transactional jobs counts each job in the transaction that
// completes it, and its callbacks fire once, after the last commit; a
// chain's next link is pushed in the transaction of the link before.
func TestHandleTxBatchesAndChains(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := sqlQueue(t, db)
		w, _ := newWorker(t, q, worker.Options{})
		var then, finally atomic.Int64
		w.OnBatch("charges", worker.BatchCallbacks{
			Then:    func(context.Context, *dbqueue.Batch) { then.Add(1) },
			Finally: func(context.Context, *dbqueue.Batch) { finally.Add(1) },
		})
		worker.HandleTx(w, "charge", func(ctx context.Context, tx *sql.Tx, job *dbqueue.Job) error {
			return effect(ctx, db, tx, job)
		})
		b, err := q.Batch(bg, dbqueue.BatchOptions{Name: "charges"}, dbqueue.NewJob{Name: "charge"}, dbqueue.NewJob{Name: "charge"})
		if err != nil {
			t.Fatal(err)
		}
		if res := runOnce(t, w); len(res) != 2 || res[0].Outcome != worker.OutcomeDone || res[1].Outcome != worker.OutcomeDone {
			t.Fatalf("%+v", res)
		}
		got, err := q.FindBatch(bg, b.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !got.Finished() || got.PendingJobs != 0 || then.Load() != 1 || finally.Load() != 1 {
			t.Fatalf("batch %+v, then %d, finally %d; want finished, then and finally once", got, then.Load(), finally.Load())
		}

		if _, err := q.PushChain(bg, dbqueue.NewJob{Name: "charge"}, dbqueue.NewJob{Name: "charge"}); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			if res := runOnce(t, w); len(res) != 1 || res[0].Outcome != worker.OutcomeDone {
				t.Fatalf("chain link %d: %+v", i+1, res)
			}
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM effects"); n != 4 || db.Count(t, "SELECT COUNT(*) FROM jobs") != 0 {
			t.Fatalf("%d effects, want 4 and no job left", n)
		}
	})
}

// A handler that commits its transaction itself gets an error that says
// to leave the commit to the worker.
func TestHandleTxSelfCommitSaysWhatToDo(t *testing.T) {
	db := dbtest.New(t, dbqueue.SQLite)
	q := sqlQueue(t, db)
	w, _ := newWorker(t, q, worker.Options{Tries: 1})
	worker.HandleTx(w, "eager", func(ctx context.Context, tx *sql.Tx, job *dbqueue.Job) error {
		return tx.Commit()
	})
	if _, err := q.Push(bg, dbqueue.NewJob{Name: "eager"}); err != nil {
		t.Fatal(err)
	}
	res := runOnce(t, w)
	if len(res) != 1 || res[0].Err == nil || !strings.Contains(res[0].Err.Error(), "leave that to the worker") {
		t.Fatalf("%+v, want an error saying to leave the commit to the worker", res)
	}
}
