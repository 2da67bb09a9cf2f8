package dialect

import (
	"context"
	"strconv"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// TickPruner is the SQL that clears the periodic scheduler's locks. Every
// dialect implements it (through common).
type TickPruner interface {
	// PruneTickLocks deletes up to limit locks of periodic schedules that
	// can no longer matter, and returns how many it deleted: UntilTick
	// locks whose expires_at is more than grace seconds behind the
	// database's clock (no scheduler pushes a tick that old, so none can
	// need them), and UntilExpired locks (a tick's job lock among them)
	// that have expired, which hold nothing.
	PruneTickLocks(ctx context.Context, db sqldb.DB, grace int64, limit int) (int64, error)
}

// PruneTickLocks deletes in one statement: a lock taken over meanwhile has
// a later expires_at, and the DELETE judges the row it waited for again
// (PostgreSQL's recheck, InnoDB's locking read, SQLite's single writer), so
// a lock in use is never deleted.
func (c *common) PruneTickLocks(ctx context.Context, db sqldb.DB, grace int64, limit int) (int64, error) {
	t := c.tables.UniqueTable()
	where := "(until_mode = " + strconv.Itoa(UntilTick) + " AND expires_at <= " + c.now + " - ?)" +
		" OR (until_mode = " + strconv.Itoa(UntilExpired) + " AND expires_at <= " + c.now + ")"
	var q string
	if c.name == "mysql" {
		q = "DELETE FROM " + t + " WHERE " + where + " LIMIT " + strconv.Itoa(limit)
	} else {
		q = "DELETE FROM " + t + " WHERE lock_key IN (SELECT lock_key FROM " + t + " WHERE " + where + " LIMIT " + strconv.Itoa(limit) + ")"
	}
	res, err := db.Exec(ctx, c.rebind(q), grace)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected, nil
}
