package dialect

import (
	"context"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// ClaimFlow counts in a write transaction, which holds the whole
// database: no other claim counts at the same time, and nothing is
// locked row by row.
func (s *sqlite) ClaimFlow(ctx context.Context, db sqldb.DB, queue string, retryAfter int64, n int) ([]JobRow, error) {
	// In turn with this Queue's other claims and deletes (see writing):
	// meeting them at SQLite's write lock, the limited claim slept in the
	// busy handler and ran at 0.07 of the plain claims' rate.
	s.writing.Lock()
	defer s.writing.Unlock()
	return s.claimFlow(ctx, db, queue, retryAfter, n, flowSpelling{tx: s.lockTx, at: parkedOffset, rowCompare: true})
}

// PlacesFreed does nothing: SQLite has no notifications, and a process
// of its own wakes its workers itself.
func (s *sqlite) PlacesFreed(context.Context, sqldb.Execer, []string) error { return nil }

// InsertFlow reads each id with RETURNING.
func (s *sqlite) InsertFlow(ctx context.Context, ex sqldb.Execer, rows []PushRow) ([]int64, error) {
	return s.insertFlow(ctx, ex, rows, returningID)
}
