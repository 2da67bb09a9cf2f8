// Package dialecttest is the conformance suite of internal/dialect: the
// behaviour every database's Dialect must show, written once against the
// interfaces (Dialect, Uniquer, Limits, TickLocker, Batches, Lookup) and
// run for each database and each DSN variant that changes what a driver
// reports (see ../conformance_test.go). A new database is done when its
// dialect file and migrations pass Run.
//
// Every subtest asserts something a wrong dialect gets wrong: a claim that
// takes a locked or someone else's row, a finish that acts on a
// reservation taken over, ids counted with the wrong step, a time read
// from the wrong clock or zone.
package dialecttest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// Harness is one database for the suite: empty, migrated, with the
// dialect under test opened on it.
type Harness struct {
	// Dialect is the dialect under test, opened as the queue opens it
	// (dialect.Open on DB, or dialect.For for a server variant forced).
	Dialect dialect.Dialect
	// DB is a pool opened as the queue opens its own (the driver's
	// registered Opener), so DSN flags and session settings apply.
	DB sqldb.DB
	// RowLocks is true where the database locks rows (SELECT … FOR UPDATE
	// SKIP LOCKED), false where a writer holds the whole database
	// (SQLite): the SKIP LOCKED subtest runs only with row locks.
	RowLocks bool
}

// Run runs every behaviour as a subtest of t on one database that newDB
// makes. The subtests share it: each keeps to queue names, keys and uuids
// of its own, so they run in sequence on one migration.
func Run(t *testing.T, newDB func(t *testing.T) Harness) {
	h := newDB(t)
	s := &suite{Harness: h}
	for _, c := range []struct {
		name string
		fn   func(t *testing.T, s *suite)
	}{
		{"ClaimSkipsLockedRows", claimSkipsLockedRows},
		{"ConcurrentClaimsAreDisjoint", concurrentClaimsAreDisjoint},
		{"ClaimReclaimsExpired", claimReclaimsExpired},
		{"ClaimMarksAbandoned", claimMarksAbandoned},
		{"ReadyQueues", readyQueues},
		{"FinishesCheckTheToken", finishesCheckTheToken},
		{"FinishesInTheCallersTransaction", finishesInTheCallersTransaction},
		{"InsertIDsAnyStep", insertIDsAnyStep},
		{"DatabaseClock", databaseClock},
		{"Unique", unique},
		{"LimitsAndLocks", limitsAndLocks},
		{"TickLocks", tickLocks},
		{"Batches", batches},
		{"Signals", signals},
		{"Lookup", lookup},
		{"RetryFromFailed", retryFromFailed},
	} {
		t.Run(c.name, func(t *testing.T) {
			// A dialect that blocks where it should skip fails the
			// subtest rather than hanging the suite.
			var cancel context.CancelFunc
			s.ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c.fn(t, s)
		})
	}
}

// suite is the shared database and the helpers the subtests use.
type suite struct {
	Harness
	queues atomic.Int64
	// ctx is the running subtest's: it ends a minute after the start.
	ctx context.Context
}

// queue is a queue name no other subtest uses.
func (s *suite) queue(t *testing.T) string {
	return fmt.Sprintf("%s-%d", t.Name(), s.queues.Add(1))
}

// push inserts n due rows on queue, each payload naming its index, and
// returns their ids.
func (s *suite) push(t *testing.T, queue string, n int) []int64 {
	t.Helper()
	rows := make([]dialect.PushRow, n)
	for i := range rows {
		rows[i] = dialect.PushRow{Queue: queue, Payload: payload(queue, i)}
	}
	return s.insert(t, rows)
}

func (s *suite) insert(t *testing.T, rows []dialect.PushRow) []int64 {
	t.Helper()
	ids, err := s.Dialect.Insert(s.ctx, s.DB, rows, false)
	if err != nil {
		t.Fatalf("insert %d rows: %v", len(rows), err)
	}
	if len(ids) != len(rows) {
		t.Fatalf("insert of %d rows returned %d ids", len(rows), len(ids))
	}
	return ids
}

func payload(queue string, i int) []byte {
	return []byte(`{"uuid":"` + queue + "-" + strconv.Itoa(i) + `","data":` + strconv.Itoa(i) + `}`)
}

// claim claims up to n rows of queue, retrying what a worker retries.
func (s *suite) claim(t *testing.T, queue string, retryAfter int64, n int) []dialect.JobRow {
	t.Helper()
	var rows []dialect.JobRow
	err := sqldb.Retry(s.ctx, func() (err error) {
		rows, err = s.Dialect.Claim(s.ctx, s.DB, queue, retryAfter, n)
		return err
	})
	if err != nil {
		t.Fatalf("claim %d of %s: %v", n, queue, err)
	}
	return slices.Clone(rows)
}

// claimOne claims the one row queue must have ready.
func (s *suite) claimOne(t *testing.T, queue string) dialect.JobRow {
	t.Helper()
	rows := s.claim(t, queue, 3600, 1)
	if len(rows) != 1 {
		t.Fatalf("claim of %s took %d rows, want 1", queue, len(rows))
	}
	return rows[0]
}

func held(r dialect.JobRow) dialect.Held {
	return dialect.Held{ID: r.ID, Token: r.Token, Attempts: r.Attempts}
}

// exec runs raw SQL with '?' placeholders (tables named as the dialect's
// Tables name them).
func (s *suite) exec(t *testing.T, query string, args ...any) int64 {
	t.Helper()
	res, err := s.DB.Exec(s.ctx, s.Dialect.Rebind(query), args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return res.RowsAffected
}

// int reads one integer.
func (s *suite) int(t *testing.T, query string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := s.DB.QueryRow(s.ctx, s.Dialect.Rebind(query), args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// text reads one text value (payloads: MySQL returns bytes).
func (s *suite) text(t *testing.T, query string, args ...any) string {
	t.Helper()
	var b []byte
	if err := s.DB.QueryRow(s.ctx, s.Dialect.Rebind(query), args...).Scan(&b); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return string(b)
}

func (s *suite) jobs() string { return s.Dialect.Tables().JobsTable() }

// now is the database's clock.
func (s *suite) now(t *testing.T) int64 {
	t.Helper()
	return s.int(t, "SELECT "+s.Dialect.Now())
}

// ids is the ids of rows, sorted.
func ids(rows []dialect.JobRow) []int64 {
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	slices.Sort(out)
	return out
}

func must[T any](t *testing.T, what string) func(v T, err error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return v
	}
}
