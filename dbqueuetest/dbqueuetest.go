// Package dbqueuetest gives tests of code that enqueues and works jobs a
// real queue: New is a migrated SQLite database in the test's temporary
// directory that needs no server; NewDSN and NewEnv put a table set of the
// test's own on a PostgreSQL or MySQL server, dropped when the test ends.
// Pushed and PushedArgs show what the code under test enqueued; Work runs
// the ready jobs through a worker's handlers once and says what became of
// each. It is to dbqueue what httptest is to net/http.
//
// What dbqueue logs goes to the test's log, not to stderr: the
// migrations New and NewDSN run, and the workers NewWorker makes, log
// through Logger(t).
//
// # Laravel's table names
//
// New's tables are Laravel's jobs and failed_jobs, in a SQLite file of
// the test's own. NewDSN's are prefixed (dbqt_<hex>_jobs), so tests in
// parallel on one server never meet: application code that takes its
// table names from the queue (Queue.Tables) works on them unchanged. When
// the application's own SQL reads jobs by that name, use
// NewDefaultTables on a database of the test's own instead: the names
// are Laravel's, and the database is what keeps tests apart (a SQLite
// file in t.TempDir, or a database or PostgreSQL schema per test).
package dbqueuetest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/dbqueue/dbqueue"
	_ "github.com/dbqueue/dbqueue/driver/dbqsqlite" // the embedded default
	"github.com/dbqueue/dbqueue/internal/core"
	"github.com/dbqueue/dbqueue/migrations"
	"github.com/dbqueue/dbqueue/worker"
)

// New returns a queue on a fresh, migrated SQLite file, closed when the
// test ends. Its tables are Laravel's jobs and failed_jobs. Options are
// passed to dbqueue.Open.
func New(t testing.TB, opts ...dbqueue.Option) *dbqueue.Queue {
	t.Helper()
	ctx := context.Background()
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "queue.db")
	if err := migrations.UpDSN(ctx, dsn, migrations.WithLogger(Logger(t))); err != nil {
		t.Fatalf("dbqueuetest: migrate: %v", err)
	}
	return open(t, dsn, opts)
}

// open opens the queue a test uses, closed when the test ends.
func open(t testing.TB, dsn string, opts []dbqueue.Option) *dbqueue.Queue {
	t.Helper()
	q, err := dbqueue.Open(context.Background(), dsn, opts...)
	if err != nil {
		t.Fatalf("dbqueuetest: open: %v", err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

// NewDSN returns a queue on the database dsn names (any DSN dbqueue.Open
// takes; import its driver package), on tables of this test's own: a
// random prefix (dbqt_<hex>_jobs, dbqt_<hex>_failed_jobs, their signals
// and migration version tables), migrated now and dropped, with their
// jobs, when the test ends. Tests in parallel on one server never see each
// other's jobs, and the database's own jobs table is never touched: test
// against the database the application runs on, not a stand-in. The
// queue is closed when the test ends. Options are passed to dbqueue.Open
// after the tables; do not pass WithTables.
func NewDSN(t testing.TB, dsn string, opts ...dbqueue.Option) *dbqueue.Queue {
	t.Helper()
	var b [5]byte
	_, _ = rand.Read(b[:])
	prefix := "dbqt_" + hex.EncodeToString(b[:])
	tables := migrations.Tables{Jobs: prefix + "_jobs", Failed: prefix + "_failed_jobs"}
	migrate(t, dsn, tables, true)
	opts = append([]dbqueue.Option{dbqueue.WithTables(dbqueue.Tables{Jobs: tables.Jobs, Failed: tables.Failed})}, opts...)
	return open(t, dsn, opts)
}

// NewDefaultTables returns a queue on Laravel's jobs and failed_jobs in
// the database dsn names, for tests of application code whose own SQL
// reads those tables by name. That database must be the test's own (a
// SQLite file in t.TempDir, a database or PostgreSQL schema created for
// the test): the names are shared by whoever uses it, so the database is
// what keeps tests apart. Tables it migrates now are dropped, with their
// jobs, when the test ends; a database already migrated (by the
// application's own start-up, say) is used as it is and left so. The
// queue is closed when the test ends; options are passed to dbqueue.Open.
func NewDefaultTables(t testing.TB, dsn string, opts ...dbqueue.Option) *dbqueue.Queue {
	t.Helper()
	migrate(t, dsn, migrations.Tables{}, false)
	return open(t, dsn, opts)
}

// migrate brings tables up to date in the database dsn names and, when
// it created them (always, when fresh says they are the test's own), drops
// them when the test ends, with what goose leaves behind.
func migrate(t testing.TB, dsn string, tables migrations.Tables, fresh bool) {
	t.Helper()
	ctx := context.Background()
	db, dialect, err := dbqueue.OpenSQL(dsn)
	if err != nil {
		t.Fatalf("dbqueuetest: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	m, err := migrations.New(db, dialect, migrations.WithTables(tables), migrations.WithLogger(Logger(t)))
	if err != nil {
		t.Fatalf("dbqueuetest: %v", err)
	}
	names := tables.Jobs + ", " + tables.Failed
	if tables.Jobs == "" {
		names = migrations.DefaultJobs + ", " + migrations.DefaultFailed
	}
	if !fresh && (exists(ctx, db, tables.VersionTable()) || exists(ctx, db, migrations.DefaultJobs)) {
		// Migrated before, or another installation's jobs: not this
		// test's to drop.
		if _, err := m.Up(ctx); err != nil {
			t.Fatalf("dbqueuetest: migrate %s: %v", names, err)
		}
		return
	}
	// Registered before Up, so a half-done Up is cleaned up too.
	t.Cleanup(func() {
		for {
			v, err := m.Version(ctx)
			if err != nil || v == 0 {
				break
			}
			if _, err := m.Down(ctx); err != nil {
				t.Errorf("dbqueuetest: drop the test's tables %s: %v", names, err)
				return
			}
		}
		// What goose leaves behind: its version table, and the lock table
		// of its MySQL and SQLite lockers.
		for _, table := range []string{tables.VersionTable(), tables.VersionTable() + "_lock"} {
			if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+table); err != nil {
				t.Errorf("dbqueuetest: drop %s: %v", table, err)
			}
		}
	})
	if _, err := m.Up(ctx); err != nil {
		t.Fatalf("dbqueuetest: migrate %s: %v", names, err)
	}
}

// NewEnv is NewDSN on the DSN in the environment variable name (such as
// DBQUEUE_TEST_POSTGRES_DSN), and skips the test when it is unset, so a
// suite runs its server tests where a server is configured and its SQLite
// ones everywhere.
func NewEnv(t testing.TB, name string, opts ...dbqueue.Option) *dbqueue.Queue {
	t.Helper()
	dsn := os.Getenv(name)
	if dsn == "" {
		t.Skipf("dbqueuetest: %s is not set: set it to a DSN to run this test on that server", name)
	}
	return NewDSN(t, dsn, opts...)
}

// Pushed returns the payloads of the jobs in a queue ("" for the
// default), reserved or not, oldest first: for asserting what the code
// under test enqueued.
func Pushed(t testing.TB, q *dbqueue.Queue, queue string) []dbqueue.Payload {
	t.Helper()
	c := core.Of(q)
	if queue == "" {
		queue = c.DefaultQueue
	}
	raws, err := c.Dialect.Payloads(context.Background(), c.DB, queue)
	if err != nil {
		t.Fatalf("dbqueuetest: %v", err)
	}
	out := make([]dbqueue.Payload, 0, len(raws))
	for _, raw := range raws {
		p, err := dbqueue.DecodePayload(raw)
		if err != nil {
			t.Fatalf("dbqueuetest: %v", err)
		}
		out = append(out, p)
	}
	return out
}

// PushedArgs returns the args of the jobs of T's kind, decoded, oldest
// first, from the queues named, or, when none is, from the queue T's
// JobOptions names (the default queue when it names none): the typed
// Pushed. A job whose data does not decode into a T fails the test.
func PushedArgs[T dbqueue.JobArgs](t testing.TB, q *dbqueue.Queue, queues ...string) []T {
	t.Helper()
	var zero T
	kind := zero.Kind()
	if len(queues) == 0 {
		queues = []string{dbqueue.JobFor(zero).Queue}
	}
	var out []T
	for _, queue := range queues {
		for _, p := range Pushed(t, q, queue) {
			if p.Name() != kind {
				continue
			}
			var args T
			if err := json.Unmarshal(p.Data, &args); err != nil {
				t.Fatalf("dbqueuetest: job %s (%s): data %s does not decode into %T: %v", p.UUID, kind, p.Data, args, err)
			}
			out = append(out, args)
		}
	}
	return out
}

// Work runs the jobs ready on w's queues through w's handlers once, as
// w.RunOnce does, and returns what became of each: done, released (with
// its delay), failed (with why)... Their outcomes are written to the
// queue as a running worker writes them, so what follows (a retry's
// backoff, a failed_jobs row) can be asserted too. A database error fails
// the test.
func Work(t testing.TB, w *worker.Worker) []worker.Result {
	t.Helper()
	res, err := w.RunOnce(t.Context())
	if err != nil {
		t.Fatalf("dbqueuetest: %v", err)
	}
	return res
}

// exists reports whether db has a table by that name.
func exists(ctx context.Context, db *sql.DB, table string) bool {
	_, err := db.ExecContext(ctx, "SELECT 1 FROM "+table+" WHERE 1 = 0")
	return err == nil
}
