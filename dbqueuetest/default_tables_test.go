package dbqueuetest_test

import (
	"context"
	"testing"

	"github.com/dbqueue/dbqueue/dbqueuetest"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// pendingMail is application code under test with its own SQL on
// Laravel's jobs table.
func pendingMail(db *dbtest.DB) (n int, err error) {
	err = db.SQL.QueryRow(db.Dialect.Rebind("SELECT COUNT(*) FROM jobs WHERE queue = ?"), "mail").Scan(&n)
	return n, err
}

// NewDefaultTables migrates Laravel's jobs and failed_jobs into the
// test's own database, where the application's SQL reads them by name,
// and drops them when the test ends; tables it did not create (migrated
// before, or Laravel's own) it uses and leaves, rows and all.
func TestNewDefaultTables(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		own := dbtest.Empty(t, db.Dialect)
		t.Run("fresh", func(t *testing.T) {
			q := dbqueuetest.NewDefaultTables(t, own.DSN)
			if q.Tables().Jobs != "jobs" || q.Tables().Failed != "failed_jobs" {
				t.Fatalf("tables %+v", q.Tables())
			}
			if err := signUp(context.Background(), q, "ada@example.com"); err != nil {
				t.Fatal(err)
			}
			if n, err := pendingMail(own); n != 1 || err != nil {
				t.Fatalf("the application's SQL counts %d mails (%v), want 1", n, err)
			}
		})
		if _, err := pendingMail(own); err == nil {
			t.Fatalf("jobs outlived the test that created it")
		}

		// Laravel's own tables, then dbqueue's migrations on them: kept.
		for _, stmt := range dbtest.LaravelStatements(t, db.Dialect) {
			own.Exec(t, stmt)
		}
		own.Exec(t, "INSERT INTO jobs (queue, payload, attempts, available_at, created_at) VALUES ('mail', ?, 0, 0, 0)",
			`{"uuid":"laravel-1","displayName":"SendMail","job":"SendMail","data":{}}`)
		t.Run("Laravel's", func(t *testing.T) {
			q := dbqueuetest.NewDefaultTables(t, own.DSN)
			if len(dbqueuetest.Pushed(t, q, "mail")) != 1 {
				t.Fatal("the job already there is not seen")
			}
		})
		if n, err := pendingMail(own); n != 1 || err != nil {
			t.Fatalf("Laravel's jobs table after the test: %d rows, %v; want it kept", n, err)
		}
	})
}

// The whole-file example runs as a test too.
func TestExampleNewDefaultTables(t *testing.T) { testMailCount(t) }
