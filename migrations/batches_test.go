package migrations_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/migrations"
)

// column is one column of a table as the catalog describes it.
type column struct {
	name, typ string
	null, key bool
	collation string
}

// intWidth is MariaDB's display width of an integer type: int(11).
var intWidth = regexp.MustCompile(`^((?:tiny|small|medium|big)?int)\(\d+\)`)

// columns reads table's columns in order from the catalog.
func columns(t *testing.T, db *dbtest.DB, table string) []column {
	t.Helper()
	var query string
	switch db.Dialect {
	case dbqueue.MySQL:
		query = `SELECT c.column_name, c.column_type, c.is_nullable = 'YES', c.column_key = 'PRI', COALESCE(c.collation_name, '')
FROM information_schema.columns c WHERE c.table_schema = DATABASE() AND c.table_name = ? ORDER BY c.ordinal_position`
	case dbqueue.Postgres:
		query = `SELECT c.column_name, c.data_type || COALESCE('(' || c.character_maximum_length || ')', ''), c.is_nullable = 'YES',
  EXISTS (SELECT 1 FROM information_schema.key_column_usage k JOIN information_schema.table_constraints tc
    ON tc.constraint_name = k.constraint_name AND tc.table_schema = k.table_schema
    WHERE tc.constraint_type = 'PRIMARY KEY' AND k.table_schema = c.table_schema AND k.table_name = c.table_name AND k.column_name = c.column_name),
  COALESCE(c.collation_name, '')
FROM information_schema.columns c WHERE c.table_schema = current_schema() AND c.table_name = $1 ORDER BY c.ordinal_position`
	case dbqueue.SQLite:
		query = `SELECT name, type, "notnull" = 0, pk > 0, '' FROM pragma_table_info(?) ORDER BY cid`
	}
	rows, err := db.SQL.Query(query, table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []column
	for rows.Next() {
		var c column
		if err := rows.Scan(&c.name, &c.typ, &c.null, &c.key, &c.collation); err != nil {
			t.Fatal(err)
		}
		c.typ = intWidth.ReplaceAllString(strings.ToLower(c.typ), "$1")
		if db.Dialect == dbqueue.SQLite {
			c.typ = affinity(c.typ)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// affinity is SQLite's type affinity of a declared type, which decides
// what a column stores (varchar and TEXT are both TEXT).
func affinity(typ string) string {
	switch {
	case strings.Contains(typ, "int"):
		return "integer"
	case strings.Contains(typ, "char"), strings.Contains(typ, "clob"), strings.Contains(typ, "text"):
		return "text"
	}
	return typ
}

// The job_batches table `migrate up` creates is the one Laravel's own
// queue:batches-table migration makes, column for column — names, order,
// types, nullability, primary key, collation — save the three times,
// which are 64-bit where Laravel's integer ends in 2038. So an app whose
// database dbqueue migrated first can skip Laravel's migration (which
// would fail: the table exists), and Laravel's Bus::findBatch and PHP
// workers use dbqueue's table as their own.
func TestBatchesTableIsLaravels(t *testing.T) {
	eachEmpty(t, func(t *testing.T, db *dbtest.DB) {
		for _, stmt := range dbtest.LaravelBatchStatements(t, db.Dialect) {
			db.Exec(t, stmt)
		}
		laravel := columns(t, db, "job_batches")
		if len(laravel) != 10 {
			t.Fatalf("Laravel's job_batches has %d columns, want the stub's 10: %+v", len(laravel), laravel)
		}
		db.Exec(t, "DROP TABLE job_batches")
		if err := migrations.Up(ctx, db.SQL, db.Dialect); err != nil {
			t.Fatal(err)
		}
		ours := columns(t, db, "job_batches")
		if len(ours) != len(laravel) {
			t.Fatalf("dbqueue's job_batches has %d columns, Laravel's %d:\n%+v\n%+v", len(ours), len(laravel), ours, laravel)
		}
		wider := map[string]string{"int": "bigint", "integer": "bigint"}
		for i, l := range laravel {
			o := ours[i]
			want := l
			switch l.name {
			case "cancelled_at", "created_at", "finished_at":
				if db.Dialect != dbqueue.SQLite { // SQLite's INTEGER is 64-bit already
					want.typ = wider[l.typ]
				}
			}
			if o != want {
				t.Errorf("column %d: dbqueue has %+v, Laravel's migration %+v (want %+v)", i+1, o, l, want)
			}
		}
	})
}

// On a database where Laravel's queue:batches-table migration ran first,
// `migrate up` keeps Laravel's table as it is.
func TestUpKeepsLaravelsBatchesTable(t *testing.T) {
	eachEmpty(t, func(t *testing.T, db *dbtest.DB) {
		for _, stmt := range dbtest.LaravelBatchStatements(t, db.Dialect) {
			db.Exec(t, stmt)
		}
		laravel := columns(t, db, "job_batches")
		if err := migrations.Up(ctx, db.SQL, db.Dialect); err != nil {
			t.Fatalf("up on a database with Laravel's job_batches: %v", err)
		}
		after := columns(t, db, "job_batches")
		if len(after) != len(laravel) {
			t.Fatalf("up changed Laravel's job_batches: %+v, was %+v", after, laravel)
		}
		for i := range after {
			if after[i] != laravel[i] {
				t.Errorf("up changed Laravel's job_batches column %+v to %+v", laravel[i], after[i])
			}
		}
	})
}
