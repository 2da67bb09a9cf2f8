package dialect

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// Bounded reads counts and queue names with a bound on the index entries
// each statement reads, whatever the size of the tables: what a dashboard
// can afford on every refresh.
type Bounded interface {
	// QueuesAfter lists up to limit names of queues that have rows and
	// sort after after, in the database's order of the queue column: a
	// skip scan that reads one index entry per name.
	QueuesAfter(ctx context.Context, ex sqldb.Execer, after string, limit int) ([]string, error)
	// CappedSizes counts each state of each named queue up to limit
	// entries, in the order of queues.
	CappedSizes(ctx context.Context, ex sqldb.Execer, queues []string, limit int64) ([]CappedSizes, error)
	// CappedTotals counts the states over every queue, reading at most
	// limit entries of each index it reads.
	CappedTotals(ctx context.Context, ex sqldb.Execer, limit int64) (CappedSizes, error)
	// NewestFailed counts the newest window rows of failed_jobs by
	// queue, and returns how many rows it read (window means there may
	// be more).
	NewestFailed(ctx context.Context, ex sqldb.Execer, window int) (map[string]int64, int, error)
}

// CappedSizes is Sizes whose counts stop at a limit: a count flagged
// capped reached it, and the queue holds at least that many.
type CappedSizes struct {
	QueueSizes
	PendingCapped, DelayedCapped, ReservedCapped bool
}

// QueuesAfter walks the queue index from name to name: each step is one
// MIN(queue) > previous, a probe of the index (a loose index scan written
// as a recursive CTE). PostgreSQL and SQLite keep waiting and reserved
// rows in two partial indexes, so the walk runs over each and the names
// merge. (MySQL's own is in mysql_bounded.go.)
func (c *common) QueuesAfter(ctx context.Context, ex sqldb.Execer, after string, limit int) ([]string, error) {
	if limit <= 0 {
		return nil, nil
	}
	var out []string
	conds := []string{"reserved_at IS NULL", "reserved_at IS NOT NULL"}
	for _, cond := range conds {
		q := `WITH RECURSIVE names (queue, n) AS (
  SELECT (SELECT MIN(queue) FROM ` + c.jobs + ` WHERE ` + cond + ` AND queue > ?), 1
  UNION ALL
  SELECT (SELECT MIN(queue) FROM ` + c.jobs + ` WHERE ` + cond + ` AND queue > names.queue), names.n + 1
  FROM names WHERE names.queue IS NOT NULL AND names.n < ` + strconv.Itoa(limit) + `
) SELECT queue FROM names WHERE queue IS NOT NULL`
		err := c.eachRow(ctx, ex, c.rebind(q), []any{after}, func(scan func(...any) error) error {
			var name string
			if err := scan(&name); err != nil {
				return err
			}
			out = append(out, name)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if len(conds) > 1 {
		slices.Sort(out)
		out = slices.Compact(out)
	}
	return out[:min(len(out), limit)], nil
}

// cappedChunk bounds the queues of one CappedSizes statement.
const cappedChunk = 50

// CappedSizes is one statement per 50 queues: a row per queue of scalar
// subqueries, each a COUNT over a derived table with LIMIT, so each
// reads at most limit index entries. PostgreSQL and SQLite count the
// due and future ranges of the waiting rows' index and the reserved
// rows' index, entries only. (MySQL's own is in mysql_bounded.go.)
func (c *common) CappedSizes(ctx context.Context, ex sqldb.Execer, queues []string, limit int64) ([]CappedSizes, error) {
	lim := strconv.FormatInt(limit, 10)
	count := func(where string) string {
		return `(SELECT COUNT(*) FROM (SELECT 1 AS one FROM ` + c.jobs + ` WHERE queue = ? AND ` + where + ` LIMIT ` + lim + `) x)`
	}
	row := `SELECT %d,
  ` + count("reserved_at IS NULL AND available_at <= "+c.now) + `, 0,
  (SELECT MIN(available_at) FROM ` + c.jobs + ` WHERE queue = ? AND reserved_at IS NULL AND available_at <= ` + c.now + `),
  ` + count("reserved_at IS NULL AND available_at > "+c.now) + `, 0,
  ` + count("reserved_at IS NOT NULL") + `, ` + c.now
	return c.cappedSizes(ctx, ex, queues, limit, row, false)
}

// cappedSizes runs CappedSizes' statement, a UNION ALL of row (whose %d
// is the queue's index and whose every parameter its name) per queue.
// row reads the queue's index, due count, reserved rows among the due,
// oldest pending available_at, future count, reserved among the future,
// reserved count, and now. dueHoldsReserved says the due count reaches
// reserved rows, so a capped due range leaves the reserved count a lower
// bound too.
func (c *common) cappedSizes(ctx context.Context, ex sqldb.Execer, queues []string, limit int64, row string, dueHoldsReserved bool) ([]CappedSizes, error) {
	params := strings.Count(row, "?")
	out := make([]CappedSizes, len(queues))
	for start := 0; start < len(queues); start += cappedChunk {
		chunk := queues[start:min(start+cappedChunk, len(queues))]
		parts := make([]string, len(chunk))
		args := make([]any, 0, params*len(chunk))
		for i, name := range chunk {
			parts[i] = strings.Replace(row, "%d", strconv.Itoa(start+i), 1)
			for range params {
				args = append(args, name)
			}
		}
		err := c.eachRow(ctx, ex, c.rebind(strings.Join(parts, "\nUNION ALL\n")), args, func(scan func(...any) error) error {
			var (
				i                                             int
				due, dueRes, future, futureRes, reserved, now int64
				oldest                                        sql.NullInt64
			)
			if err := scan(&i, &due, &dueRes, &oldest, &future, &futureRes, &reserved, &now); err != nil {
				return err
			}
			if i < 0 || i >= len(queues) {
				return errors.New("dbqueue: capped sizes: row for no queue asked")
			}
			s := CappedSizes{QueueSizes: QueueSizes{Queue: queues[i], Sizes: Sizes{
				Pending: due - dueRes, Delayed: future - futureRes, Reserved: reserved + dueRes + futureRes, Now: now}}}
			s.PendingCapped = due >= limit
			s.DelayedCapped = future >= limit
			s.ReservedCapped = reserved >= limit || (dueHoldsReserved && s.PendingCapped)
			if oldest.Valid {
				v := oldest.Int64
				s.OldestPending = &v
			}
			out[i] = s
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// CappedTotals reads the first limit entries of the waiting rows' index
// and of the reserved rows' index (PostgreSQL, SQLite; MySQL's own is in
// mysql_bounded.go). When a read is cut, every count it fed is a lower
// bound.
func (c *common) CappedTotals(ctx context.Context, ex sqldb.Execer, limit int64) (CappedSizes, error) {
	lim := strconv.FormatInt(limit, 10)
	var (
		s                   CappedSizes
		read, due, reserved int64
	)
	err := ex.QueryRow(ctx, `SELECT
  (SELECT COUNT(*) FROM (SELECT 1 AS one FROM `+c.jobs+` WHERE reserved_at IS NULL LIMIT `+lim+`) x),
  (SELECT COALESCE(SUM(CASE WHEN available_at <= `+c.now+` THEN 1 ELSE 0 END), 0)
     FROM (SELECT available_at FROM `+c.jobs+` WHERE reserved_at IS NULL LIMIT `+lim+`) x),
  (SELECT COUNT(*) FROM (SELECT 1 AS one FROM `+c.jobs+` WHERE reserved_at IS NOT NULL LIMIT `+lim+`) x)`).Scan(&read, &due, &reserved)
	if err != nil {
		return s, err
	}
	s.Pending, s.Delayed, s.Reserved = due, read-due, reserved
	s.PendingCapped, s.DelayedCapped = read >= limit, read >= limit
	s.ReservedCapped = reserved >= limit
	return s, nil
}

// NewestFailed reads the queue of the newest window rows by the primary
// key, newest first, and groups them.
func (c *common) NewestFailed(ctx context.Context, ex sqldb.Execer, window int) (map[string]int64, int, error) {
	out := map[string]int64{}
	read := 0
	err := c.eachRow(ctx, ex, `SELECT queue, COUNT(*) FROM (SELECT queue FROM `+c.failed+` ORDER BY id DESC LIMIT `+
		strconv.Itoa(window)+`) x GROUP BY queue`, nil, func(scan func(...any) error) error {
		var (
			name string
			n    int64
		)
		if err := scan(&name, &n); err != nil {
			return err
		}
		out[name] += n
		read += int(n)
		return nil
	})
	return out, read, err
}
