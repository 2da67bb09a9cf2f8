package dialect

import (
	"context"
	"database/sql"
	"errors"
	"strconv"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// TickLocker is the SQL of the periodic scheduler's locks, kept in the
// unique-lock table. Every dialect implements it (through common).
type TickLocker interface {
	// AcquireTickLock takes l inside ex, the transaction that inserts the
	// tick's job: it inserts the lock row, or takes over one whose
	// expires_at is at or before *l.StaleAt (l.ExpiresAt and l.StaleAt
	// must be set). When the row holds a later tick, ok is false and
	// holder is its job.
	AcquireTickLock(ctx context.Context, ex sqldb.Execer, l UniqueLock) (holder int64, ok bool, err error)
	// PruneTickLocks deletes up to limit locks of periodic schedules that
	// can no longer matter, and returns how many it deleted: UntilTick
	// locks whose expires_at is more than grace seconds behind the
	// database's clock (no scheduler pushes a tick that old, so none can
	// need them), and UntilExpired locks (a tick's job lock among them)
	// that have expired, which hold nothing.
	PruneTickLocks(ctx context.Context, db sqldb.DB, grace int64, limit int) (int64, error)
}

// AcquireTickLock is AcquireUnique for a tick, judged by StaleAt alone.
// It tells an insert from a conflict without trusting an affected-rows
// count that MySQL's clientFoundRows changes: MySQL's INSERT IGNORE counts
// 1 for a row inserted and 0 for one ignored, with or without the flag.
func (c *common) AcquireTickLock(ctx context.Context, ex sqldb.Execer, l UniqueLock) (int64, bool, error) {
	if l.ExpiresAt == nil || l.StaleAt == nil {
		return 0, false, errors.New("tick lock " + l.Key + " needs ExpiresAt and StaleAt")
	}
	t := c.tables.UniqueTable()
	insert := c.skipTaken(t, "lock_key, job_id, until_mode, expires_at", "(?, 0, ?, ?)", "lock_key")
	for range uniqueRounds {
		res, err := ex.Exec(ctx, c.rebind(insert), l.Key, l.Mode, *l.ExpiresAt)
		if err != nil {
			return 0, false, err
		}
		if res.RowsAffected == 1 {
			return 0, true, nil
		}
		var (
			holder  int64
			expires sql.NullInt64
		)
		err = ex.QueryRow(ctx, c.rebind("SELECT job_id, expires_at FROM "+t+" WHERE lock_key = ?"+c.lockRead), l.Key).Scan(&holder, &expires)
		if errors.Is(err, sql.ErrNoRows) {
			continue // pruned since the insert saw it: insert again
		}
		if err != nil {
			return 0, false, err
		}
		if !expires.Valid || expires.Int64 > *l.StaleAt {
			return holder, false, nil
		}
		_, err = ex.Exec(ctx, c.rebind("UPDATE "+t+" SET job_id = 0, until_mode = ?, expires_at = ? WHERE lock_key = ?"), l.Mode, *l.ExpiresAt, l.Key)
		return 0, err == nil, err
	}
	return 0, false, errors.New("tick lock " + l.Key + " kept vanishing: is something pruning it in a loop?")
}

// PruneTickLocks deletes in one statement: a lock taken over meanwhile has
// a later expires_at, and the DELETE judges the row it waited for again
// (PostgreSQL's recheck, InnoDB's locking read, SQLite's single writer), so
// a lock in use is never deleted.
func (c *common) PruneTickLocks(ctx context.Context, db sqldb.DB, grace int64, limit int) (int64, error) {
	t := c.tables.UniqueTable()
	where := "(until_mode = " + strconv.Itoa(UntilTick) + " AND expires_at <= " + c.now + " - ?)" +
		" OR (until_mode = " + strconv.Itoa(UntilExpired) + " AND expires_at <= " + c.now + ")"
	q := c.deleteFirst(t, "lock_key", where, " LIMIT "+strconv.Itoa(limit))
	res, err := db.Exec(ctx, c.rebind(q), grace)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected, nil
}
