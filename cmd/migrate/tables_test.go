package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/migrations"
)

// newest is the newest embedded migration's version, as `migrate version`
// prints it once every migration is applied.
func newest(t *testing.T) string {
	t.Helper()
	fsys, err := migrations.FS(dbqueue.SQLite)
	if err != nil {
		t.Fatal(err)
	}
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil || len(names) == 0 {
		t.Fatalf("embedded migrations: %v, %v", names, err)
	}
	version, _, _ := strings.Cut(names[len(names)-1], "_")
	return strings.TrimLeft(version, "0")
}

// up on the tables Laravel made prints a line for each column it widened.
func TestUpPrintsWidened(t *testing.T) {
	want := map[dbqueue.Dialect]string{
		dbqueue.MySQL:    "widened jobs.attempts from tinyint unsigned to int unsigned (Laravel's type overflows at 255)\n",
		dbqueue.Postgres: "widened jobs.attempts from smallint to integer (Laravel's type overflows at 32767)\n",
	}
	for d, line := range want {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			db := dbtest.Empty(t, d)
			for _, stmt := range dbtest.LaravelStatements(t, d) {
				db.Exec(t, stmt)
			}
			out := mustMigrate(t, "up", "-dsn", db.DSN)
			if !strings.Contains(out, line) || strings.Count(out, "widened jobs.") != 4 {
				t.Fatalf("up printed:\n%s\nwant four widened lines, among them %q", out, line)
			}
			if out := mustMigrate(t, "up", "-dsn", db.DSN); strings.Contains(out, "widened") {
				t.Fatalf("second up printed %q", out)
			}
		})
	}
}

// -jobs, -failed and -schema name the tables up creates.
func TestTableFlags(t *testing.T) {
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			db := dbtest.Empty(t, d)
			mustMigrate(t, "up", "-dsn", db.DSN, "-jobs", "mail_jobs", "-failed", "mail_failed")
			db.Exec(t, "INSERT INTO mail_jobs (queue, payload, attempts, available_at, created_at) VALUES ('default', '{}', 0, 1, 1)")
			if n := db.Count(t, "SELECT COUNT(*) FROM mail_failed"); n != 0 {
				t.Fatal(n)
			}
			if _, err := db.SQL.Exec("SELECT id FROM jobs"); err == nil {
				t.Fatal("up -jobs mail_jobs made a jobs table too")
			}
			if out := mustMigrate(t, "version", "-dsn", db.DSN); strings.TrimSpace(out) != "0" {
				t.Fatalf("the default set's version printed %q, want 0", out)
			}
			if out := mustMigrate(t, "version", "-dsn", db.DSN, "-jobs", "mail_jobs", "-failed", "mail_failed"); strings.TrimSpace(out) != newest(t) {
				t.Fatalf("mail_jobs' version printed %q, want %s", out, newest(t))
			}
			_, _, err := migrate(t, "up", "-dsn", db.DSN, "-jobs", "Mail-Jobs")
			if err == nil || !strings.Contains(err.Error(), "lower-case letters") {
				t.Fatalf("up -jobs Mail-Jobs: %v", err)
			}
		})
	}
}

func TestExport(t *testing.T) {
	dir := t.TempDir()
	out := mustMigrate(t, "export", "-dialect", "mysql", "-format", "golang-migrate", "-dir", dir, "-jobs", "mail_jobs")
	fsys, err := migrations.FS(dbqueue.MySQL)
	if err != nil {
		t.Fatal(err)
	}
	embedded, _ := fs.Glob(fsys, "*.sql")
	if strings.Count(out, "wrote ") != 2*len(embedded) {
		t.Fatalf("export printed %q, want an up and a down file for each of the %d migrations", out, len(embedded))
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Contains(names, "00001_create_jobs.up.sql") || !slices.Contains(names, "00004_create_unique.down.sql") ||
		!slices.Contains(names, "00006_create_batches.up.sql") {
		t.Fatalf("export wrote %v", names)
	}
	up, _ := os.ReadFile(filepath.Join(dir, "00001_create_jobs.up.sql"))
	if !strings.Contains(string(up), "CREATE TABLE IF NOT EXISTS mail_jobs (") || strings.Contains(string(up), "+goose") {
		t.Fatalf("00001_create_jobs.up.sql:\n%s", up)
	}
	if _, _, err := migrate(t, "export", "-dialect", "mysql", "-format", "golang-migrate", "-dir", dir); err == nil || !strings.Contains(err.Error(), "remove the old files") {
		t.Fatalf("export over existing files: %v", err)
	}

	goose := t.TempDir()
	mustMigrate(t, "export", "-dsn", "sqlite:./q.db", "-dir", goose)
	src, err := os.ReadFile(filepath.Join(goose, "00001_create_jobs.sql"))
	if err != nil || !strings.Contains(string(src), "-- +goose Up") || !strings.Contains(string(src), "AUTOINCREMENT") {
		t.Fatalf("goose export for a sqlite DSN: %v\n%s", err, src)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"export", "-dialect", "mysql"}, "-dir"},
		{[]string{"export", "-dir", goose}, "-dialect"},
		{[]string{"export", "-dialect", "oracle", "-dir", t.TempDir()}, "unknown dialect"},
		{[]string{"export", "-dialect", "mysql", "-format", "flyway", "-dir", t.TempDir()}, "goose or golang-migrate"},
		{[]string{"export", "-dialect", "mysql", "-schema", "app", "-dir", t.TempDir()}, "PostgreSQL only"},
	} {
		t.Setenv("DATABASE_URL", "")
		if _, _, err := migrate(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("migrate %q: %v; want an error saying %q", tc.args, err, tc.want)
		}
	}
}
