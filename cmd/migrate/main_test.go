package main

import (
	"context"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/migrations"
)

// migrate runs the command as main would and returns what it printed.
func migrate(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errOut strings.Builder
	err = run(ctx, args, &out, &errOut)
	return out.String(), errOut.String(), err
}

// mustMigrate is migrate that fails the test on an error.
func mustMigrate(t *testing.T, args ...string) string {
	t.Helper()
	out, _, err := migrate(t, args...)
	if err != nil {
		t.Fatalf("migrate %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// embedded returns the newest migration version and the file names of all.
func embedded(t *testing.T, db *dbtest.DB) (newest int64, files []string) {
	t.Helper()
	m, err := migrations.New(db.SQL, db.Dialect)
	if err != nil {
		t.Fatal(err)
	}
	st, err := m.Status(context.Background())
	if err != nil || len(st) == 0 {
		t.Fatalf("status: %v (%d migrations)", err, len(st))
	}
	for _, s := range st {
		files = append(files, s.Source.Path)
	}
	return st[len(st)-1].Source.Version, files
}

func TestUpStatusVersionDown(t *testing.T) {
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			db := dbtest.Empty(t, d)
			newest, files := embedded(t, db)

			if out := mustMigrate(t, "version", "-dsn", db.DSN); strings.TrimSpace(out) != "0" {
				t.Fatalf("version before up printed %q, want 0", out)
			}
			out := mustMigrate(t, "-dsn", db.DSN, "up")
			for _, f := range files {
				if !strings.Contains(out, "applied "+f) {
					t.Errorf("up printed %q, want a line for %s", out, f)
				}
			}
			if n := db.Count(t, "SELECT COUNT(*) FROM jobs") + db.Count(t, "SELECT COUNT(*) FROM failed_jobs"); n != 0 {
				t.Fatalf("new tables hold %d rows", n)
			}
			if out := mustMigrate(t, "up", "-dsn", db.DSN); !strings.Contains(out, "no pending migrations") {
				t.Fatalf("second up printed %q", out)
			}
			out = mustMigrate(t, "status", "-dsn", db.DSN)
			for _, f := range files {
				if !strings.Contains(out, f+" ") || strings.Contains(out, "pending") {
					t.Errorf("status printed %q, want %s applied", out, f)
				}
			}
			if c := strings.Count(out, "applied "); c != len(files) {
				t.Errorf("status shows %d applied, want %d:\n%s", c, len(files), out)
			}
			if out := mustMigrate(t, "version", "-dsn", db.DSN); strings.TrimSpace(out) != strconv.FormatInt(newest, 10) {
				t.Fatalf("version printed %q, want %d", out, newest)
			}

			out = mustMigrate(t, "down", "-dsn", db.DSN)
			if want := "rolled back " + files[len(files)-1]; strings.TrimSpace(out) != want {
				t.Fatalf("down printed %q, want %q", out, want)
			}
			if out := mustMigrate(t, "status", "-dsn", db.DSN); !strings.Contains(out, "pending") {
				t.Fatalf("status after down printed %q, want a pending migration", out)
			}
			for range files[1:] {
				mustMigrate(t, "down", "-dsn", db.DSN)
			}
			if out := mustMigrate(t, "version", "-dsn", db.DSN); strings.TrimSpace(out) != "0" {
				t.Fatalf("version after rolling everything back printed %q", out)
			}
			if _, err := db.SQL.Exec("SELECT id FROM jobs"); err == nil {
				t.Fatal("down left the jobs table")
			}
			_, _, err := migrate(t, "down", "-dsn", db.DSN)
			if err == nil || !strings.Contains(err.Error(), "nothing to roll back") {
				t.Fatalf("down with nothing applied: %v", err)
			}
		})
	}
}

// TestDatabaseURL: without -dsn the DSN comes from DATABASE_URL, and -dsn
// wins over it. (t.Setenv rules out t.Parallel here.)
func TestDatabaseURL(t *testing.T) {
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			db := dbtest.Empty(t, d)
			newest, _ := embedded(t, db)
			t.Setenv("DATABASE_URL", db.DSN)
			out := mustMigrate(t, "up")
			if !strings.Contains(out, "applied 00001_create_jobs.sql") {
				t.Fatalf("up from DATABASE_URL printed %q", out)
			}
			// On PostgreSQL up says it set the jobs table's autovacuum options.
			if said := strings.Contains(out, "set autovacuum on jobs (autovacuum_vacuum_cost_delay=0"); said != (d == dbqueue.Postgres) {
				t.Fatalf("up printed %q: the autovacuum line present %v, want %v", out, said, d == dbqueue.Postgres)
			}
			if out := mustMigrate(t, "version"); strings.TrimSpace(out) != strconv.FormatInt(newest, 10) {
				t.Fatalf("version from DATABASE_URL printed %q, want %d", out, newest)
			}
			t.Setenv("DATABASE_URL", "redis://not-used")
			if out := mustMigrate(t, "status", "-dsn", db.DSN); !strings.Contains(out, "applied") {
				t.Fatalf("-dsn did not win over DATABASE_URL: %q", out)
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	t.Setenv("DATABASE_URL", "")
	sqlite := "sqlite:" + filepath.Join(t.TempDir(), "queue.db")
	for _, tc := range []struct {
		name string
		args []string
		want []string // all must appear in the error
	}{
		{"no command", []string{"-dsn", sqlite}, []string{"no command given", "up|down|status|version"}},
		{"unknown command", []string{"frobnicate", "-dsn", sqlite}, []string{`unknown command "frobnicate"`, "up|down|status|version"}},
		{"extra argument", []string{"up", "now"}, []string{"unexpected arguments", "now"}},
		{"unknown flag", []string{"up", "-force"}, []string{"-force"}},
		{"missing DSN", []string{"up"}, []string{"-dsn", "DATABASE_URL"}},
		{"blank DSN", []string{"status", "-dsn", "  "}, []string{"-dsn", "DATABASE_URL"}},
		{"unknown scheme", []string{"up", "-dsn", "redis://x"}, []string{"unknown DSN scheme", "redis", "postgres://"}},
		{"MySQL DSN without database", []string{"up", "-dsn", "mysql://root@127.0.0.1:3306"}, []string{"names no database"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := migrate(t, tc.args...)
			if err == nil {
				t.Fatalf("migrate %q succeeded", tc.args)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if out != "" {
				t.Errorf("printed %q on stdout", out)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	out, errOut, err := migrate(t, "-h")
	if err != nil {
		t.Fatalf("-h: %v", err)
	}
	if out != "" || !strings.Contains(errOut, "usage: migrate") || !strings.Contains(errOut, "DATABASE_URL") {
		t.Fatalf("-h printed stdout %q, stderr %q", out, errOut)
	}
}

// closedPort returns a local TCP port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(l.Addr().String())
	l.Close()
	return port
}

func TestUnreachable(t *testing.T) {
	port := closedPort(t)
	for _, tc := range []struct {
		dialect dbqueue.Dialect
		dsn     string
	}{
		{dbqueue.Postgres, "postgres://postgres:secret@127.0.0.1:" + port + "/test?connect_timeout=5"},
		{dbqueue.MySQL, "mysql://root:secret@127.0.0.1:" + port + "/test?timeout=5s"},
		{dbqueue.SQLite, "sqlite:" + filepath.Join(t.TempDir(), "no", "such", "dir", "queue.db")},
	} {
		t.Run(string(tc.dialect), func(t *testing.T) {
			for _, cmd := range []string{"up", "status"} {
				_, _, err := migrate(t, cmd, "-dsn", tc.dsn)
				if err == nil || !strings.Contains(err.Error(), "cannot reach the "+string(tc.dialect)+" database") {
					t.Fatalf("%s on an unreachable database: %v", cmd, err)
				}
				if strings.Contains(err.Error(), "secret") {
					t.Errorf("the error shows the password: %v", err)
				}
			}
		})
	}
}

// A bad DSN gets an error that says what is wrong without the password
// it carries.
func TestBadDSNErrorsHideThePassword(t *testing.T) {
	for _, c := range dbtest.BadDSNs {
		for _, cmd := range []string{"status", "up", "export"} {
			_, stderr, err := migrate(t, cmd, "-dsn", c.DSN, "-dir", t.TempDir())
			if err == nil {
				if cmd == "export" {
					continue // export reads only the DSN's dialect
				}
				t.Errorf("migrate %s -dsn %q succeeded", cmd, c.DSN)
				continue
			}
			if p := dbtest.LeakedSecret(err.Error() + stderr); p != "" {
				t.Errorf("migrate %s -dsn %q shows %q of the password: %v", cmd, c.DSN, p, err)
			}
			if !strings.Contains(err.Error(), c.Want) {
				t.Errorf("migrate %s -dsn %q: %v: want it to say %q", cmd, c.DSN, err, c.Want)
			}
		}
	}
}
