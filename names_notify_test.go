package dbqueue_test

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/driver/dbqpgx"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/migrations"
)

// A table set with the longest schema and jobs table names the migrations
// accept still gets its wake-ups on PostgreSQL: migrate, Open and Push
// succeed, and a listener of the queue wakes. A second table set whose
// names share that long start keeps its own wake-ups.
func TestLongTableNamesStillNotify(t *testing.T) {
	db := dbtest.New(t, dbqueue.Postgres)
	var base string
	if err := db.SQL.QueryRow("SELECT current_schema()").Scan(&base); err != nil {
		t.Fatal(err)
	}
	// 63 bytes, PostgreSQL's identifier limit, unique to this test.
	schema := base + "_" + strings.Repeat("s", 62-len(base))
	t.Cleanup(func() { db.Exec(t, "DROP SCHEMA IF EXISTS "+schema+" CASCADE") })
	// 34 bytes: the longest jobs name whose index names fit.
	long := dbqueue.Tables{Schema: schema, Jobs: strings.Repeat("j", 33) + "a", Failed: "failed_a"}
	other := dbqueue.Tables{Schema: schema, Jobs: strings.Repeat("j", 33) + "b", Failed: "failed_b"}
	pool, err := pgxpool.New(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	open := func(tables dbqueue.Tables) *dbqueue.Queue {
		t.Helper()
		if err := migrations.Up(ctx, db.SQL, db.Dialect, migrations.WithTables(migrations.Tables(tables))); err != nil {
			t.Fatalf("migrate %+v: %v", tables, err)
		}
		q, err := dbqueue.New(ctx, dbqpgx.New(pool), dbqueue.WithTables(tables))
		if err != nil {
			t.Fatalf("open %+v: %v", tables, err)
		}
		t.Cleanup(func() { q.Close() })
		return q
	}
	q, o := open(long), open(other)
	wake, stop := dbqueue.Wakeups(q, "long")
	defer stop()
	otherWake, stopOther := dbqueue.Wakeups(o, "long")
	defer stopOther()
	// A first wake-up stands for what came before the listen.
	expectWake(t, wake, true, "starting to listen")
	expectWake(t, otherWake, true, "starting to listen")

	if _, err := q.Push(ctx, dbqueue.NewJob{Name: "now", Queue: "long"}); err != nil {
		t.Fatalf("push to a table set with long names: %v", err)
	}
	expectWake(t, wake, true, "a push to the long-named table set")
	expectWake(t, otherWake, false, "a push to another table set of the same schema")
	if _, err := q.PushMany(ctx, []dbqueue.NewJob{{Name: "a", Queue: "long"}, {Name: "b", Queue: "long"}}); err != nil {
		t.Fatalf("push many to a table set with long names: %v", err)
	}
	got := reserve(t, q, 3, "long")
	if len(got) != 3 {
		t.Fatalf("reserved %d of the 3 jobs pushed", len(got))
	}
}
