//go:build linux

package pgbouncer_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/driver/dbqpgx"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/worker"
)

// TestListenDSNWakesWorker runs a worker whose queue's pool goes through
// PgBouncer in transaction pooling mode and which LISTENs on a direct
// connection (WithListenDSN). Once the worker has backed off to a poll wait
// of seconds, a job pushed by another queue through PgBouncer must start
// long before that wait ends: only the NOTIFY, sent through PgBouncer
// inside the push's transaction and heard on the direct connection, can
// have woken it.
func TestListenDSNWakesWorker(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db := dbtest.NewDatabase(t)
	bouncer := dbtest.StartPgBouncer(t, db.DSN, 4)
	through := dbtest.PgBouncerQueueDSN(bouncer.DSN, "exec")

	q, err := dbqueue.Open(ctx, through, dbqueue.WithListenDSN(dbtest.WithAppName(dbqueue.Postgres, db.DSN, listenApp)))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	pusher, err := dbqueue.Open(ctx, through, dbqueue.WithoutListen())
	if err != nil {
		t.Fatal(err)
	}
	defer pusher.Close()

	loops := make(chan time.Time, 64)
	started := make(chan time.Time, 1)
	w, err := worker.New(q, worker.Options{
		Concurrency: 1,
		Logger:      slog.New(slog.DiscardHandler),
		Sleep:       time.Minute,
		// The signal check wakes the loop each time it runs: keep it out
		// of the way, so that only polls and wake-ups remain.
		SignalInterval: time.Minute,
		Events: worker.Events{Looping: func(context.Context) {
			select {
			case loops <- time.Now():
			default:
			}
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	w.Handle("wake", func(context.Context, *dbqueue.Job) error {
		started <- time.Now()
		return nil
	})
	ran := make(chan error, 1)
	go func() { ran <- w.Run(ctx) }()
	defer func() { cancel(); <-ran }()

	// The LISTEN is up on the direct connection.
	dbtest.WaitFor(t, 20*time.Second, "the worker LISTENs on the direct connection", func() bool {
		var n int
		if err := db.SQL.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = $1 AND query LIKE 'LISTEN %'`, listenApp).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	})
	// The worker's idle wait doubles from 10ms: two polls 2.5s apart mean
	// the wait it has just begun is at least 2.5s (and is likely 5s).
	var last time.Time
	timeout := time.After(30 * time.Second)
wait:
	for {
		select {
		case at := <-loops:
			if !last.IsZero() && at.Sub(last) >= 2500*time.Millisecond {
				break wait
			}
			last = at
		case <-timeout:
			t.Fatal("the worker did not back off to a 2.5s poll wait within 30s")
		}
	}
	pushed := time.Now()
	if _, err := pusher.Push(ctx, dbqueue.NewJob{Name: "wake"}); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-started:
		took := at.Sub(pushed)
		t.Logf("the job started %v after its push", took.Round(time.Millisecond))
		if took >= 2*time.Second {
			t.Errorf("the job started %v after its push, as a poll would: LISTEN did not wake the worker", took)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the job did not start within 10s of its push")
	}
}

// TestBulkPushThroughPgBouncer pushes 10,000 jobs, ten INSERTs in one
// transaction, through PgBouncer in each exec mode that suits it: a
// transaction pooler keeps the transaction on one server connection, and
// the ids come back in order from the statements that wrote them.
func TestBulkPushThroughPgBouncer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.NewDatabase(t)
	bouncer := dbtest.StartPgBouncer(t, db.DSN, 2)
	for _, mode := range []string{"exec", "simple_protocol"} {
		q, err := dbqueue.Open(ctx, dbtest.PgBouncerQueueDSN(bouncer.DSN, mode), dbqueue.WithoutListen())
		if err != nil {
			t.Fatal(err)
		}
		jobs := make([]dbqueue.NewJob, 10_000)
		for i := range jobs {
			jobs[i] = dbqueue.NewJob{Name: "bulk", Queue: mode}
		}
		ids, err := q.PushMany(ctx, jobs)
		q.Close()
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		n := db.Count(t, "SELECT count(*) FROM jobs WHERE queue = ? AND id BETWEEN ? AND ?", mode, ids[0], ids[len(ids)-1])
		if len(ids) != len(jobs) || n != len(jobs) {
			t.Errorf("%s: PushMany of %d jobs returned %d ids; %d rows have them", mode, len(jobs), len(ids), n)
		}
	}
}

// TestStatementCacheHint shows what goes wrong with pgx's default exec mode
// behind PgBouncer in transaction pooling mode, and that dbqueue's error
// says what to do: a statement pgx prepared on one server connection is
// used on another, where it does not exist.
func TestStatementCacheHint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.NewDatabase(t)
	bouncer := dbtest.StartPgBouncer(t, db.DSN, 2)
	q, pool := openQueue(ctx, t, bouncer.DSN, 1) // pgx's default: cache_statement
	defer pool.Close()
	defer q.Close()
	// PgBouncer has two server connections. Which one a client gets is
	// PgBouncer's choice, so the test leaves it none: a transaction holds
	// one while the push prepares its statement on the other, a second
	// transaction then takes that one, and the first lets its own go.
	// (Leaving the choice to PgBouncer's reuse order flaked: now and then
	// the second push found its statement prepared where it ran.)
	hold := func() pgx.Tx {
		c, err := pgx.Connect(ctx, dbtest.PgBouncerQueueDSN(bouncer.DSN, "exec"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		tx, err := c.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "SELECT 1"); err != nil {
			t.Fatal(err)
		}
		return tx
	}
	first := hold()
	if _, err := q.Push(ctx, dbqueue.NewJob{Name: "x"}); err != nil {
		t.Fatal(err)
	}
	second := hold() // the connection the push prepared its statement on
	defer second.Rollback(ctx)
	if err := first.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// The next push can only run on the connection first held.
	var err error
	_, err = q.Push(ctx, dbqueue.NewJob{Name: "x"})
	if err == nil {
		t.Fatal("a cached statement ran on a server connection it was not prepared on: is PgBouncer in transaction pooling mode?")
	}
	t.Log(err)
	if !strings.Contains(err.Error(), "default_query_exec_mode=exec") {
		t.Errorf("the error does not say to set default_query_exec_mode: %v", err)
	}
}

// openQueue opens a pgx pool of at most maxConns connections on dsn and a
// queue on it that does not LISTEN (nothing would come back through a
// transaction pooler). The caller closes both.
func openQueue(ctx context.Context, t testing.TB, dsn string, maxConns int32) (*dbqueue.Queue, *pgxpool.Pool) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	q, err := dbqueue.New(ctx, dbqpgx.New(pool), dbqueue.WithoutListen())
	if err != nil {
		pool.Close()
		t.Fatal(err)
	}
	return q, pool
}
