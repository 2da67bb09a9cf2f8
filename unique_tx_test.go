package dbqueue_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/driver/dbqpgx"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/internal/queueside"
)

// uniqueTx is a caller's transaction of either kind that unique jobs are
// pushed in.
type uniqueTx interface {
	push(job dbqueue.NewJob, u dbqueue.Unique) (int64, bool, error)
	session() (int64, error) // the server's id of its connection; 0 on SQLite
	end(commit bool) error
}

type sqlUniqueTx struct {
	q  *dbqueue.Queue
	tx *sql.Tx
	d  dbqueue.Dialect
}

func (s sqlUniqueTx) push(job dbqueue.NewJob, u dbqueue.Unique) (int64, bool, error) {
	return s.q.PushUniqueTx(ctx, s.tx, job, u)
}

func (s sqlUniqueTx) session() (int64, error) {
	var id int64
	switch s.d {
	case dbqueue.Postgres:
		return id, s.tx.QueryRow("SELECT pg_backend_pid()").Scan(&id)
	case dbqueue.MySQL:
		return id, s.tx.QueryRow("SELECT CONNECTION_ID()").Scan(&id)
	}
	return 0, nil
}

func (s sqlUniqueTx) end(commit bool) error {
	if commit {
		return s.tx.Commit()
	}
	return s.tx.Rollback()
}

type pgxUniqueTx struct {
	q  *dbqueue.Queue
	tx pgx.Tx
}

func (p pgxUniqueTx) push(job dbqueue.NewJob, u dbqueue.Unique) (int64, bool, error) {
	return dbqpgx.PushUniqueTx(ctx, p.q, p.tx, job, u)
}

func (p pgxUniqueTx) session() (int64, error) {
	var id int64
	return id, p.tx.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&id)
}

func (p pgxUniqueTx) end(commit bool) error {
	if commit {
		return p.tx.Commit(ctx)
	}
	return p.tx.Rollback(ctx)
}

// lockWaiting reports whether the session waits on a row lock: on
// PostgreSQL, its backend's wait event says so; on MariaDB, whose lock
// views do not always show a wait on a row another transaction inserted,
// the session has been in a statement on the lock table for 200ms, which
// a push that is not waiting never takes.
func lockWaiting(t *testing.T, db *dbtest.DB, session int64) bool {
	t.Helper()
	var n int
	var err error
	switch db.Dialect {
	case dbqueue.Postgres:
		err = db.SQL.QueryRow("SELECT COUNT(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'", session).Scan(&n)
	case dbqueue.MySQL:
		err = db.SQL.QueryRow("SELECT COUNT(*) FROM information_schema.processlist WHERE id = ? AND info LIKE '%dbqueue_unique%' AND time_ms >= 200", session).Scan(&n)
	}
	if err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// contendUnique pushes one unique job in a transaction, then the same key
// in a second transaction, which must wait on the first (seen waiting on a
// lock by the server; on SQLite the first holds the database). When the
// first commits, the second finds its job; when it rolls back, its lock
// went with it and the second queues the job. Never are both queued.
func contendUnique(t *testing.T, db *dbtest.DB, name string, begin func() (uniqueTx, error)) {
	t.Helper()
	type result struct {
		id  int64
		dup bool
		err error
		tx  uniqueTx
	}
	for _, commit := range []bool{true, false} {
		queue := fmt.Sprintf("contend-%s-%v", name, commit)
		job := dbqueue.NewJob{Name: "invoice", Data: report{Account: 3}, Queue: queue}
		u := dbqueue.Unique{PerQueue: true}
		tx1, err := begin()
		if err != nil {
			t.Fatal(err)
		}
		sessions, done := make(chan int64, 1), make(chan result, 1)
		var (
			r   result
			got bool
		)
		// Both transactions end before the cleanup drops the database
		// (an open one would hold it), whatever failed.
		t.Cleanup(func() {
			_ = tx1.end(false)
			if !got {
				r = <-done
			}
			if r.tx != nil {
				_ = r.tx.end(false)
			}
		})
		first, dup, err := tx1.push(job, u)
		if err != nil || dup {
			close(sessions)
			done <- result{}
			t.Fatalf("first push: %d, duplicate %v, %v", first, dup, err)
		}
		go func() {
			tx2, err := begin()
			if err != nil {
				sessions <- 0
				done <- result{err: err}
				return
			}
			s, err := tx2.session()
			sessions <- s
			if err != nil {
				done <- result{err: err, tx: tx2}
				return
			}
			id, dup, err := tx2.push(job, u)
			done <- result{id, dup, err, tx2}
		}()
		if db.Dialect != dbqueue.SQLite {
			s := <-sessions
			dbtest.WaitFor(t, 30*time.Second, "the second push to wait on the first one's lock", func() bool {
				select {
				case r, got = <-done:
					t.Fatalf("commit %v: the second push returned (%d, duplicate %v, %v) while the first transaction was open", commit, r.id, r.dup, r.err)
				default:
				}
				return lockWaiting(t, db, s)
			})
		}
		if err := tx1.end(commit); err != nil {
			t.Fatal(err)
		}
		r, got = <-done, true
		if r.err != nil {
			t.Fatalf("commit %v: second push: %v", commit, r.err)
		}
		if err := r.tx.end(true); err != nil {
			t.Fatal(err)
		}
		switch {
		case commit && (!r.dup || r.id != first):
			t.Fatalf("first committed job %d; the second push got %d, duplicate %v; want a duplicate of %d", first, r.id, r.dup, first)
		case !commit && r.dup: // SQLite may give the new job the rolled-back id
			t.Fatalf("first rolled back job %d; the second push got %d, duplicate %v; want a new job (the lock went with the rollback)", first, r.id, r.dup)
		}
		ids := db.IDs(t, "SELECT id FROM jobs WHERE queue = ?", queue)
		if len(ids) != 1 || ids[0] != r.id {
			t.Fatalf("commit %v: jobs on %s: %v; want only job %d", commit, queue, ids, r.id)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM dbqueue_unique WHERE job_id = ?", r.id); n != 1 {
			t.Fatalf("commit %v: %d locks name job %d, want 1", commit, n, r.id)
		}
	}
}

// Two database/sql transactions push one unique key: the second waits for
// the first and is refused if it committed, queues the job if it rolled
// back — on every database, in every MySQL DSN setting (clientFoundRows
// reports rows matched, not changed), at the default isolation and at
// REPEATABLE READ (MySQL's default).
func TestPushUniqueTxContended(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		levels := map[string]*sql.TxOptions{"default": nil}
		if db.Dialect == dbqueue.MySQL {
			levels["read-committed"] = &sql.TxOptions{Isolation: sql.LevelReadCommitted}
		}
		for name, dsn := range dsnVariants(db) {
			parsed, err := dbqueue.ParseDSN(dsn)
			if err != nil {
				t.Fatal(err)
			}
			conn, err := sql.Open(parsed.Driver, parsed.Conn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { conn.Close() })
			q := (&dbtest.DB{Dialect: db.Dialect, DSN: dsn}).Queue(t)
			for level, opts := range levels {
				t.Run(name+"/"+level, func(t *testing.T) {
					contendUnique(t, db, name+"-"+level, func() (uniqueTx, error) {
						tx, err := conn.BeginTx(ctx, opts)
						return sqlUniqueTx{q: q, tx: tx, d: db.Dialect}, err
					})
				})
			}
		}
	})
}

// pgxPool opens a pgx pool and a queue on it over a fresh PostgreSQL
// database, with pgx's query exec mode set to mode, and returns the
// application name its sessions carry, so pg_stat_activity can tell them
// from other tests' on the shared server.
func pgxPool(t *testing.T, db *dbtest.DB, mode string) (*pgxpool.Pool, *dbqueue.Queue, string) {
	t.Helper()
	app := fmt.Sprintf("dbq-unique-%s-%d", mode, time.Now().UnixNano())
	dsn := dbtest.WithQuery(db.DSN, "default_query_exec_mode", mode)
	pool, err := pgxpool.New(ctx, dbtest.WithQuery(dsn, "application_name", app))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	q, err := dbqueue.New(ctx, dbqpgx.New(pool))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return pool, q, app
}

// The same race in pgx transactions, in each of pgx's exec modes; and a
// push outside any transaction waits for a pgx transaction holding the
// key, too.
func TestPushUniquePgxTxContended(t *testing.T) {
	db := dbtest.New(t, dbqueue.Postgres)
	for _, mode := range dbtest.PgxExecModes {
		t.Run(mode, func(t *testing.T) {
			pool, q, _ := pgxPool(t, db, mode)
			contendUnique(t, db, "pgx-"+mode, func() (uniqueTx, error) {
				tx, err := pool.Begin(ctx)
				return pgxUniqueTx{q: q, tx: tx}, err
			})
		})
	}

	pool, q, app := pgxPool(t, db, "cache_statement")
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	job := dbqueue.NewJob{Name: "invoice", Data: report{Account: 9}, Queue: "pgx-then-plain"}
	first, dup, err := dbqpgx.PushUniqueTx(ctx, q, tx, job, dbqueue.Unique{})
	if err != nil || dup {
		t.Fatalf("PushUniqueTx: %d, duplicate %v, %v", first, dup, err)
	}
	type result struct {
		id  int64
		dup bool
		err error
	}
	done := make(chan result, 1)
	go func() {
		id, dup, err := q.PushUnique(ctx, job, dbqueue.Unique{})
		done <- result{id, dup, err}
	}()
	dbtest.WaitFor(t, 10*time.Second, "PushUnique to wait on the pgx transaction's lock", func() bool {
		// The pool's own sessions, named apart from other tests' (the
		// schema is this test's own, the server is shared).
		return db.Count(t, "SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = ? AND wait_event_type = 'Lock'", app) > 0
	})
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.err != nil || !r.dup || r.id != first {
		t.Fatalf("PushUnique after the pgx transaction committed job %d: %d, duplicate %v, %v", first, r.id, r.dup, r.err)
	}
}

// In a pgx transaction: a rollback takes the lock away; a commit keeps it;
// PushTx of jobs with Unique takes the locks too; and the errors name the
// function.
func TestPushUniquePgxTx(t *testing.T) {
	db := dbtest.New(t, dbqueue.Postgres)
	pool, q, _ := pgxPool(t, db, "cache_statement")
	job := dbqueue.NewJob{Name: "invoice", Data: report{Account: 1}}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, dup, err := dbqpgx.PushUniqueTx(ctx, q, tx, job, dbqueue.Unique{}); err != nil || dup {
		t.Fatalf("PushUniqueTx: duplicate %v, %v", dup, err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n := db.Count(t, "SELECT COUNT(*) FROM dbqueue_unique"); n != 0 {
		t.Fatalf("%d locks after the rollback, want 0", n)
	}
	id, dup := pushUnique(t, q, job, dbqueue.Unique{})
	if dup {
		t.Fatal("a rolled-back pgx push left its lock")
	}

	tx, err = pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got, dup, err := dbqpgx.PushUniqueTx(ctx, q, tx, job, dbqueue.Unique{})
	if err != nil || !dup || got != id {
		t.Fatalf("PushUniqueTx of a queued job: %d, duplicate %v, %v; want a duplicate of %d", got, dup, err, id)
	}
	other := dbqueue.NewJob{Name: "invoice", Data: report{Account: 2}, Unique: &dbqueue.Unique{}}
	withLock := job
	withLock.Unique = &dbqueue.Unique{}
	ids, err := dbqpgx.PushTx(ctx, q, tx, withLock, other, other, dbqueue.NewJob{Name: "plain"})
	if err != nil {
		t.Fatal(err)
	}
	if ids[0] != id || ids[1] != ids[2] || ids[1] == id || ids[3] == ids[1] {
		t.Fatalf("PushTx ids %v: want [%d (the queued duplicate), new, the same new, another]", ids, id)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 3 {
		t.Fatalf("%d jobs, want 3 (account 1, account 2, plain)", n)
	}

	sqliteQ := dbtest.New(t, dbqueue.SQLite).Queue(t)
	tx, err = pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, c := range []struct {
		q    *dbqueue.Queue
		tx   pgx.Tx
		want string
	}{
		{q, nil, "dbqpgx.PushUniqueTx: nil pgx.Tx"},
		{nil, tx, "dbqpgx.PushUniqueTx: nil queue"},
		{sqliteQ, tx, "a pgx transaction is a PostgreSQL one"},
	} {
		if _, _, err := dbqpgx.PushUniqueTx(ctx, c.q, c.tx, job, dbqueue.Unique{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("err %v, want one saying %q", err, c.want)
		}
	}
}

// A key given twice in one push is taken once: the later job is a
// duplicate of the first, in PushMany as in a transaction.
func TestPushManyUniqueRepeatedKey(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		u := &dbqueue.Unique{Key: "once"}
		ids, err := q.PushMany(ctx, []dbqueue.NewJob{
			{Name: "a", Unique: u}, {Name: "plain"}, {Name: "b", Unique: u}, {Name: "c", Unique: &dbqueue.Unique{Key: "twice"}}, {Name: "d", Unique: u},
		})
		if err != nil {
			t.Fatal(err)
		}
		if ids[0] != ids[2] || ids[0] != ids[4] || ids[1] == ids[0] || ids[3] == ids[0] || ids[3] == ids[1] {
			t.Fatalf("ids %v: want the first job's id at 0, 2 and 4, new ones at 1 and 3", ids)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 3 {
			t.Fatalf("%d jobs, want 3", n)
		}
		if got := db.IDs(t, "SELECT job_id FROM dbqueue_unique ORDER BY job_id"); len(got) != 2 || got[0] != ids[0] || got[1] != ids[3] {
			t.Fatalf("locks held by %v, want [%d %d]", got, ids[0], ids[3])
		}
		// The same in the caller's transaction, the keys now held.
		tx, err := db.SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		again, err := q.PushTx(ctx, tx, dbqueue.NewJob{Name: "d", Unique: u}, dbqueue.NewJob{Name: "e", Unique: &dbqueue.Unique{Key: "twice"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if again[0] != ids[0] || again[1] != ids[3] {
			t.Fatalf("PushTx of held keys: %v, want [%d %d]", again, ids[0], ids[3])
		}
	})
}

// Transactions push overlapping sets of unique keys in every order, many
// at once: each push takes its locks in key order, so none deadlocks (a
// caller's transaction is not retried, so a deadlock would reach it), and
// each key is queued once.
func TestPushTxUniqueKeyOrder(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		if db.Dialect == dbqueue.SQLite {
			t.Skip("SQLite's write transactions never overlap")
		}
		q := db.Queue(t)
		orders := [][]string{{"a", "b", "c"}, {"c", "b", "a"}, {"b", "a", "c"}, {"c", "a", "b"}}
		for round := range 6 {
			start := make(chan struct{})
			errs := make(chan error, 8)
			for g := range 8 {
				go func() {
					<-start
					jobs := make([]dbqueue.NewJob, 0, 3)
					for _, k := range orders[g%len(orders)] {
						jobs = append(jobs, dbqueue.NewJob{Name: "k", Unique: &dbqueue.Unique{Key: fmt.Sprintf("%d-%s", round, k)}})
					}
					tx, err := db.SQL.BeginTx(ctx, nil)
					if err != nil {
						errs <- err
						return
					}
					if _, err := q.PushTx(ctx, tx, jobs...); err != nil {
						_ = tx.Rollback()
						errs <- err
						return
					}
					errs <- tx.Commit()
				}()
			}
			close(start)
			for range 8 {
				if err := <-errs; err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
			}
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 18 {
			t.Fatalf("%d jobs, want 18 (3 keys × 6 rounds)", n)
		}
	})
}

// Chains, batches and periodic ticks take no unique locks: a job that asks
// for one is refused, not queued without it. An invalid Unique on a plain
// push is refused as PushUnique refuses it.
func TestUniqueRefusedWhereNoLockIsTaken(t *testing.T) {
	db := dbtest.New(t, dbqueue.SQLite)
	q := db.Queue(t)
	u := dbqueue.NewJob{Name: "u", Unique: &dbqueue.Unique{}}
	if _, err := q.PushChain(ctx, dbqueue.NewJob{Name: "first"}, u); err == nil || !strings.Contains(err.Error(), "a chain takes no unique locks") {
		t.Errorf("PushChain: %v", err)
	}
	if _, err := q.Batch(ctx, dbqueue.BatchOptions{}, u); err == nil || !strings.Contains(err.Error(), "a batch takes no unique locks") {
		t.Errorf("Batch: %v", err)
	}
	ticks := queueside.Of(q)
	if _, _, err := ticks.PushScheduledTick(ctx, u, "s", "@every 1m", 60, 120, 60); err == nil || !strings.Contains(err.Error(), "each tick is pushed once already") {
		t.Errorf("PushScheduledTick: %v", err)
	}
	if _, err := q.Push(ctx, dbqueue.NewJob{Name: "x", Unique: &dbqueue.Unique{For: -1}}); err == nil || !strings.Contains(err.Error(), "Unique.For") {
		t.Errorf("Push with an invalid Unique: %v", err)
	}
	if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 0 {
		t.Fatalf("%d jobs queued, want 0", n)
	}
	if n := db.Count(t, "SELECT COUNT(*) FROM job_batches"); n != 0 {
		t.Fatalf("%d batches, want 0", n)
	}
}

// Unique pushes go through the queue's push middleware like any other:
// the header it sets is on the job, and the duplicate is still reported.
func TestPushUniqueThroughMiddleware(t *testing.T) {
	db := dbtest.New(t, dbqueue.SQLite)
	calls := 0
	q := db.Queue(t, dbqueue.WithPushMiddleware(func(ctx context.Context, jobs []dbqueue.NewJob, next dbqueue.PushFunc) ([]int64, error) {
		calls++
		for i := range jobs {
			jobs[i].SetHeader("trace", "t-1")
		}
		return next(ctx, jobs)
	}))
	job := dbqueue.NewJob{Name: "mw"}
	id, dup := pushUnique(t, q, job, dbqueue.Unique{})
	again, dup2 := pushUnique(t, q, job, dbqueue.Unique{})
	if dup || !dup2 || again != id || calls != 2 {
		t.Fatalf("pushes: %d %v, %d %v, %d middleware calls; want a job, then its duplicate, 2 calls", id, dup, again, dup2, calls)
	}
	j, err := q.Job(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if j.Payload.Headers["trace"] != "t-1" {
		t.Fatalf("headers %v: the middleware's header is missing", j.Payload.Headers)
	}
}
