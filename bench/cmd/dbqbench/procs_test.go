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

	"github.com/dbqueue/dbqueue/bench"
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

// TestProcsTable: every row has the header's columns, a failed River row
// among them, and the dbqueue ÷ River ratio is the medians' (none where
// River failed); dbqueue alone keeps the columns it always had.
func TestProcsTable(t *testing.T) {
	pc := procsConfig{counts: []int{1, 4}, jobs: 100, concurrency: 50}
	c := &config{rounds: 2}
	dbq := procsTarget{system: procsDBQueue, label: "dbqueue"}
	rv := procsTarget{system: procsRiver, label: "River"}
	ok := func(rate float64) procsResult { return procsResult{rate: rate, done: 100, peakConns: 3} }
	failed := procsResult{failed: "child 1: exit status 1\nmore", peakConns: 7}
	rep := procsReport{
		targets: []procsTarget{dbq, rv},
		res: [][][]procsResult{
			{{ok(300), ok(500)}, {ok(800), ok(800)}},
			{{ok(100), ok(300)}, {failed, failed}},
		},
	}
	table := procsTable("pg", "PostgreSQL", "PostgreSQL 15", pc, c, rep, bench.Caption{Command: "cd bench && go run ./cmd/dbqbench -measure procs"})
	rows := tableRows(table)
	if len(rows) != 6 {
		t.Fatalf("%d table lines, want a header, a rule and 4 rows:\n%s", len(rows), table)
	}
	for _, r := range rows {
		if n := strings.Count(r, "|"); n != 10 {
			t.Errorf("%d bars in %q, want 10 (9 columns)", n, r)
		}
	}
	for _, want := range []string{
		"| 1 × 50 | dbqueue | 400 | 300 | 500 | 1.00 | 2.00 |", // 400 / 200
		"| 4 × 50 | dbqueue | 800 | 800 | 800 | 2.00 | – |",
		"| 4 × 50 | River | failed in 2 of 2 rounds: child 1: exit status 1 |",
		"> `cd bench && go run ./cmd/dbqbench -measure procs`",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("the table lacks %q:\n%s", want, table)
		}
	}

	alone := procsReport{targets: []procsTarget{dbq}, res: rep.res[:1]}
	table = procsTable("pg", "PostgreSQL", "PostgreSQL 15", pc, c, alone, bench.Caption{})
	rows = tableRows(table)
	if !strings.HasPrefix(rows[0], "| processes × concurrency | median jobs/s | min | max | × 1 process | peak connections |") {
		t.Errorf("dbqueue alone: header %q, want the columns it always had", rows[0])
	}
	for _, r := range rows {
		if n := strings.Count(r, "|"); n != 8 {
			t.Errorf("%d bars in %q, want 8 (7 columns)", n, r)
		}
	}
}

func tableRows(md string) []string {
	var rows []string
	for line := range strings.SplitSeq(md, "\n") {
		if strings.HasPrefix(line, "|") {
			rows = append(rows, line)
		}
	}
	return rows
}
