package dbtest

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/dbqueue/dbqueue"
)

// LaravelStatements returns the DDL Laravel 8 emitted for its jobs and
// failed_jobs tables on dialect d, as recorded in
// testdata/laravel/schema_*.sql: run them to get the tables exactly as a
// Laravel app has them.
func LaravelStatements(t testing.TB, d dbqueue.Dialect) []string {
	t.Helper()
	return laravelDDL(t, d, "schema")
}

// LaravelBatchStatements returns the DDL Laravel 8's queue:batches-table
// migration emits on dialect d, as recorded in
// testdata/laravel/batches_*.sql.
func LaravelBatchStatements(t testing.TB, d dbqueue.Dialect) []string {
	t.Helper()
	return laravelDDL(t, d, "batches")
}

// laravelDDL reads the statements recorded after "-- Statements Laravel
// emitted:" in testdata/laravel/<file>_<dialect>.sql.
func laravelDDL(t testing.TB, d dbqueue.Dialect, file string) []string {
	t.Helper()
	name := map[dbqueue.Dialect]string{dbqueue.Postgres: "pgsql", dbqueue.MySQL: "mysql", dbqueue.SQLite: "sqlite"}[d]
	_, here, _, _ := runtime.Caller(0)
	path := filepath.Join(filepath.Dir(here), "..", "..", "testdata", "laravel", file+"_"+name+".sql")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var stmts []string
	in := false
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "-- Statements Laravel emitted:"):
			in = true
		case in && strings.HasPrefix(line, "--   "):
			stmts = append(stmts, strings.TrimSuffix(strings.TrimPrefix(line, "--   "), ";"))
		case in:
			in = false
		}
	}
	if len(stmts) == 0 {
		t.Fatalf("no Laravel statements in %s", path)
	}
	return stmts
}
