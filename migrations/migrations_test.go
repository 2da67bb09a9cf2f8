package migrations_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pressly/goose/v3"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/driver/dbqpgx"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/migrations"
)

var ctx = context.Background()

// eachEmpty runs fn as a parallel subtest on every dialect, each with its
// own database that has never been migrated.
func eachEmpty(t *testing.T, fn func(t *testing.T, db *dbtest.DB)) {
	t.Helper()
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			fn(t, dbtest.Empty(t, d))
		})
	}
}

// tableExists reports whether the test database's own schema holds table.
func tableExists(t *testing.T, db *dbtest.DB, table string) bool {
	t.Helper()
	query := "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?"
	switch db.Dialect {
	case dbqueue.Postgres:
		query = "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = ?"
	case dbqueue.MySQL:
		query = "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?"
	}
	return db.Count(t, query, table) == 1
}

func wantTables(t *testing.T, db *dbtest.DB, exist bool, tables ...string) {
	t.Helper()
	for _, table := range tables {
		if got := tableExists(t, db, table); got != exist {
			t.Errorf("table %s exists: %v, want %v", table, got, exist)
		}
	}
}

// versionRows counts the rows recording migration version v.
func versionRows(t *testing.T, db *dbtest.DB, v int64) int {
	t.Helper()
	return db.Count(t, "SELECT COUNT(*) FROM "+migrations.VersionTable+" WHERE version_id = ?", v)
}

// versions lists the migration versions dbqueue embeds for db's dialect, in
// order, from a migrator's Status.
func versions(t *testing.T, m *migrations.Migrator) []int64 {
	t.Helper()
	st, err := m.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st) == 0 {
		t.Fatal("no migrations embedded")
	}
	vs := make([]int64, len(st))
	for i, s := range st {
		vs[i] = s.Source.Version
	}
	return vs
}

// wantApplied checks that every version is recorded exactly once.
func wantApplied(t *testing.T, db *dbtest.DB, vs []int64) {
	t.Helper()
	for _, v := range vs {
		if n := versionRows(t, db, v); n != 1 {
			t.Errorf("%d rows for version %d in %s, want 1", n, v, migrations.VersionTable)
		}
	}
	if n := db.Count(t, "SELECT COUNT(*) FROM "+migrations.VersionTable+" WHERE version_id > 0"); n != len(vs) {
		t.Errorf("%d applied versions recorded, want %d", n, len(vs))
	}
}

func TestUpStatusVersionDown(t *testing.T) {
	eachEmpty(t, func(t *testing.T, db *dbtest.DB) {
		m, err := migrations.New(db.SQL, db.Dialect)
		if err != nil {
			t.Fatal(err)
		}
		wantTables(t, db, false, "jobs", "failed_jobs")
		if v, err := m.Version(ctx); err != nil || v != 0 {
			t.Fatalf("version before up: %d, %v; want 0", v, err)
		}
		vs := versions(t, m)
		newest := vs[len(vs)-1]
		st, err := m.Status(ctx)
		if err != nil || st[0].State != goose.StatePending || !strings.HasSuffix(st[0].Source.Path, "00001_create_jobs.sql") {
			t.Fatalf("status before up: %v, %v; want 00001_create_jobs.sql pending", st, err)
		}

		res, err := m.Up(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != len(vs) || res[0].Source.Version != 1 || res[0].Direction != "up" || res[0].Error != nil {
			t.Fatalf("up results %v, want versions %v applied", res, vs)
		}
		wantTables(t, db, true, "jobs", "failed_jobs", migrations.VersionTable)
		wantTables(t, db, false, "goose_db_version")
		wantApplied(t, db, vs)
		if v, err := m.Version(ctx); err != nil || v != newest {
			t.Fatalf("version after up: %d, %v; want %d", v, err, newest)
		}
		st, err = m.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range st {
			if s.State != goose.StateApplied || s.AppliedAt.IsZero() {
				t.Fatalf("status after up: %s is %s (applied at %v)", s.Source.Path, s.State, s.AppliedAt)
			}
		}

		// The schema is the one the queue needs.
		q, err := dbqueue.Open(ctx, db.DSN)
		if err != nil {
			t.Fatalf("open a queue on the migrated database: %v", err)
		}
		if _, err := q.Push(ctx, dbqueue.NewJob{Name: "before-down"}); err != nil {
			t.Fatal(err)
		}
		q.Close()

		if res, err := m.Up(ctx); err != nil || len(res) != 0 {
			t.Fatalf("second up: %v, %v; want nothing to do", res, err)
		}
		wantApplied(t, db, vs)

		// Down rolls back one migration at a time, newest first.
		for i := len(vs) - 1; i >= 0; i-- {
			down, err := m.Down(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if down.Source.Version != vs[i] || down.Direction != "down" {
				t.Fatalf("down result %v, want version %d rolled back", down, vs[i])
			}
			want := int64(0)
			if i > 0 {
				want = vs[i-1]
			}
			if v, err := m.Version(ctx); err != nil || v != want {
				t.Fatalf("version after rolling back %d: %d, %v; want %d", vs[i], v, err, want)
			}
		}
		wantTables(t, db, false, "jobs", "failed_jobs")
		wantTables(t, db, true, migrations.VersionTable)
		if st, err := m.Status(ctx); err != nil || st[0].State != goose.StatePending {
			t.Fatalf("status after down: %v, %v; want pending", st, err)
		}
		_, err = m.Down(ctx)
		if !errors.Is(err, goose.ErrNoNextVersion) || !strings.Contains(err.Error(), "nothing to roll back") {
			t.Fatalf("down with nothing applied: %v; want an error saying there is nothing to roll back", err)
		}

		if _, err := m.Up(ctx); err != nil {
			t.Fatalf("up after down: %v", err)
		}
		wantTables(t, db, true, "jobs", "failed_jobs")
		wantApplied(t, db, vs)
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 0 {
			t.Fatalf("down kept %d jobs", n)
		}
	})
}

// TestConcurrentUp: several processes (here, pools) migrating one database
// at once both succeed, and the migration runs once.
func TestConcurrentUp(t *testing.T) {
	eachEmpty(t, func(t *testing.T, db *dbtest.DB) {
		parsed, err := dbqueue.ParseDSN(db.DSN)
		if err != nil {
			t.Fatal(err)
		}
		const racers = 4
		pools := make([]*sql.DB, racers)
		for i := range pools {
			if pools[i], err = sql.Open(parsed.Driver, parsed.Conn); err != nil {
				t.Fatal(err)
			}
			defer pools[i].Close()
			if err := pools[i].PingContext(ctx); err != nil {
				t.Fatal(err)
			}
		}
		var (
			wg    sync.WaitGroup
			start = make(chan struct{})
			errs  = make([]error, racers)
		)
		for i, pool := range pools {
			wg.Go(func() {
				<-start
				errs[i] = migrations.Up(ctx, pool, db.Dialect)
			})
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("racer %d: %v", i, err)
			}
		}
		m, err := migrations.New(db.SQL, db.Dialect)
		if err != nil {
			t.Fatal(err)
		}
		wantApplied(t, db, versions(t, m))
		wantTables(t, db, true, "jobs", "failed_jobs")
	})
}

func TestBadArguments(t *testing.T) {
	db := dbtest.Empty(t, dbqueue.SQLite)
	for _, d := range []dbqueue.Dialect{"", "oracle", "sqlite3"} {
		_, err := migrations.New(db.SQL, d)
		if err == nil || !strings.Contains(err.Error(), "unknown dialect") || !strings.Contains(err.Error(), "dbqueue.SQLite") {
			t.Errorf("New with dialect %q: %v; want an error naming the dialects to use", d, err)
		}
		if err := migrations.Up(ctx, db.SQL, d); err == nil || !strings.Contains(err.Error(), "unknown dialect") {
			t.Errorf("Up with dialect %q: %v", d, err)
		}
	}
	if _, err := migrations.New(nil, dbqueue.Postgres); err == nil || !strings.Contains(err.Error(), "nil *sql.DB") {
		t.Errorf("New(nil): %v", err)
	}
	wantTables(t, db, false, "jobs", migrations.VersionTable)
}

// TestMySQLWithoutParseTime: goose's MySQL lock reads DATETIME columns, which
// a pool opened without parseTime=true cannot scan. Up must say so at once
// instead of retrying the lock for minutes.
func TestMySQLWithoutParseTime(t *testing.T) {
	db := dbtest.Empty(t, dbqueue.MySQL)
	parsed, err := dbqueue.ParseDSN(db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	conn := strings.Replace(parsed.Conn, "parseTime=true", "parseTime=false", 1)
	if conn == parsed.Conn {
		t.Fatalf("no parseTime in %s", parsed.Conn)
	}
	pool, err := sql.Open("mysql", conn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	start := time.Now()
	err = migrations.Up(c, pool, dbqueue.MySQL)
	if err == nil || !strings.Contains(err.Error(), "parseTime=true") {
		t.Fatalf("up on a pool without parseTime: %v; want an error saying to add parseTime=true", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %v to report the missing parseTime", took)
	}
	wantTables(t, db, false, "jobs")
}

func TestUpPgx(t *testing.T) {
	db := dbtest.Empty(t, dbqueue.Postgres)
	pool, err := pgxpool.New(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := upPgx(ctx, pool); err != nil {
		t.Fatal(err)
	}
	wantTables(t, db, true, "jobs", "failed_jobs", migrations.VersionTable)
	m, err := migrations.New(db.SQL, db.Dialect)
	if err != nil {
		t.Fatal(err)
	}
	wantApplied(t, db, versions(t, m))
	// The caller's pool is left open, with every connection handed back.
	if err := pool.Ping(ctx); err != nil {
		t.Fatalf("pool unusable after UpPgx: %v", err)
	}
	if n := pool.Stat().AcquiredConns(); n != 0 {
		t.Fatalf("UpPgx kept %d connections of the pool", n)
	}
	q, err := dbqueue.New(ctx, dbqpgx.New(pool))
	if err != nil {
		t.Fatalf("queue on the migrated pool: %v", err)
	}
	if _, err := q.Push(ctx, dbqueue.NewJob{Name: "after-up"}); err != nil {
		t.Fatal(err)
	}
	if err := upPgx(ctx, pool); err != nil {
		t.Fatalf("second UpPgx: %v", err)
	}
	if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 1 {
		t.Fatalf("second UpPgx touched the jobs: %d rows", n)
	}
}

// upPgx migrates through a pgx pool as docs/migrations.md shows.
func upPgx(ctx context.Context, pool *pgxpool.Pool) error {
	db := dbqpgx.OpenDB(pool)
	defer db.Close()
	return migrations.Up(ctx, db, dbqueue.Postgres)
}
