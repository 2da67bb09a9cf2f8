// Package dialecttest is the conformance suite of internal/dialect: the
// contract of every method of every interface a database's dialect
// implements (the list in interfaces.go), asserted against a real database,
// and run for each database and each DSN variant that changes what a
// driver reports (see ../conformance_test.go). A new database is done
// when its dialect file and migrations pass Run.
//
// Each method has at least one subtest, named "Interface.Method", in the
// file of its interface (dialect.go, batches.go, bounded.go, ...);
// TestEveryMethodHasATest fails when one has none. The subtests run in
// parallel on one database: each keeps to queue names, keys and uuids of
// its own, and those whose method reads or prunes a whole table (the
// Prune methods, MaxFailedID, CappedTotals, the searches) get a table set
// of their own (Harness.Own).
//
// Every subtest asserts something a wrong dialect gets wrong: a claim that
// takes a locked or someone else's row, a finish that acts on a
// reservation taken over, ids counted with the wrong step, a time read
// from the wrong clock or zone.
package dialecttest

import (
	"context"
	"fmt"
	"reflect"
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
	// (SQLite): the subtests of row locks run only with row locks.
	RowLocks bool
	// Own migrates a table set named tables in DB's database and returns
	// the dialect over it, opened as Dialect was. The subtests of methods
	// that read or prune a whole table use one each, so that their exact
	// answers do not depend on the subtests running beside them.
	Own func(t *testing.T, tables dialect.Tables) dialect.Dialect
}

// Run runs the suite as subtests of t on one database that newDB makes:
// one subtest per method of each interface (see interfaces), all in
// parallel. It fails when the dialect does not implement one of them.
func Run(t *testing.T, newDB func(t *testing.T) Harness) {
	h := newDB(t)
	sh := &shared{}
	for _, in := range interfaces {
		if !reflect.TypeOf(h.Dialect).Implements(in.typ) {
			t.Errorf("the %s dialect does not implement dialect.%s", h.Dialect.Name(), in.typ.Name())
			continue
		}
		for _, m := range in.methods() {
			t.Run(m.name, func(t *testing.T) {
				t.Parallel()
				for _, c := range m.tests {
					if c.name == "" {
						sh.run(t, h, c.fn)
						continue
					}
					t.Run(c.name, func(t *testing.T) {
						t.Parallel()
						sh.run(t, h, c.fn)
					})
				}
			})
		}
	}
}

// test is one subtest: the contract of method (its doc comment's), or,
// with a name, one behaviour of it under its own subtest.
type test struct {
	method string
	name   string
	fn     func(t *testing.T, s *suite)
}

// shared is what the subtests of one database share.
type shared struct {
	seq atomic.Int64
}

// run runs fn with a suite of its own, whose context ends a minute after
// the start: a dialect that blocks where it should skip fails the subtest
// rather than hanging the suite.
func (sh *shared) run(t *testing.T, h Harness, fn func(t *testing.T, s *suite)) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fn(t, &suite{Harness: h, shared: sh, ctx: ctx})
}

// suite is the shared database and the helpers the subtests use.
type suite struct {
	Harness
	*shared
	// ctx is the running subtest's: it ends a minute after the start.
	ctx context.Context
}

// own returns s over a table set of its own, migrated, empty.
func (s *suite) own(t *testing.T) *suite {
	t.Helper()
	if s.Own == nil {
		t.Fatal("the harness has no Own: this subtest needs tables of its own")
	}
	n := s.seq.Add(1)
	tables := dialect.Tables{Jobs: fmt.Sprintf("own%d_jobs", n), Failed: fmt.Sprintf("own%d_failed", n), Schema: s.Dialect.Tables().Schema}
	o := *s
	o.Dialect = s.Own(t, tables)
	if got := o.Dialect.Tables(); got != tables {
		t.Fatalf("Own opened tables %+v, want %+v", got, tables)
	}
	return &o
}

// queue is a queue name no other subtest uses.
func (s *suite) queue(t *testing.T) string {
	return fmt.Sprintf("%s-%d", t.Name(), s.seq.Add(1))
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

func must2(t *testing.T, what string) func(a, b int64, err error) (int64, int64) {
	return func(a, b int64, err error) (int64, int64) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return a, b
	}
}

// inTx runs fn in a transaction of opts, retried as a worker retries it.
func (s *suite) inTx(t *testing.T, opts sqldb.TxOptions, fn func(tx sqldb.Tx) error) {
	t.Helper()
	if err := sqldb.InTx(s.ctx, s.DB, opts, fn); err != nil {
		t.Fatal(err)
	}
}

// failed pushes one row on queue, claims it and moves it to failed_jobs
// under uuid, and returns its failed row.
func (s *suite) failed(t *testing.T, queue, uuid string) dialect.FailedRow {
	t.Helper()
	s.push(t, queue, 1)
	c := s.claimOne(t, queue)
	f := dialect.Failure{UUID: uuid, Connection: "database", Queue: queue, Payload: c.Payload, Exception: "boom " + uuid}
	if ok := must[bool](t, "fail "+uuid)(s.Dialect.FailMove(s.ctx, s.DB, held(c), f)); !ok {
		t.Fatalf("fail of held row %d reported it not held", c.ID)
	}
	rows := must[[]dialect.FailedRow](t, "list "+uuid)(s.Dialect.ListFailed(s.ctx, s.DB, dialect.FailedFilter{UUIDs: []string{uuid}}))
	if len(rows) != 1 {
		t.Fatalf("failed rows of %s: %+v, want 1", uuid, rows)
	}
	return rows[0]
}

// history is d's ErrorHistory.
func (s *suite) history(t *testing.T) dialect.ErrorHistory {
	t.Helper()
	return s.Dialect
}

// releaseWithError releases the held row r, due at once, with an error
// for its history, and returns its next claim.
func (s *suite) releaseWithError(t *testing.T, r dialect.JobRow, text string) dialect.JobRow {
	t.Helper()
	got := must[map[dialect.Key]bool](t, "release with error")(s.Dialect.ReleaseHeld(s.ctx, s.DB,
		[]dialect.Release{{Held: held(r), Error: &dialect.ReleaseError{Error: text, Worker: "host:1"}}}))
	if !got[held(r).Key()] {
		t.Fatalf("release of held row %d: %v", r.ID, got)
	}
	next := s.claimOne(t, r.Queue)
	if next.ID != r.ID {
		t.Fatalf("after the release the claim took %d, want %d", next.ID, r.ID)
	}
	return next
}

// failedIDs is the ids of rows, in their order.
func failedIDs(rows []dialect.FailedRow) []int64 {
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}
