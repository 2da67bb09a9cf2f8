package main

import (
	"context"
	"image/png"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue/bench/dbqueueq"
)

// TestSoakSmoke runs the soak for a few seconds on SQLite (a file in the
// test's directory, so no server is needed) and checks that it works: the
// CSV has rows, every column of every row is filled, jobs were pushed and
// done, and the plot is a PNG. It times nothing.
func TestSoakSmoke(t *testing.T) {
	dir := t.TempDir()
	c := &config{
		sqliteDSN: "sqlite:" + filepath.Join(dir, "bench.db"),
		worker:    dbqueueq.Options{Concurrency: 10, Prefetch: 10, Workers: 1, Sleep: 20 * time.Millisecond},
	}
	sc := soakConfig{dur: 3 * time.Second, every: time.Second, rate: 200, rateText: "200", dir: dir}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := runSoak(ctx, c, "sqlite", sc); err != nil {
		t.Fatal(err)
	}
	tab, err := readSoakFile(filepath.Join(dir, "soak-sqlite.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if len(tab.rows) < 2 {
		t.Fatalf("%d rows, want a row a second for 3 s", len(tab.rows))
	}
	want := append(append([]string{}, soakCommon...), "file_mib", "wal_mib", "free_pages")
	if len(tab.cols) != len(want) {
		t.Fatalf("columns %v, want %v", tab.cols, want)
	}
	for i, row := range tab.rows {
		if len(row) != len(want) {
			t.Fatalf("row %d has %d values, want %d", i, len(row), len(want))
		}
	}
	var pushed, done float64
	for _, x := range tab.col("pushed_per_s") {
		pushed += x
	}
	for _, x := range tab.col("done_per_s") {
		done += x
	}
	if pushed == 0 || done == 0 {
		t.Fatalf("pushed %v/s and done %v/s summed over the samples: want both > 0", pushed, done)
	}
	if tab.col("file_mib")[len(tab.rows)-1] <= 0 {
		t.Fatal("file_mib is 0: the SQLite file's size was not read")
	}
	f, err := os.Open(filepath.Join(dir, "soak-sqlite.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("plot: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 100 || b.Dy() < 100 {
		t.Fatalf("plot is %v", b)
	}
}
