package dialect

import (
	"context"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// sqlite claims with one UPDATE … RETURNING (a write transaction holds the
// whole database, so no row locks are needed) and keeps failed_at as text
// whose format depends on the writer.
type sqlite struct {
	*common
	claim string
}

func newSQLite(t Tables) *sqlite {
	epoch := func(col string) string { return "CAST(strftime('%s'," + col + ") AS INTEGER)" }
	timestamp := func(param string) string { return "datetime(" + param + ",'unixepoch')" }
	c := newCommon("sqlite", t, "CAST(strftime('%s','now') AS INTEGER)", epoch, timestamp)
	c.failInsert = "INSERT INTO " + c.failed + " (uuid, connection, queue, payload, exception) VALUES (?, ?, ?, ?, ?)" +
		" ON CONFLICT (uuid) DO UPDATE SET connection = excluded.connection, queue = excluded.queue, payload = excluded.payload, exception = excluded.exception, failed_at = excluded.failed_at"
	expired, ready := c.claimArms()
	s := &sqlite{common: c}
	s.claim = `UPDATE ` + c.jobs + ` SET reserved_at = ` + c.now + `, ` + claimSet + `
WHERE id IN (
  SELECT id FROM (SELECT id FROM ` + c.jobs + ` WHERE ` + expired + `)
  UNION ALL
  SELECT id FROM (SELECT id FROM ` + c.jobs + ` WHERE ` + ready + `)
  LIMIT ?)
RETURNING ` + jobColumns
	return s
}

func (s *sqlite) Claim(ctx context.Context, db sqldb.DB, queue string, retryAfter int64, n int) ([]JobRow, error) {
	return collectJobs(db.Query(ctx, s.claim, queue, retryAfter, n, queue, n, n))
}

func (s *sqlite) DeleteHeld(ctx context.Context, db sqldb.DB, held []Held) (map[Key]bool, error) {
	return s.deleteHeldReturning(ctx, db, held)
}

func (s *sqlite) ReleaseHeld(ctx context.Context, db sqldb.DB, rs []Release) (map[Key]bool, error) {
	set, args := s.releaseSet(rs)
	return collectKeys(db.Query(ctx, "UPDATE "+s.jobs+" SET "+set+heldWhere(helds(rs))+" RETURNING id, reservation_token", args...))
}

func (s *sqlite) Insert(ctx context.Context, ex sqldb.Execer, rows []PushRow, _ bool) ([]int64, error) {
	return s.insertReturning(ctx, ex, rows, nil)
}

// failedBefore converts the column, not the bound: SQLite keeps times as
// text whose format depends on the writer.
func (s *sqlite) failedBefore(expr string) string {
	return s.epoch("failed_at") + " < " + expr
}

func (s *sqlite) ListFailed(ctx context.Context, ex sqldb.Execer, f FailedFilter) ([]FailedRow, error) {
	return s.listFailed(ctx, ex, f, s.failedBefore)
}

func (s *sqlite) DeleteFailed(ctx context.Context, ex sqldb.Execer, f FailedFilter) (int64, error) {
	return s.deleteFailed(ctx, ex, f, s.failedBefore)
}

// LockFailed needs no row locks: SQLite's write transaction (BEGIN
// IMMEDIATE) already holds the whole database.
func (s *sqlite) LockFailed(ctx context.Context, tx sqldb.Tx, f FailedFilter) ([]FailedRow, error) {
	return s.lockFailed(ctx, tx, f, "")
}

func (s *sqlite) CheckServer(ctx context.Context, ex sqldb.Execer) error {
	return checkVersion(ctx, ex, "SELECT sqlite_version()", "sqlite", func(string) bool { return true })
}
