package migrations_test

import (
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/pressly/goose/v3"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/migrations"
)

// An installation migrated by the previous release (version 7), with
// jobs and a paused queue, upgrades to names compared byte for byte: after
// `up`, a reserve from "mail" no longer takes a job of "MAIL ", the pause
// of "Reports" is still there and is not that of "reports", and on MySQL
// up says, column by column, which name columns it made byte-exact.
func TestUpMakesExistingNamesByteExact(t *testing.T) {
	eachEmpty(t, func(t *testing.T, db *dbtest.DB) {
		migrateBelow(t, db, "00008")
		// The previous release's job and pause, written as it wrote them:
		// this release's Queue refuses to open tables older than its
		// migrations.
		db.Exec(t, "INSERT INTO jobs (queue, payload, attempts, available_at, created_at) VALUES (?, ?, 0, 0, 0)",
			"MAIL ", `{"uuid":"5b7cbc4a-6a1b-4f4e-9a37-5a0c3f0b9c11","displayName":"n","job":"n","maxTries":null,"data":null}`)
		db.Exec(t, "INSERT INTO dbqueue_signals (name, value) VALUES (?, 1)", "pause:"+dbqueue.DefaultConnection+":Reports")

		m, err := migrations.New(db.SQL, db.Dialect, migrations.WithLogger(nil))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Up(ctx); err != nil {
			t.Fatal(err)
		}
		q := db.Queue(t)
		var got []string
		for _, w := range m.Widened() {
			got = append(got, w.String())
		}
		if db.Dialect == dbqueue.MySQL {
			for _, col := range []string{"jobs.queue", "failed_jobs.connection", "failed_jobs.queue", "dbqueue_signals.name", "jobs_limits.name", "jobs_locks.name"} {
				if !strings.Contains(strings.Join(got, "\n"), "made "+col+" byte-exact") {
					t.Errorf("up did not report %s made byte-exact; it reported:\n%s", col, strings.Join(got, "\n"))
				}
			}
		} else if len(got) != 0 {
			t.Errorf("up reported changes where names are byte-exact already: %q", got)
		}

		for _, name := range []string{"mail", "MAIL", "mail "} {
			if jobs, err := q.Reserve(ctx, 1, name); err != nil || len(jobs) != 0 {
				t.Fatalf("after up, a reserve from %q took %d jobs (%v); the job is on %q", name, len(jobs), err, "MAIL ")
			}
		}
		if jobs, err := q.Reserve(ctx, 1, "MAIL "); err != nil || len(jobs) != 1 {
			t.Fatalf("after up, a reserve from %q took %d jobs (%v), want its 1", "MAIL ", len(jobs), err)
		}
		if p, err := q.Paused(ctx, "Reports"); err != nil || !p {
			t.Fatalf("after up, the pause of Reports is gone: %v, %v", p, err)
		}
		if p, err := q.Paused(ctx, "reports"); err != nil || p {
			t.Fatalf("after up, reports reads as paused by the pause of Reports: %v, %v", p, err)
		}
	})
}

// migrateBelow migrates db with the migrations whose files sort before
// first, as a previous release of dbqueue left an installation.
func migrateBelow(t *testing.T, db *dbtest.DB, first string) {
	t.Helper()
	all, err := migrations.FS(db.Dialect)
	if err != nil {
		t.Fatal(err)
	}
	previous := fstest.MapFS{}
	names, _ := fs.Glob(all, "*.sql")
	for _, name := range names {
		if name < first {
			data, _ := fs.ReadFile(all, name)
			previous[name] = &fstest.MapFile{Data: data}
		}
	}
	gd := map[dbqueue.Dialect]goose.Dialect{dbqueue.Postgres: goose.DialectPostgres, dbqueue.MySQL: goose.DialectMySQL, dbqueue.SQLite: goose.DialectSQLite3}[db.Dialect]
	p, err := goose.NewProvider(gd, db.SQL, previous, goose.WithTableName(migrations.VersionTable), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("migrate to the version before %s: %v", first, err)
	}
}
