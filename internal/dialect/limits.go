package dialect

import (
	"context"
	"strconv"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// Limits is the SQL of the worker middleware's two tables (migration
// 00005): <jobs>_limits, hit counters in windows of a given length, and
// <jobs>_locks, named locks that expire. Package middleware uses it.
//
// Every time is the database's clock, in Unix seconds. A window opened at
// window_start with length per is current while now < window_start + per;
// a lock expiring at expires_at is held while now <= expires_at, so a lock
// lasts at least its length even when it was taken late in a second.
type Limits interface {
	// Hit counts one hit on name in its current window of per seconds,
	// opening a new window (at now, with this hit as its first) when there
	// is none or the last one has passed, in one atomic step. It returns
	// the window's hits, this one included, and the seconds left in it.
	Hit(ctx context.Context, db sqldb.DB, name string, per int64) (hits, left int64, err error)
	// HitBy is Hit counting n hits at once.
	HitBy(ctx context.Context, db sqldb.DB, name string, per, n int64) (hits, left int64, err error)
	// Hits reads name's hits in its current window of per seconds and the
	// seconds left in it, without counting: 0, 0 when there is no current
	// window.
	Hits(ctx context.Context, ex sqldb.Execer, name string, per int64) (hits, left int64, err error)
	// ClearHits forgets name's window.
	ClearHits(ctx context.Context, ex sqldb.Execer, name string) error
	// EndRun ends one run counted on a throttle row (see ThrottleUnit) in
	// one atomic step: place takes the run's place back (the runs under way
	// less one, never below 0); exception counts an exception; clear
	// forgets the exceptions (a success). The row goes when it holds
	// nothing. It changes no window: a run whose window passed has no place
	// left in it, and its exception is counted with HitBy(ThrottleUnit).
	EndRun(ctx context.Context, ex sqldb.Execer, name string, place, exception, clear bool) error
	// TakeLock takes the lock name for owner until now + expire seconds,
	// atomically: when nobody holds it, or its holder's lock has expired
	// (taken over). It reports whether owner now holds it.
	TakeLock(ctx context.Context, db sqldb.DB, name, owner string, expire int64) (bool, error)
	// ExtendLock moves owner's lock on name to expire at now + expire
	// seconds; it does nothing when owner no longer holds it.
	ExtendLock(ctx context.Context, ex sqldb.Execer, name, owner string, expire int64) error
	// ReleaseLock lets go of name if owner still holds it, and reports
	// whether it did.
	ReleaseLock(ctx context.Context, ex sqldb.Execer, name, owner string) (bool, error)
	// PruneLimits deletes windows opened more than age seconds ago and
	// locks that have expired, and returns how many rows it deleted.
	PruneLimits(ctx context.Context, ex sqldb.Execer, age int64) (int64, error)
}

func (c *common) limitsTable() string { return c.tables.JobsTable() + "_limits" }
func (c *common) locksTable() string  { return c.tables.JobsTable() + "_locks" }

// ThrottleUnit is what an exception adds to a throttle row's hits. A
// throttle row (ThrottlesExceptions) counts two things in its window: the
// runs of its key under way, hits % ThrottleUnit, each counted by Hit
// before it starts, and the exceptions, hits / ThrottleUnit, each moved
// there from the runs by EndRun. Both in one row, so that a run is let
// through on one atomic count of both, and a success forgets the
// exceptions without forgetting the runs still under way.
const ThrottleUnit int64 = 1 << 32

var throttleUnit = strconv.FormatInt(ThrottleUnit, 10)

func (c *common) Hit(ctx context.Context, db sqldb.DB, name string, per int64) (hits, left int64, err error) {
	return c.HitBy(ctx, db, name, per, 1)
}

// HitBy is one INSERT … ON CONFLICT DO UPDATE … RETURNING on PostgreSQL
// and SQLite. Every expression of the SET list reads the row as it was,
// so both CASEs decide on the old window.
func (c *common) HitBy(ctx context.Context, db sqldb.DB, name string, per, n int64) (hits, left int64, err error) {
	q := "INSERT INTO " + c.limitsTable() + " AS l (name, window_start, hits) VALUES (?, " + c.now + ", ?)" +
		" ON CONFLICT (name) DO UPDATE SET" +
		" hits = CASE WHEN l.window_start > excluded.window_start - ? THEN l.hits + excluded.hits ELSE excluded.hits END," +
		" window_start = CASE WHEN l.window_start > excluded.window_start - ? THEN l.window_start ELSE excluded.window_start END" +
		" RETURNING hits, window_start + ? - " + c.now
	err = db.QueryRow(ctx, c.rebind(q), name, n, per, per, per).Scan(&hits, &left)
	return hits, left, err
}

func (c *common) Hits(ctx context.Context, ex sqldb.Execer, name string, per int64) (hits, left int64, err error) {
	q := "SELECT hits, window_start + ? - " + c.now + " FROM " + c.limitsTable() +
		" WHERE name = ? AND window_start > " + c.now + " - ?"
	// Query rather than QueryRow: "no row" is an answer here, and each
	// driver spells its no-rows error differently.
	rows, err := ex.Query(ctx, c.rebind(q), per, name, per)
	if err != nil {
		return 0, 0, err
	}
	defer rows.Close()
	if rows.Next() {
		err = rows.Scan(&hits, &left)
	}
	if err == nil {
		err = rows.Err()
	}
	return hits, left, err
}

func (c *common) ClearHits(ctx context.Context, ex sqldb.Execer, name string) error {
	_, err := ex.Exec(ctx, c.rebind("DELETE FROM "+c.limitsTable()+" WHERE name = ?"), name)
	return err
}

// EndRun's statements need no RowsAffected: the UPDATE may change
// nothing (MySQL's count then depends on clientFoundRows), and the DELETE
// only removes a row that holds nothing. The UPDATE reads the row as it
// was in each expression (its one assignment, on MySQL too).
func (c *common) EndRun(ctx context.Context, ex sqldb.Execer, name string, place, exception, clear bool) error {
	hits := "hits"
	if clear {
		hits = "hits % " + throttleUnit
	}
	if place {
		hits = "(" + hits + ") - CASE WHEN hits % " + throttleUnit + " > 0 THEN 1 ELSE 0 END"
	}
	if exception {
		hits += " + " + throttleUnit
	}
	if _, err := ex.Exec(ctx, c.rebind("UPDATE "+c.limitsTable()+" SET hits = "+hits+" WHERE name = ?"), name); err != nil {
		return err
	}
	_, err := ex.Exec(ctx, c.rebind("DELETE FROM "+c.limitsTable()+" WHERE name = ? AND hits <= 0"), name)
	return err
}

func (c *common) ExtendLock(ctx context.Context, ex sqldb.Execer, name, owner string, expire int64) error {
	_, err := ex.Exec(ctx, c.rebind("UPDATE "+c.locksTable()+" SET expires_at = "+c.now+" + ? WHERE name = ? AND owner = ?"), expire, name, owner)
	return err
}

// TakeLock is one INSERT … ON CONFLICT DO UPDATE … WHERE on PostgreSQL and
// SQLite: the row changes (one row affected) only when it is new or its
// lock has expired.
func (c *common) TakeLock(ctx context.Context, db sqldb.DB, name, owner string, expire int64) (bool, error) {
	q := "INSERT INTO " + c.locksTable() + " AS k (name, owner, expires_at) VALUES (?, ?, " + c.now + " + ?)" +
		" ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at" +
		" WHERE k.expires_at < " + c.now
	res, err := db.Exec(ctx, c.rebind(q), name, owner, expire)
	if err != nil {
		return false, err
	}
	return res.RowsAffected == 1, nil
}

func (c *common) ReleaseLock(ctx context.Context, ex sqldb.Execer, name, owner string) (bool, error) {
	res, err := ex.Exec(ctx, c.rebind("DELETE FROM "+c.locksTable()+" WHERE name = ? AND owner = ?"), name, owner)
	if err != nil {
		return false, err
	}
	return res.RowsAffected == 1, nil
}

func (c *common) PruneLimits(ctx context.Context, ex sqldb.Execer, age int64) (int64, error) {
	a, err := ex.Exec(ctx, c.rebind("DELETE FROM "+c.limitsTable()+" WHERE window_start < "+c.now+" - ?"), age)
	if err != nil {
		return 0, err
	}
	b, err := ex.Exec(ctx, "DELETE FROM "+c.locksTable()+" WHERE expires_at < "+c.now)
	if err != nil {
		return a.RowsAffected, err
	}
	return a.RowsAffected + b.RowsAffected, nil
}
