package migrations_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/migrations"
)

// reloptions are the storage options of a PostgreSQL table, sorted.
func reloptions(t *testing.T, db *dbtest.DB, table string) []string {
	t.Helper()
	var opts []string
	rows, err := db.SQL.QueryContext(ctx, "SELECT unnest(reloptions) FROM pg_class WHERE oid = $1::regclass", table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var o string
		if err := rows.Scan(&o); err != nil {
			t.Fatal(err)
		}
		opts = append(opts, o)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(opts)
	return opts
}

// Up lets autovacuum keep pace with the jobs table (migration 00012) and
// keeps an option the operator set before; Down removes its options.
func TestUpSetsJobsAutovacuum(t *testing.T) {
	db := dbtest.Empty(t, dbqueue.Postgres)
	migrateBelow(t, db, "00012")
	db.Exec(t, "ALTER TABLE jobs SET (autovacuum_vacuum_scale_factor = 0.05, fillfactor = 90)")
	m, err := migrations.New(db.SQL, db.Dialect, migrations.WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"autovacuum_vacuum_cost_delay=0", "autovacuum_vacuum_scale_factor=0.05", "autovacuum_vacuum_threshold=1000", "fillfactor=90"}
	if got := reloptions(t, db, "jobs"); !slices.Equal(got, want) {
		t.Errorf("jobs options after up: %v, want %v (the operator's scale factor and fillfactor kept)", got, want)
	}
	if got := reloptions(t, db, "failed_jobs"); len(got) != 0 {
		t.Errorf("failed_jobs options: %v, want none", got)
	}
	downBelow(t, m, 12)
	if got := reloptions(t, db, "jobs"); !slices.Equal(got, []string{"fillfactor=90"}) {
		t.Errorf("jobs options after down: %v, want [fillfactor=90]", got)
	}
}

// In a schema of its own, the table set's jobs table gets the options.
func TestJobsAutovacuumInSchema(t *testing.T) {
	db := dbtest.Empty(t, dbqueue.Postgres)
	schema := "dbq_av_" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "_"))
	t.Cleanup(func() { db.Exec(t, "DROP SCHEMA IF EXISTS "+schema+" CASCADE") })
	tables := migrations.Tables{Schema: schema, Jobs: "mail_jobs", Failed: "mail_failed"}
	if err := migrations.Up(ctx, db.SQL, db.Dialect, migrations.WithTables(tables)); err != nil {
		t.Fatal(err)
	}
	want := []string{"autovacuum_vacuum_cost_delay=0", "autovacuum_vacuum_scale_factor=0.01", "autovacuum_vacuum_threshold=1000"}
	if got := reloptions(t, db, schema+".mail_jobs"); !slices.Equal(got, want) {
		t.Errorf("%s.mail_jobs options: %v, want %v", schema, got, want)
	}
}

// downBelow rolls m back, newest first, until no migration from version
// on is applied, whatever later migrations exist.
func downBelow(t *testing.T, m *migrations.Migrator, version int64) {
	t.Helper()
	for {
		v, err := m.Version(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if v < version {
			return
		}
		if _, err := m.Down(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
