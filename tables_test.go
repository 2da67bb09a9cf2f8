package dbqueue_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/failed"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/migrations"
)

// A second dbqueue with its own table names lives beside the first in one
// database (an app that already has a jobs table, or two services): each
// pushes, reserves, fails, pauses and counts only in its own tables.
func TestTwoTableSetsSideBySide(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		own := dbqueue.Tables{Jobs: "billing_jobs", Failed: "billing_failed_jobs"}
		if err := migrations.Up(ctx, db.SQL, db.Dialect, migrations.WithTables(migrations.Tables(own))); err != nil {
			t.Fatal(err)
		}
		laravel := db.Queue(t)
		billing := db.Queue(t, dbqueue.WithTables(own))
		if got := billing.Tables(); got.Jobs != own.Jobs || got.Failed != own.Failed {
			t.Fatalf("Tables() = %+v, want %+v", got, own)
		}
		push(t, laravel, dbqueue.NewJob{Name: "laravel-job"})
		id := push(t, billing, dbqueue.NewJob{Name: "invoice"})
		if n := db.Count(t, "SELECT COUNT(*) FROM billing_jobs WHERE id = ?", id); n != 1 {
			t.Fatal("the billing job is not in billing_jobs")
		}
		got := reserve(t, billing, 10)
		if len(got) != 1 || got[0].Name() != "invoice" {
			t.Fatalf("billing reserved %d jobs, want only its invoice", len(got))
		}
		if err := billing.Fail(ctx, got[0], errors.New("card declined")); err != nil {
			t.Fatal(err)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM billing_failed_jobs"); n != 1 {
			t.Fatalf("billing_failed_jobs holds %d rows, want the failed invoice", n)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM failed_jobs"); n != 0 {
			t.Fatalf("Laravel's failed_jobs holds %d rows, want none", n)
		}
		store, err := failed.New(billing)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := store.RetryAll(ctx); err != nil || n != 1 {
			t.Fatalf("retry billing's failures: %d, %v", n, err)
		}
		if err := billing.Pause(ctx, ""); err != nil {
			t.Fatal(err)
		}
		if p, err := laravel.Paused(ctx, ""); err != nil || p {
			t.Fatalf("pausing billing's default queue paused Laravel's: %v, %v", p, err)
		}
		ls, err := laravel.Size(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		bs, err := billing.Size(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		if ls.Pending != 1 || bs.Pending != 1 {
			t.Fatalf("pending: Laravel's %d, billing's %d; want 1 each", ls.Pending, bs.Pending)
		}
		if j := reserve(t, laravel, 10); len(j) != 1 || j[0].Name() != "laravel-job" {
			t.Fatal("Laravel's queue does not hold just its own job")
		}
	})
}

// A table set that was never migrated fails at open, saying to migrate;
// names that are not plain identifiers are refused before any SQL runs.
func TestTableNamesAreChecked(t *testing.T) {
	db := dbtest.New(t, dbqueue.SQLite)
	_, err := dbqueue.Open(ctx, db.DSN, dbqueue.WithTables(dbqueue.Tables{Jobs: "nowhere_jobs", Failed: "nowhere_failed"}))
	if err == nil || !strings.Contains(err.Error(), "migrate up") {
		t.Fatalf("open on unmigrated tables: %v, want a hint to migrate", err)
	}
	for _, bad := range []dbqueue.Tables{{Jobs: "jobs; DROP TABLE x"}, {Jobs: "Jobs"}, {Jobs: "same", Failed: "same"}, {Jobs: "1jobs"}} {
		if _, err := dbqueue.Open(ctx, db.DSN, dbqueue.WithTables(bad)); err == nil || !strings.Contains(err.Error(), "WithTables") {
			t.Errorf("WithTables(%+v): %v, want a refusal", bad, err)
		}
	}
}

// On PostgreSQL the tables may live in a schema of their own, named
// explicitly rather than through the connection's search_path.
func TestTablesInASchema(t *testing.T) {
	db := dbtest.New(t, dbqueue.Postgres)
	var schema string
	if err := db.SQL.QueryRow("SELECT current_schema() || '_queue'").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Exec(t, "DROP SCHEMA IF EXISTS "+schema+" CASCADE") })
	tables := dbqueue.Tables{Schema: schema}
	if err := migrations.Up(ctx, db.SQL, db.Dialect, migrations.WithTables(migrations.Tables(tables))); err != nil {
		t.Fatal(err)
	}
	q := db.Queue(t, dbqueue.WithTables(tables))
	id := push(t, q, dbqueue.NewJob{Name: "in-schema"})
	if n := db.Count(t, "SELECT COUNT(*) FROM "+schema+".jobs WHERE id = ?", id); n != 1 {
		t.Fatalf("the job is not in %s.jobs", schema)
	}
	if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 0 {
		t.Fatalf("the job went to the search_path's jobs table")
	}
	got := reserve(t, q, 1)
	if len(got) != 1 {
		t.Fatal("nothing reserved from the schema's table")
	}
	if err := q.Delete(ctx, got[0]); err != nil {
		t.Fatal(err)
	}
}
