package dialect

import (
	"context"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// ClaimFlow runs under PostgresClaimPlanner, as the plain claim does.
func (p *postgres) ClaimFlow(ctx context.Context, db sqldb.DB, queue string, retryAfter int64, n int) ([]JobRow, error) {
	return p.claimFlow(ctx, db, queue, retryAfter, n, flowSpelling{lock: " FOR UPDATE", at: parkedOffset,
		planner: PostgresClaimPlanner, query: claimWithIndexes, oneStatement: true, rowCompare: true, limitSubquery: true})
}

// InsertFlow reads each id with RETURNING.
func (p *postgres) InsertFlow(ctx context.Context, ex sqldb.Execer, rows []PushRow) ([]int64, error) {
	return p.insertFlow(ctx, ex, rows, returningID)
}

// PlacesFreed notifies the queues' listeners, as a push does: the
// workers of every process try their limited claims again.
func (p *postgres) PlacesFreed(ctx context.Context, ex sqldb.Execer, queues []string) error {
	_, err := ex.Exec(ctx, "SELECT pg_notify($1, q) FROM unnest($2::text[]) AS q", p.channel, queues)
	return err
}

// returningID runs an INSERT with RETURNING id appended.
func returningID(ctx context.Context, ex sqldb.Execer, query string, args ...any) (int64, error) {
	var id int64
	err := ex.QueryRow(ctx, query+" RETURNING id", args...).Scan(&id)
	return id, err
}
