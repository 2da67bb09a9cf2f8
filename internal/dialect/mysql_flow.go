package dialect

import (
	"context"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// ClaimFlow counts in a READ COMMITTED transaction (each read sees what
// the claims that held the limit before committed, and takes no gap
// locks) and locks the limits with FOR UPDATE.
func (m *mysql) ClaimFlow(ctx context.Context, db sqldb.DB, queue string, retryAfter int64, n int) ([]JobRow, error) {
	return m.claimFlow(ctx, db, queue, retryAfter, n, flowSpelling{lock: " FOR UPDATE", tx: sqldb.TxOptions{ReadCommitted: true}, at: "flow_at"})
}

// PlacesFreed does nothing: MySQL has no notifications; workers of other
// processes find the free places at their next poll.
func (m *mysql) PlacesFreed(context.Context, sqldb.Execer, []string) error { return nil }

// InsertFlow reads each id from the driver: MySQL 8 has no INSERT …
// RETURNING.
func (m *mysql) InsertFlow(ctx context.Context, ex sqldb.Execer, rows []PushRow) ([]int64, error) {
	return m.insertFlow(ctx, ex, rows, func(ctx context.Context, ex sqldb.Execer, query string, args ...any) (int64, error) {
		res, err := ex.Exec(ctx, query, args...)
		return res.LastInsertID, err
	})
}
