package bench_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue/bench"
	"github.com/dbqueue/dbqueue/bench/asynqq"
	"github.com/dbqueue/dbqueue/bench/ceiling"
	"github.com/dbqueue/dbqueue/bench/dbqueueq"
	"github.com/dbqueue/dbqueue/bench/riverq"
)

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// TestSystems runs every system through both modes on a small N. It skips a
// system whose database is not reachable (BENCH_PG_DSN, BENCH_MYSQL_DSN),
// or asynq when redis-server is not installed.
// dbqueue-sqlite uses a file in the test's temporary directory.
func TestSystems(t *testing.T) {
	pg := env("BENCH_PG_DSN", "postgres://postgres@127.0.0.1:5432/test")
	my := env("BENCH_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/test")
	lite := "sqlite:" + filepath.Join(t.TempDir(), "bench.db")
	opens := map[string]func(context.Context) (bench.System, error){
		dbqueueq.NamePG: func(ctx context.Context) (bench.System, error) {
			return dbqueueq.NewPG(ctx, pg, dbqueueq.Options{})
		},
		dbqueueq.NameMariaDB: func(ctx context.Context) (bench.System, error) {
			return dbqueueq.NewMariaDB(ctx, my, dbqueueq.Options{})
		},
		dbqueueq.NameSQLite: func(ctx context.Context) (bench.System, error) {
			return dbqueueq.NewSQLite(ctx, lite, dbqueueq.Options{})
		},
		bench.RiverName: func(ctx context.Context) (bench.System, error) {
			return riverq.New(ctx, pg, riverq.Options{})
		},
		asynqq.Name: func(ctx context.Context) (bench.System, error) {
			return asynqq.New(ctx, asynqq.Options{}) // its own redis-server, if installed
		},
		ceiling.CeilingPG: func(ctx context.Context) (bench.System, error) {
			return ceiling.NewPG(ctx, pg, ceiling.Options{})
		},
		ceiling.CeilingMariaDB: func(ctx context.Context) (bench.System, error) {
			return ceiling.NewMariaDB(ctx, my, ceiling.Options{})
		},
		dbqueueq.NamePG + "-" + dbqueueq.HandlerInsertTx: func(ctx context.Context) (bench.System, error) {
			return dbqueueq.NewPG(ctx, pg, dbqueueq.Options{Handler: dbqueueq.HandlerInsertTx})
		},
		dbqueueq.NamePG + "-" + dbqueueq.HandlerInsert: func(ctx context.Context) (bench.System, error) {
			return dbqueueq.NewPG(ctx, pg, dbqueueq.Options{Handler: dbqueueq.HandlerInsert})
		},
		dbqueueq.NameMariaDB + "-" + dbqueueq.HandlerInsertTx: func(ctx context.Context) (bench.System, error) {
			return dbqueueq.NewMariaDB(ctx, my, dbqueueq.Options{Handler: dbqueueq.HandlerInsertTx})
		},
		dbqueueq.NameMariaDB + "-" + dbqueueq.HandlerInsert: func(ctx context.Context) (bench.System, error) {
			return dbqueueq.NewMariaDB(ctx, my, dbqueueq.Options{Handler: dbqueueq.HandlerInsert})
		},
		ceiling.CeilingPG + ceiling.InsertSuffix: func(ctx context.Context) (bench.System, error) {
			return ceiling.NewPG(ctx, pg, ceiling.Options{Insert: true})
		},
		ceiling.CeilingMariaDB + ceiling.InsertSuffix: func(ctx context.Context) (bench.System, error) {
			return ceiling.NewMariaDB(ctx, my, ceiling.Options{Insert: true})
		},
		ceiling.CeilingSQLite: func(ctx context.Context) (bench.System, error) {
			return ceiling.NewSQLite(ctx, filepath.Join(t.TempDir(), "ceiling.db"), ceiling.Options{})
		},
	}
	for name, open := range opens {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			sys, err := open(ctx)
			if err != nil {
				t.Skipf("database not reachable: %v", err)
			}
			defer sys.Close()
			if err := sys.Setup(ctx); err != nil {
				t.Fatal(err)
			}
			if sys.Name() != name {
				t.Fatalf("Name() = %q, want %q", sys.Name(), name)
			}
			for _, mode := range []bench.Mode{bench.ModeBurnDown, bench.ModeEndToEnd} {
				const n = 2_345 // not a multiple of any batch size
				m, err := bench.Measure(ctx, sys, mode, n, 500)
				if err != nil {
					t.Fatalf("%s: %v", mode, err)
				}
				d := m.Elapsed
				if d <= 0 {
					t.Fatalf("%s: elapsed %s", mode, d)
				}
				t.Logf("%s: %d jobs in %s (%.0f jobs/s)", mode, n, d, n/d.Seconds())
			}
		})
	}
}
