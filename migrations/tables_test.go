package migrations_test

import (
	"bytes"
	"database/sql"
	"io/fs"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/migrations"
)

var billing = migrations.Tables{Jobs: "billing_jobs", Failed: "billing_failed"}

// Two table sets in one database migrate independently: each has its own
// tables, signals and version table, and rolling one back leaves the
// other, and its jobs, alone.
func TestTwoTableSets(t *testing.T) {
	eachEmpty(t, func(t *testing.T, db *dbtest.DB) {
		if billing.VersionTable() != "billing_jobs_dbqueue_migrations" || billing.SignalsTable() != "billing_jobs_signals" || billing.UniqueTable() != "billing_jobs_unique" {
			t.Fatalf("billing's version and signals tables: %s, %s", billing.VersionTable(), billing.SignalsTable())
		}
		if err := migrations.Up(ctx, db.SQL, db.Dialect); err != nil {
			t.Fatal(err)
		}
		db.Exec(t, "INSERT INTO jobs (queue, payload, attempts, available_at, created_at) VALUES ('default', '{}', 0, 1, 1)")
		m, err := migrations.New(db.SQL, db.Dialect, migrations.WithTables(billing))
		if err != nil {
			t.Fatal(err)
		}
		if v, err := m.Version(ctx); err != nil || v != 0 {
			t.Fatalf("billing's version with only the default set migrated: %d, %v; want 0", v, err)
		}
		vs := versions(t, m)
		if res, err := m.Up(ctx); err != nil || len(res) != len(vs) {
			t.Fatalf("billing up: %v, %v; want %d migrations applied", res, err, len(vs))
		}
		wantTables(t, db, true, "jobs", "failed_jobs", "dbqueue_signals", "job_batches", "dbqueue_job_errors", migrations.VersionTable,
			"billing_jobs", "billing_failed", "billing_jobs_signals", "billing_jobs_unique", "billing_jobs_batches", "billing_jobs_errors", "billing_jobs_dbqueue_migrations")
		if billing.ErrorsTable() != "billing_jobs_errors" || (migrations.Tables{}).ErrorsTable() != "dbqueue_job_errors" {
			t.Fatalf("error history tables: %s, %s", billing.ErrorsTable(), (migrations.Tables{}).ErrorsTable())
		}
		for _, v := range vs {
			if n := db.Count(t, "SELECT COUNT(*) FROM billing_jobs_dbqueue_migrations WHERE version_id = ?", v); n != 1 {
				t.Errorf("%d rows for version %d in billing's version table, want 1", n, v)
			}
		}
		wantApplied(t, db, vs)
		// The billing tables have the indexes and columns the queue needs.
		db.Exec(t, "INSERT INTO billing_jobs (queue, payload, attempts, available_at, created_at, reservation_token) VALUES ('default', '{}', 0, 1, 1, 0)")
		db.Exec(t, "INSERT INTO billing_failed (uuid, connection, queue, payload, exception) VALUES ('u', 'database', 'default', '{}', 'boom')")
		for _, idx := range map[dbqueue.Dialect][]string{
			dbqueue.Postgres: {"billing_jobs_queue_ready_idx", "billing_jobs_queue_reserved_idx", "billing_failed_failed_at_idx"},
			dbqueue.MySQL:    {"billing_jobs_queue_available_idx", "billing_failed_uuid_unique", "billing_failed_failed_at_idx"},
			dbqueue.SQLite:   {"billing_jobs_queue_ready_idx", "billing_jobs_queue_reserved_idx", "billing_failed_failed_at_idx"},
		}[db.Dialect] {
			if !indexExists(t, db, idx) {
				t.Errorf("index %s missing", idx)
			}
		}

		// Roll billing all the way back: the default set stays, with its job.
		for range vs {
			if _, err := m.Down(ctx); err != nil {
				t.Fatal(err)
			}
		}
		wantTables(t, db, false, "billing_jobs", "billing_failed", "billing_jobs_signals", "billing_jobs_unique", "billing_jobs_limits", "billing_jobs_locks", "billing_jobs_batches", "billing_jobs_metrics", "billing_jobs_metrics_hourly", "billing_jobs_workers", "billing_jobs_history", "billing_jobs_errors", "billing_jobs_schedules")
		wantTables(t, db, true, "jobs", "failed_jobs", "dbqueue_signals", "dbqueue_unique", "jobs_limits", "jobs_locks", "job_batches", "dbqueue_job_errors")
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 1 {
			t.Fatalf("rolling billing back left %d rows in jobs, want 1", n)
		}
		def, err := migrations.New(db.SQL, db.Dialect)
		if err != nil {
			t.Fatal(err)
		}
		if v, err := def.Version(ctx); err != nil || v != vs[len(vs)-1] {
			t.Fatalf("default set's version after billing rolled back: %d, %v", v, err)
		}
	})
}

// A PostgreSQL schema holds a table set, version table included, and Up
// creates the schema.
func TestPostgresSchema(t *testing.T) {
	db := dbtest.Empty(t, dbqueue.Postgres)
	schema := "dbq_schema_" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "_"))
	t.Cleanup(func() { db.Exec(t, "DROP SCHEMA IF EXISTS "+schema+" CASCADE") })
	db.Exec(t, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
	tables := migrations.Tables{Schema: schema}
	if err := migrations.Up(ctx, db.SQL, db.Dialect, migrations.WithTables(tables)); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"jobs", "failed_jobs", "dbqueue_signals", "dbqueue_unique", "job_batches", "dbqueue_job_errors", migrations.VersionTable} {
		if n := db.Count(t, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = ? AND table_name = ?", schema, table); n != 1 {
			t.Errorf("table %s.%s missing", schema, table)
		}
	}
	wantTables(t, db, false, "jobs", migrations.VersionTable)
	if n, want := db.Count(t, "SELECT COUNT(*) FROM "+schema+".dbqueue_migrations WHERE version_id > 0"), embeddedCount(t); n != want {
		t.Errorf("%d versions recorded in %s.dbqueue_migrations, want %d", n, schema, want)
	}
	// A second Up finds the schema and has nothing to do.
	if err := migrations.Up(ctx, db.SQL, db.Dialect, migrations.WithTables(tables)); err != nil {
		t.Fatal(err)
	}
}

func indexExists(t *testing.T, db *dbtest.DB, name string) bool {
	t.Helper()
	query := "SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name = ?"
	switch db.Dialect {
	case dbqueue.Postgres:
		query = "SELECT COUNT(*) FROM pg_indexes WHERE schemaname = current_schema() AND indexname = ?"
	case dbqueue.MySQL:
		query = "SELECT COUNT(DISTINCT index_name) FROM information_schema.statistics WHERE table_schema = DATABASE() AND index_name = ?"
	}
	return db.Count(t, query, name) == 1
}

func TestBadTableNames(t *testing.T) {
	db := dbtest.Empty(t, dbqueue.SQLite)
	long := strings.Repeat("j", 40)
	for _, c := range []struct {
		tables  migrations.Tables
		dialect dbqueue.Dialect
		want    string
	}{
		{migrations.Tables{Jobs: "jobs; DROP TABLE users"}, dbqueue.SQLite, "lower-case letters, digits and underscores"},
		{migrations.Tables{Jobs: "Jobs"}, dbqueue.SQLite, "lower-case letters"},
		{migrations.Tables{Failed: "1failed"}, dbqueue.SQLite, "not starting with a digit"},
		{migrations.Tables{Jobs: "my-jobs"}, dbqueue.SQLite, "Jobs \"my-jobs\""},
		{migrations.Tables{Jobs: "x", Failed: "x"}, dbqueue.SQLite, "two different tables"},
		{migrations.Tables{Jobs: long}, dbqueue.SQLite, "too long"},
		{migrations.Tables{Failed: long + "__________"}, dbqueue.SQLite, "Failed is too long"},
		{migrations.Tables{Schema: "app"}, dbqueue.SQLite, "PostgreSQL only"},
		{migrations.Tables{Schema: "app"}, dbqueue.MySQL, "PostgreSQL only"},
		{migrations.Tables{Schema: "public.x"}, dbqueue.Postgres, "Schema"},
	} {
		if err := c.tables.Validate(c.dialect); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v on %s: %v; want an error containing %q", c.tables, c.dialect, err, c.want)
		}
		if _, err := migrations.FS(c.dialect, migrations.WithTables(c.tables)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("FS %+v on %s: %v; want an error containing %q", c.tables, c.dialect, err, c.want)
		}
		if c.dialect == dbqueue.SQLite {
			if err := migrations.Up(ctx, db.SQL, c.dialect, migrations.WithTables(c.tables)); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Up %+v: %v; want an error containing %q", c.tables, err, c.want)
			}
		}
	}
	if err := (migrations.Tables{Jobs: strings.Repeat("j", 30), Schema: "app_1"}).Validate(dbqueue.Postgres); err != nil {
		t.Errorf("a valid set: %v", err)
	}
	if _, err := migrations.New(db.SQL, dbqueue.SQLite, migrations.FormatGolangMigrate); err == nil || !strings.Contains(err.Error(), "FS only") {
		t.Errorf("New with FormatGolangMigrate: %v", err)
	}
	if tables := db.Count(t, "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table'"); tables != 0 {
		t.Errorf("rejected names left %d tables", tables)
	}
}

// FS renders goose files an application's own goose runs (up to the end
// and back down), with the default names or others.
func TestFSWithGoose(t *testing.T) {
	eachEmpty(t, func(t *testing.T, db *dbtest.DB) {
		for _, tables := range []migrations.Tables{{}, billing} {
			fsys, err := migrations.FS(db.Dialect, migrations.WithTables(tables))
			if err != nil {
				t.Fatal(err)
			}
			names, err := fs.Glob(fsys, "*")
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"00001_create_jobs.sql", "00002_create_signals.sql", "00003_reservation_token.sql", "00004_create_unique.sql", "00005_create_limits_locks.sql", "00006_create_batches.sql", "00007_claim_index.sql", "00008_byte_exact_names.sql", "00009_operator_view.sql", "00010_create_job_errors.sql", "00011_metrics_hourly.sql", "00012_jobs_autovacuum.sql", "00013_create_schedules.sql", "00014_flow_control.sql"}
			if !slices.Equal(names, want) {
				t.Fatalf("FS files %v, want %v", names, want)
			}
			for _, name := range names {
				src, _ := fs.ReadFile(fsys, name)
				if bytes.Contains(src, []byte("{{")) || !bytes.Contains(src, []byte("-- +goose Up\n")) || !bytes.Contains(src, []byte("-- +goose Down\n")) {
					t.Errorf("%s is not rendered goose SQL:\n%s", name, src)
				}
				if tables.Jobs != "" && regexpWord("jobs").Match(stripComments(src)) {
					t.Errorf("%s for %+v still names the jobs table:\n%s", name, tables, src)
				}
			}
			gd := map[dbqueue.Dialect]goose.Dialect{dbqueue.Postgres: goose.DialectPostgres, dbqueue.MySQL: goose.DialectMySQL, dbqueue.SQLite: goose.DialectSQLite3}[db.Dialect]
			p, err := goose.NewProvider(gd, db.SQL, fsys, goose.WithTableName("app_goose_"+tables.JobsTable()), goose.WithDisableGlobalRegistry(true))
			if err != nil {
				t.Fatal(err)
			}
			if res, err := p.Up(ctx); err != nil || len(res) != len(want) {
				t.Fatalf("goose up on FS(%s, %+v): %v, %v", db.Dialect, tables, res, err)
			}
			wantTables(t, db, true, tables.JobsTable(), tables.FailedTable(), tables.SignalsTable(), tables.UniqueTable(), tables.BatchesTable(), tables.ErrorsTable())
			if _, err := p.DownTo(ctx, 0); err != nil {
				t.Fatalf("goose down on FS(%s, %+v): %v", db.Dialect, tables, err)
			}
			wantTables(t, db, false, tables.JobsTable(), tables.FailedTable(), tables.SignalsTable(), tables.UniqueTable(), tables.BatchesTable(), tables.ErrorsTable())
		}
	})
}

// FormatGolangMigrate's files, run as golang-migrate runs them (each file
// one multi-statement exec, ups in order, downs in reverse), create and
// drop the tables.
func TestFSGolangMigrate(t *testing.T) {
	eachEmpty(t, func(t *testing.T, db *dbtest.DB) {
		fsys, err := migrations.FS(db.Dialect, migrations.FormatGolangMigrate)
		if err != nil {
			t.Fatal(err)
		}
		ups, _ := fs.Glob(fsys, "*.up.sql")
		downs, _ := fs.Glob(fsys, "*.down.sql")
		all, _ := fs.Glob(fsys, "*")
		if n := embeddedCount(t); len(ups) != n || len(downs) != n || len(all) != 2*n || ups[0] != "00001_create_jobs.up.sql" {
			t.Fatalf("golang-migrate files %v", all)
		}
		conn := db.SQL
		if db.Dialect == dbqueue.MySQL {
			// golang-migrate's MySQL driver needs multiStatements=true too.
			parsed, err := dbqueue.ParseDSN(db.DSN)
			if err != nil {
				t.Fatal(err)
			}
			if conn, err = sql.Open("mysql", parsed.Conn+"&multiStatements=true"); err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
		}
		run := func(name string) {
			t.Helper()
			src, err := fs.ReadFile(fsys, name)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(src, []byte("+goose")) {
				t.Errorf("%s has goose annotations:\n%s", name, src)
			}
			if _, err := conn.ExecContext(ctx, string(src)); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		for _, name := range ups {
			run(name)
		}
		wantTables(t, db, true, "jobs", "failed_jobs", "dbqueue_signals", "jobs_limits", "jobs_locks", "job_batches", "jobs_metrics", "jobs_metrics_hourly", "jobs_workers", "jobs_history", "dbqueue_job_errors", "jobs_schedules")
		db.Exec(t, "INSERT INTO jobs (queue, payload, attempts, available_at, created_at, reservation_token) VALUES ('default', '{}', 0, 1, 1, 0)")
		for i := len(downs) - 1; i >= 0; i-- {
			run(downs[i])
		}
		wantTables(t, db, false, "jobs", "failed_jobs", "dbqueue_signals", "dbqueue_unique", "jobs_limits", "jobs_locks", "job_batches", "jobs_metrics", "jobs_metrics_hourly", "jobs_workers", "jobs_history", "dbqueue_job_errors", "jobs_schedules")
	})
}

// Up on the tables Laravel's queue:table made widens attempts and the times,
// and says so, column by column; on tables dbqueue made it says nothing.
func TestUpReportsWidenedLaravelColumns(t *testing.T) {
	want := map[dbqueue.Dialect][]string{
		dbqueue.MySQL: {
			"widened jobs.attempts from tinyint unsigned to int unsigned (Laravel's type overflows at 255)",
			"widened jobs.reserved_at from int unsigned to bigint (Laravel's 32-bit Unix time overflows in 2106)",
			"widened jobs.available_at from int unsigned to bigint (Laravel's 32-bit Unix time overflows in 2106)",
			"widened jobs.created_at from int unsigned to bigint (Laravel's 32-bit Unix time overflows in 2106)",
			"made jobs.queue byte-exact: collation utf8mb4_unicode_ci to utf8mb4_nopad_bin (names that differ only in case or trailing spaces are no longer equal)",
			"made failed_jobs.connection byte-exact: collation utf8mb4_unicode_ci to utf8mb4_nopad_bin (names that differ only in case or trailing spaces are no longer equal)",
			"made failed_jobs.queue byte-exact: collation utf8mb4_unicode_ci to utf8mb4_nopad_bin (names that differ only in case or trailing spaces are no longer equal)",
		},
		dbqueue.Postgres: {
			"widened jobs.attempts from smallint to integer (Laravel's type overflows at 32767)",
			"widened jobs.reserved_at from integer to bigint (Laravel's 32-bit Unix time overflows in 2038)",
			"widened jobs.available_at from integer to bigint (Laravel's 32-bit Unix time overflows in 2038)",
			"widened jobs.created_at from integer to bigint (Laravel's 32-bit Unix time overflows in 2038)",
		},
		dbqueue.SQLite: nil, // INTEGER is 64-bit: nothing to widen
	}
	eachEmpty(t, func(t *testing.T, db *dbtest.DB) {
		for _, stmt := range dbtest.LaravelStatements(t, db.Dialect) {
			db.Exec(t, stmt)
		}
		var log bytes.Buffer
		m, err := migrations.New(db.SQL, db.Dialect, migrations.WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Up(ctx); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, w := range m.Widened() {
			got = append(got, w.String())
		}
		if !slices.Equal(got, want[db.Dialect]) {
			t.Fatalf("Widened after Up on Laravel's tables:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want[db.Dialect], "\n"))
		}
		for _, line := range want[db.Dialect] {
			if !strings.Contains(log.String(), line) {
				t.Errorf("log %q lacks %q", log.String(), line)
			}
		}
		if res, err := m.Up(ctx); err != nil || len(res) != 0 || len(m.Widened()) != 0 {
			t.Fatalf("second up: %v, %v, widened %v; want nothing", res, err, m.Widened())
		}
	})
	eachEmpty(t, func(t *testing.T, db *dbtest.DB) {
		var log bytes.Buffer
		m, err := migrations.New(db.SQL, db.Dialect, migrations.WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Up(ctx); err != nil {
			t.Fatal(err)
		}
		// On PostgreSQL, Up says it set the jobs table's autovacuum
		// options (00012); it widens nothing anywhere.
		wantNotes := 0
		if db.Dialect == dbqueue.Postgres {
			wantNotes = 1
		}
		if len(m.Widened()) != 0 || len(m.Notes()) != wantNotes || strings.Count(log.String(), "\n") != wantNotes {
			t.Fatalf("up on an empty database widened %v, noted %q and logged %q; want %d notes", m.Widened(), m.Notes(), log.String(), wantNotes)
		}
		if wantNotes == 1 && (!strings.Contains(m.Notes()[0], "autovacuum_vacuum_cost_delay=0") || !strings.Contains(log.String(), "autovacuum_vacuum_cost_delay=0")) {
			t.Errorf("note %q, log %q: want the options it set", m.Notes()[0], log.String())
		}
	})
}

func regexpWord(w string) *regexp.Regexp { return regexp.MustCompile(`(^|[^\w.])` + w + `\b`) }

// stripComments drops SQL comment lines and goose annotations.
func stripComments(src []byte) []byte {
	var out [][]byte
	for _, line := range bytes.Split(src, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("--")) {
			out = append(out, line)
		}
	}
	return bytes.Join(out, []byte("\n"))
}

// embeddedCount is how many migrations are embedded.
func embeddedCount(t *testing.T) int {
	t.Helper()
	fsys, err := migrations.FS(dbqueue.SQLite)
	if err != nil {
		t.Fatal(err)
	}
	names, _ := fs.Glob(fsys, "*.sql")
	return len(names)
}
