package dbqueuetest_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/dbqueuetest"
)

// mailCount is application code with its own SQL on Laravel's jobs
// table.
func mailCount(ctx context.Context, db *sql.DB) (n int, err error) {
	err = db.QueryRowContext(ctx, "SELECT COUNT(*) FROM jobs WHERE queue = 'mail'").Scan(&n)
	return n, err
}

// testMailCount is the test (TestMailCount in the application): the
// queue and the application share a SQLite file of the test's own, with
// Laravel's table names; the file keeps tests apart.
func testMailCount(t *testing.T) {
	ctx := context.Background()
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "app.db")
	q := dbqueuetest.NewDefaultTables(t, dsn)
	if _, err := q.Push(ctx, dbqueue.NewJob{Name: "welcome-mail", Queue: "mail"}); err != nil {
		t.Fatal(err)
	}
	db, _, err := dbqueue.OpenSQL(dsn) // the application's own handle
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if n, err := mailCount(ctx, db); n != 1 || err != nil {
		t.Fatalf("mailCount = %d, %v; want 1", n, err)
	}
}

// A test of application code whose own SQL reads jobs by name uses
// NewDefaultTables on a database of its own.
func ExampleNewDefaultTables() {
	// func TestMailCount(t *testing.T) { testMailCount(t) }
}
