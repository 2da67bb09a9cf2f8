package failed_test

import (
	"database/sql"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/failed"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/migrations"
)

// laravelTables creates jobs and failed_jobs with the statements Laravel's
// schema builder emitted, as recorded in testdata/laravel/schema_*.sql (the
// "Statements Laravel emitted" comment, whose names are not
// schema-qualified, so they land in the test's own schema).
func laravelTables(t *testing.T, db *dbtest.DB) {
	t.Helper()
	stmts := dbtest.LaravelStatements(t, db.Dialect)
	if !slices.ContainsFunc(stmts, func(s string) bool { return strings.Contains(s, "failed_at") }) {
		t.Fatal("no failed_jobs statement among Laravel's")
	}
	for _, s := range stmts {
		db.Exec(t, s)
	}
}

// zonedDSN returns db's DSN with the session time zone set away from UTC:
// America/New_York on PostgreSQL, -05:00 on MySQL. SQLite has no session
// time zone.
func zonedDSN(t *testing.T, db *dbtest.DB) string {
	t.Helper()
	switch db.Dialect {
	case dbqueue.Postgres:
		u, err := url.Parse(db.DSN)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("timezone", "America/New_York")
		u.RawQuery = q.Encode()
		return u.String()
	case dbqueue.MySQL:
		cfg, err := mysql.ParseDSN(db.DSN)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Params == nil {
			cfg.Params = map[string]string{}
		}
		cfg.Params["time_zone"] = "'-05:00'"
		return cfg.FormatDSN()
	}
	return db.DSN
}

// TestFailedAtIsUTCOnLaravelTables: Laravel writes failed_at as a UTC wall
// time string (Date::now() in the app's UTC time zone) into a column without
// a time zone (PostgreSQL timestamp(0), MySQL timestamp read through the
// session's time_zone). Find, List, Prune and Flush must read that wall time
// as UTC whatever the session's time zone is.
func TestFailedAtIsUTCOnLaravelTables(t *testing.T) {
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			failedAtIsUTC(t, dbtest.Empty(t, d))
		})
	}
}

func failedAtIsUTC(t *testing.T, db *dbtest.DB) {
	laravelTables(t, db)
	if err := migrations.Up(ctx, db.SQL, db.Dialect); err != nil {
		t.Fatal(err) // widens Laravel's columns and adds the reservation token
	}
	dsn := zonedDSN(t, db)
	parsed, err := dbqueue.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	// One connection, so the zone checked below is the session's that
	// inserts the rows, as a PHP worker sharing the server's zone would.
	php, err := sql.Open(parsed.Driver, parsed.Conn)
	if err != nil {
		t.Fatal(err)
	}
	php.SetMaxOpenConns(1)
	t.Cleanup(func() { php.Close() })
	var zone string
	switch db.Dialect {
	case dbqueue.Postgres:
		err = php.QueryRow("SELECT current_setting('TimeZone')").Scan(&zone)
	case dbqueue.MySQL:
		err = php.QueryRow("SELECT @@session.time_zone").Scan(&zone)
	}
	if err != nil {
		t.Fatal(err)
	}
	if db.Dialect != dbqueue.SQLite && zone != "America/New_York" && zone != "-05:00" {
		t.Fatalf("session time zone %q: the test would not test anything", zone)
	}

	var now int64 // the database's clock, Unix seconds
	if err := php.QueryRow("SELECT " + db.Now()).Scan(&now); err != nil {
		t.Fatal(err)
	}
	wall := func(unix int64) string { return time.Unix(unix, 0).UTC().Format(time.DateTime) }
	edge := time.Date(2024, 1, 15, 12, 0, 0, 0, time.UTC)
	rows := []struct {
		uuid string
		at   int64
	}{
		{"old", edge.Unix() - 7200},
		{"edge", edge.Unix()},
		{"summer", time.Date(2024, 7, 15, 12, 0, 0, 0, time.UTC).Unix()},
		{"two-hours", now - 7200},
		{"half-hour", now - 1800},
	}
	for _, r := range rows {
		// As Laravel's DatabaseUuidFailedJobProvider::log does:
		// 'failed_at' => Date::now(), bound as 'Y-m-d H:i:s' in UTC.
		if _, err := php.Exec(db.Dialect.Rebind("INSERT INTO failed_jobs (uuid, connection, queue, payload, exception, failed_at) VALUES (?, 'database', 'default', '{}', 'boom', ?)"), r.uuid, wall(r.at)); err != nil {
			t.Fatal(err)
		}
	}

	q, err := dbqueue.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	s := newStore(t, q)
	for _, r := range rows {
		j, err := s.Find(ctx, r.uuid)
		if err != nil {
			t.Fatal(err)
		}
		if j.FailedAt.Unix() != r.at {
			t.Errorf("%s: Find read failed_at %s, PHP wrote %s UTC", r.uuid, j.FailedAt.UTC().Format(time.DateTime), wall(r.at))
		}
	}
	all, err := s.List(ctx, failed.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for i, j := range all {
		if r := rows[len(rows)-1-i]; j.UUID != r.uuid || j.FailedAt.Unix() != r.at {
			t.Errorf("List row %d: %s at %s, want %s at %s UTC", i, j.UUID, j.FailedAt.UTC().Format(time.DateTime), r.uuid, wall(r.at))
		}
	}

	if n, err := s.Prune(ctx, edge); err != nil || n != 1 {
		t.Fatalf("prune before %s: %d, %v; want only old", edge, n, err)
	}
	if n, err := s.Prune(ctx, edge.Add(time.Second)); err != nil || n != 1 {
		t.Fatalf("prune before %s: %d, %v; want edge", edge.Add(time.Second), n, err)
	}
	if n, err := s.Flush(ctx, time.Hour); err != nil || n != 2 {
		t.Fatalf("flush older than an hour: %d, %v; want summer and two-hours", n, err)
	}
	if left := list(t, s, failed.Filter{}); !slices.Equal(left, []string{"half-hour"}) {
		t.Fatalf("left %v, want only half-hour", left)
	}
}

// TestFailedAtTimestamptzInZonedSession: dbqueue's own PostgreSQL table
// keeps failed_at as timestamptz, an instant: a session away from UTC reads
// and prunes the jobs dbqueue failed at the database's clock. (MySQL's
// migration keeps a timestamp, read as UTC wall time like Laravel's.)
func TestFailedAtTimestamptzInZonedSession(t *testing.T) {
	db := dbtest.New(t, dbqueue.Postgres)
	q, err := dbqueue.Open(ctx, zonedDSN(t, db))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	s := newStore(t, q)
	before := dbNow(t, db)
	u := failJob(t, q, dbqueue.NewJob{Name: "zoned"}).Payload.UUID
	after := dbNow(t, db)
	j, err := s.Find(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	// failed_at keeps whole seconds, rounded: allow one either side.
	if at := j.FailedAt.Unix(); at < before-1 || at > after+1 {
		t.Fatalf("failed_at %d, failed between %d and %d by the database's clock", at, before, after)
	}
	if n, err := s.Prune(ctx, time.Unix(before-60, 0)); err != nil || n != 0 {
		t.Fatalf("prune a minute before the failure: %d, %v; want 0", n, err)
	}
	if n, err := s.Flush(ctx, time.Hour); err != nil || n != 0 {
		t.Fatalf("flush older than an hour: %d, %v; want 0", n, err)
	}
	if n, err := s.Prune(ctx, time.Unix(after+2, 0)); err != nil || n != 1 {
		t.Fatalf("prune after the failure: %d, %v; want 1", n, err)
	}
}

// TestDbqueueFailsInUTCOnLaravelTables: a job dbqueue itself fails on
// Laravel's tables, in a session away from UTC, is stored as the UTC wall
// time PHP would write, so it reads back as the database's now.
func TestDbqueueFailsInUTCOnLaravelTables(t *testing.T) {
	for _, d := range []dbqueue.Dialect{dbqueue.Postgres, dbqueue.MySQL} {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			db := dbtest.Empty(t, d)
			laravelTables(t, db)
			if err := migrations.Up(ctx, db.SQL, db.Dialect); err != nil {
				t.Fatal(err)
			}
			q, err := dbqueue.Open(ctx, zonedDSN(t, db))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { q.Close() })
			job := failJob(t, q, dbqueue.NewJob{Name: "zoned"})
			got, err := newStore(t, q).Find(ctx, job.Payload.UUID)
			if err != nil {
				t.Fatal(err)
			}
			var now int64
			if err := db.SQL.QueryRow("SELECT " + db.Now()).Scan(&now); err != nil {
				t.Fatal(err)
			}
			if off := now - got.FailedAt.Unix(); off < -2 || off > 2 {
				t.Fatalf("failed_at read %v, the database's now is %v: off by %ds", got.FailedAt, time.Unix(now, 0).UTC(), off)
			}
		})
	}
}
