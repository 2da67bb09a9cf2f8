package dbtest

import (
	"flag"
	"fmt"
	"strconv"
	"testing"

	"github.com/dbqueue/dbqueue"
)

// Parallel is how many parallel tests a package runs at once when the
// command line does not say (-parallel). The suites wait on database
// servers, timeouts, stuck handlers and child processes far more than they
// use a CPU, so Go's default — GOMAXPROCS, 2 on a small CI machine — left
// the machine idle: the worker package took 213 s at 2, and 110 s at 6
// with its waiting tests marked t.Parallel.
const Parallel = 6

// SetParallel makes Parallel the package's -parallel unless the command
// line gave one. Call it from TestMain before m.Run; it parses the flags.
func SetParallel() {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if given {
		return
	}
	if err := flag.Set("test.parallel", strconv.Itoa(Parallel)); err != nil {
		panic(fmt.Sprintf("dbtest: set -test.parallel: %v", err))
	}
}

// heavy holds a place for each heavy test running in the package, and
// heavyOn one for each server.
var (
	heavy   = make(chan struct{}, 2)
	heavyOn = map[dbqueue.Dialect]chan struct{}{
		dbqueue.Postgres: make(chan struct{}, 1),
		dbqueue.MySQL:    make(chan struct{}, 1),
		dbqueue.SQLite:   make(chan struct{}, 1),
	}
)

// Heavy waits until no other heavy test of the package runs on d and
// fewer than two run in all, then holds a place until t ends. A heavy
// test keeps the CPUs busy — worker processes by the handful, tens of
// thousands of jobs — and times its work against a deadline: three at
// once on a 2-core machine ran past those deadlines, and two on one
// PostgreSQL server (one opens 69 connections) past its default 100
// max_connections. The many tests that only wait run beside them. Call it
// first in the test's parallel subtest, after t.Parallel.
func Heavy(t testing.TB, d dbqueue.Dialect) {
	t.Helper()
	on, ok := heavyOn[d]
	if !ok {
		t.Fatalf("dbtest.Heavy: unknown dialect %q", d)
	}
	on <- struct{}{} // always the server's place first, then the machine's
	heavy <- struct{}{}
	t.Cleanup(func() { <-heavy; <-on })
}
