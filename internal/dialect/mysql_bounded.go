package dialect

import (
	"context"
	"strconv"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// MySQL's bounded reads (see Bounded): its (queue, available_at) index
// holds every row, waiting and reserved, and has no reserved_at.

// QueuesAfter: MariaDB reads a correlated MIN by scanning the index, but
// runs GROUP BY on the index's first column as a loose index scan ("Using
// index for group-by"): one entry per name.
func (m *mysql) QueuesAfter(ctx context.Context, ex sqldb.Execer, after string, limit int) ([]string, error) {
	if limit <= 0 {
		return nil, nil
	}
	var out []string
	err := m.eachRow(ctx, ex, "SELECT queue FROM "+m.jobs+" WHERE queue > ? GROUP BY queue ORDER BY queue LIMIT "+strconv.Itoa(limit),
		[]any{after}, func(scan func(...any) error) error {
			var name string
			if err := scan(&name); err != nil {
				return err
			}
			out = append(out, name)
			return nil
		})
	return out, err
}

// CappedSizes reads the due range of (queue, available_at) and looks each
// row up for reserved_at, so a capped due range leaves both the pending
// and the reserved count lower bounds. The future range is counted from
// the index alone: a reserved row is never in it, because a claim takes
// only due rows and leaves available_at as it was, and a release that
// delays a job clears reserved_at in the same statement (dbqueue's and
// Laravel's alike). That halves the row lookups of a page of deep queues.
func (m *mysql) CappedSizes(ctx context.Context, ex sqldb.Execer, queues []string, limit int64) ([]CappedSizes, error) {
	lim := strconv.FormatInt(limit, 10)
	rng := func(op string) string {
		return `FROM (SELECT reserved_at, available_at FROM ` + m.jobs + ` WHERE queue = ? AND available_at ` + op + ` ` + m.now +
			` ORDER BY available_at LIMIT ` + lim + `) x`
	}
	row := `SELECT %d, due.n, due.r, due.m, future.n, future.r, 0, ` + m.now + `
FROM (SELECT COUNT(*) AS n, COALESCE(SUM(CASE WHEN reserved_at IS NOT NULL THEN 1 ELSE 0 END), 0) AS r,
  MIN(CASE WHEN reserved_at IS NULL THEN available_at END) AS m ` + rng("<=") + `) due
CROSS JOIN (SELECT COUNT(*) AS n, 0 AS r FROM (SELECT available_at FROM ` + m.jobs + ` WHERE queue = ? AND available_at > ` + m.now +
		` ORDER BY available_at LIMIT ` + lim + `) x) future`
	return m.cappedSizes(ctx, ex, queues, limit, row, true)
}

// CappedTotals reads the first limit rows of the table: MySQL's only
// index over every row lacks reserved_at. When the read is cut, every
// count is a lower bound.
func (m *mysql) CappedTotals(ctx context.Context, ex sqldb.Execer, limit int64) (CappedSizes, error) {
	lim := strconv.FormatInt(limit, 10)
	var (
		s                            CappedSizes
		read, due, dueRes, futureRes int64
	)
	err := ex.QueryRow(ctx, `SELECT COUNT(*),
  COALESCE(SUM(CASE WHEN available_at <= `+m.now+` THEN 1 ELSE 0 END), 0),
  COALESCE(SUM(CASE WHEN available_at <= `+m.now+` AND reserved_at IS NOT NULL THEN 1 ELSE 0 END), 0),
  COALESCE(SUM(CASE WHEN available_at > `+m.now+` AND reserved_at IS NOT NULL THEN 1 ELSE 0 END), 0)
FROM (SELECT reserved_at, available_at FROM `+m.jobs+` LIMIT `+lim+`) x`).Scan(&read, &due, &dueRes, &futureRes)
	if err != nil {
		return s, err
	}
	s.Pending, s.Delayed, s.Reserved = due-dueRes, read-due-futureRes, dueRes+futureRes
	capped := read >= limit
	s.PendingCapped, s.DelayedCapped, s.ReservedCapped = capped, capped, capped
	return s, nil
}
