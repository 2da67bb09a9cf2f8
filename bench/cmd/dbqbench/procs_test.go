package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/dbqueue/dbqueue/bench/dbqueueq"
)

// procsChildEnv, set, makes the test binary the benchmark: procs starts
// os.Executable() as its children, which in a test is this binary.
const procsChildEnv = "DBQBENCH_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(procsChildEnv) != "" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestProcsRiverAndDBQueue runs the procs measurement at a tiny size on
// PostgreSQL (a database of its own, dropped after): dbqueue and River, 1
// and 2 processes, one round. Every run must succeed with as many jobs
// done as were pushed, counted by the children and checked in the tables,
// and the table must carry both systems, their ratio and the caption.
func TestProcsRiverAndDBQueue(t *testing.T) {
	dsn := os.Getenv("DBQUEUE_TEST_POSTGRES_DSN")
	if dsn == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("DBQUEUE_TEST_POSTGRES_DSN is unset: CI must measure procs on PostgreSQL")
		}
		t.Skip("DBQUEUE_TEST_POSTGRES_DSN is unset")
	}
	t.Setenv(procsChildEnv, "1")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := &config{
		pgDSN:   testDatabase(ctx, t, dsn),
		rounds:  1,
		timeout: time.Minute,
		worker:  dbqueueq.Options{Concurrency: 10, Prefetch: 10, Workers: 1, Sleep: 20 * time.Millisecond},
	}
	const jobs = 2_000
	pc := procsConfig{counts: []int{1, 2}, systems: []string{procsDBQueue, procsRiver}, jobs: jobs, concurrency: 10}
	rep, err := measureProcs(ctx, c, "pg", pc)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.targets) != 2 {
		t.Fatalf("measured %d systems, want dbqueue and River", len(rep.targets))
	}
	for k, target := range rep.targets {
		for i, p := range pc.counts {
			rs := rep.res[k][i]
			if len(rs) != 1 {
				t.Fatalf("%s, %d processes: %d results, want 1 round", target.label, p, len(rs))
			}
			r := rs[0]
			if r.failed != "" {
				t.Errorf("%s, %d processes: %s", target.label, p, r.failed)
			}
			if r.done != jobs {
				t.Errorf("%s, %d processes: the children did %d jobs, want the %d pushed", target.label, p, r.done, jobs)
			}
			if r.rate <= 0 {
				t.Errorf("%s, %d processes: %v jobs/s", target.label, p, r.rate)
			}
			if r.peakConns < p {
				t.Errorf("%s, %d processes: peak connections %d, want one a process at least", target.label, p, r.peakConns)
			}
		}
	}
	for _, want := range []string{"| 1 × 10 | dbqueue |", "| 2 × 10 | River |", "dbqueue ÷ River", "> `cd bench && go run ./cmd/"} {
		if !strings.Contains(rep.table, want) {
			t.Errorf("the table lacks %q:\n%s", want, rep.table)
		}
	}
	t.Log("\n" + rep.table)
}

// TestParseProcsCounts: -procs 16 still means 1 and 16, a list adds the
// baseline once, and a count below 1 is refused.
func TestParseProcsCounts(t *testing.T) {
	for in, want := range map[string][]int{"16": {1, 16}, "1,4,16": {1, 4, 16}, "16, 4": {1, 4, 16}, "1": {1}} {
		got, err := parseProcsCounts(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("parseProcsCounts(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"0", "4,x", "", "-2"} {
		if got, err := parseProcsCounts(in); err == nil {
			t.Errorf("parseProcsCounts(%q) = %v, want an error", in, got)
		}
	}
	if _, err := parseProcsSystems("dbqueue,sidekiq"); err == nil {
		t.Error("parseProcsSystems took an unknown system")
	}
}

// testDatabase creates a database of its own on the server at dsn, for
// the test's life, and returns its DSN.
func testDatabase(ctx context.Context, t *testing.T, dsn string) string {
	t.Helper()
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "dbqbench_procs_" + hex.EncodeToString(b)
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := admin.ExecContext(context.Background(), "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
	})
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme == "" {
		t.Fatalf("DBQUEUE_TEST_POSTGRES_DSN must be a postgres:// URL: %q", dsn)
	}
	u.Path = "/" + name
	return u.String()
}
