package dialect

import (
	"context"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// ClaimFlow locks the limits it counts with FOR UPDATE SKIP LOCKED: a
// limit another process is counting is left to that process.
func (p *postgres) ClaimFlow(ctx context.Context, db sqldb.DB, queue string, retryAfter int64, n int) ([]JobRow, error) {
	return p.claimFlow(ctx, db, queue, retryAfter, n, flowSpelling{skipLocked: " FOR UPDATE SKIP LOCKED", at: "reserved_at",
		planner: PostgresClaimPlanner, query: claimWithIndexes})
}

// InsertFlow reads each id with RETURNING.
func (p *postgres) InsertFlow(ctx context.Context, ex sqldb.Execer, rows []PushRow) ([]int64, error) {
	return p.insertFlow(ctx, ex, rows, returningID)
}

// returningID runs an INSERT with RETURNING id appended.
func returningID(ctx context.Context, ex sqldb.Execer, query string, args ...any) (int64, error) {
	var id int64
	err := ex.QueryRow(ctx, query+" RETURNING id", args...).Scan(&id)
	return id, err
}
