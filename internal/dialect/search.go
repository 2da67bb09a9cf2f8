package dialect

import (
	"context"
	"database/sql"
	"strconv"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// Searcher finds rows of jobs and failed_jobs for an operator, reading at
// most a window of the newest rows by primary key, so no search reads a
// whole table however it is asked. Dialect embeds it.
type Searcher interface {
	// SearchJobs reads the rows of jobs that match f inside its window,
	// newest first, handing each to keep until keep has taken f.Limit.
	// The Window it returns is what was read: when keep took f.Limit, it
	// ends at the last row taken (Oldest is its id), so a search from
	// BeforeID = Oldest goes on right after it.
	SearchJobs(ctx context.Context, ex sqldb.Execer, f SearchFilter, keep func(StatedRow) bool) (Window, error)
	// SearchFailed is SearchJobs on failed_jobs (Contains also matches
	// the exception).
	SearchFailed(ctx context.Context, ex sqldb.Execer, f SearchFilter, keep func(FailedRow) bool) (Window, error)
}

// SearchFilter selects rows for a search. Zero fields select all.
type SearchFilter struct {
	// ID names one row: no window is read.
	ID int64
	// UUID names one failed job (failed_jobs.uuid): no window is read.
	UUID string
	// Queue keeps the rows of one queue.
	Queue string
	// Contains keeps rows whose payload (or, in failed_jobs, exception)
	// holds every one of these texts, byte for byte.
	Contains []string
	// Scan is the window: the newest Scan rows with ids below BeforeID
	// (all ids when 0).
	Scan     int
	BeforeID int64
	// Limit stops the search when keep has taken this many.
	Limit int
}

// Window is what a search read: Rows rows, the oldest with id Oldest;
// More says older rows are left. Newest is the window's newest id: the
// search reads no row pushed after the window was measured.
type Window struct {
	Rows   int
	Oldest int64
	More   bool
	Newest int64
}

// window reads the size and oldest id of a search's window of table.
func (c *common) window(ctx context.Context, ex sqldb.Execer, table string, f SearchFilter) (Window, error) {
	inner := "SELECT id FROM " + table
	var args []any
	if f.BeforeID > 0 {
		inner += " WHERE id < ?"
		args = append(args, f.BeforeID)
	}
	inner += " ORDER BY id DESC LIMIT " + strconv.Itoa(f.Scan)
	var (
		w              Window
		n              int64
		oldest, newest sql.NullInt64
	)
	if err := ex.QueryRow(ctx, c.rebind("SELECT COUNT(*), MIN(id), MAX(id) FROM ("+inner+") w"), args...).Scan(c.ints(&n), &oldest, &newest); err != nil {
		return w, err
	}
	w.Rows, w.Oldest, w.Newest = int(n), oldest.Int64, newest.Int64
	if w.Rows < f.Scan {
		return w, nil
	}
	var older int64
	err := ex.QueryRow(ctx, c.rebind("SELECT COUNT(*) FROM (SELECT id FROM "+table+" WHERE id < ? ORDER BY id DESC LIMIT 1) o"), w.Oldest).Scan(c.ints(&older))
	w.More = older > 0
	return w, err
}

// inWindow narrows where to a window's ids: a primary-key range of at
// most Scan rows.
func inWindow(where string, args []any, w Window) (string, []any) {
	return where + " AND id >= ? AND id <= ?", append(args, w.Oldest, w.Newest)
}

// readTo is the part of window w a search read when it stopped at the
// row with id last (a match it returned, the Limit-th): the rows from
// last up, so the next search, from BeforeID = last, starts right below
// it and skips no match. Only the whole window read leaves More false.
func (c *common) readTo(ctx context.Context, ex sqldb.Execer, table string, w Window, last int64) (Window, error) {
	if last <= w.Oldest {
		return w, nil
	}
	var n int64
	if err := ex.QueryRow(ctx, c.rebind("SELECT COUNT(*) FROM "+table+" WHERE id >= ? AND id <= ?"), last, w.Newest).Scan(c.ints(&n)); err != nil {
		return w, err
	}
	w.Rows, w.Oldest, w.More = min(int(n), w.Rows), last, true
	return w, nil
}

// readMatches runs a search's query over window w (zero for a search of
// one id or uuid) and hands keep the rows scan reads until keep has taken
// f.Limit; it returns the part of w read.
func readMatches[T any](ctx context.Context, c *common, ex sqldb.Execer, table string, w Window, f SearchFilter,
	query string, args []any, scan func(sqldb.Rows) (T, error), keep func(T) bool, id func(T) int64) (Window, error) {
	rows, err := ex.Query(ctx, c.rebind(query), args...)
	if err != nil {
		return w, err
	}
	defer rows.Close()
	taken, last := 0, int64(0)
	for taken < f.Limit && rows.Next() {
		r, err := scan(rows)
		if err != nil {
			return w, err
		}
		if keep(r) {
			taken++
			last = id(r)
		}
	}
	if err := rows.Err(); err != nil {
		return w, err
	}
	// Close before the next statement: an open result holds its
	// connection, and a pool of one (SQLite in memory) has no other.
	rows.Close()
	if taken < f.Limit || w.Rows == 0 {
		return w, nil
	}
	return c.readTo(ctx, ex, table, w, last)
}

// searchWhere is the WHERE of a search over the rows of window (ids in
// the window, or the one id or uuid named) with its arguments.
func (c *common) searchWhere(f SearchFilter, textCols []string) (string, []any) {
	where := " WHERE 1 = 1"
	var args []any
	if f.Queue != "" {
		where += " AND queue = ?"
		args = append(args, f.Queue)
	}
	for _, text := range f.Contains {
		where += " AND ("
		for i, col := range textCols {
			if i > 0 {
				where += " OR "
			}
			where += c.contains(col)
			args = append(args, text)
		}
		where += ")"
	}
	return where, args
}

func (c *common) SearchJobs(ctx context.Context, ex sqldb.Execer, f SearchFilter, keep func(StatedRow) bool) (Window, error) {
	where, args := c.searchWhere(f, []string{"payload"})
	var w Window
	if f.ID > 0 {
		where += " AND id = ?"
		args = append(args, f.ID)
	} else {
		var err error
		if w, err = c.window(ctx, ex, c.jobs, f); err != nil || w.Rows == 0 {
			return w, err
		}
		where, args = inWindow(where, args, w)
	}
	scan := func(rows sqldb.Rows) (StatedRow, error) {
		var s StatedRow
		var err error
		s.JobRow, err = scanJob(rows, &s.State)
		return s, err
	}
	return readMatches(ctx, c, ex, c.jobs, w, f, "SELECT "+jobColumns+", "+c.stateExpr()+" FROM "+c.jobs+where+" ORDER BY id DESC",
		args, scan, keep, func(r StatedRow) int64 { return r.ID })
}

func (c *common) SearchFailed(ctx context.Context, ex sqldb.Execer, f SearchFilter, keep func(FailedRow) bool) (Window, error) {
	where, args := c.searchWhere(f, []string{"payload", "exception"})
	var w Window
	switch {
	case f.ID > 0:
		where += " AND id = ?"
		args = append(args, f.ID)
	case f.UUID != "":
		where += " AND uuid = ?"
		args = append(args, f.UUID)
	default:
		var err error
		if w, err = c.window(ctx, ex, c.failed, f); err != nil || w.Rows == 0 {
			return w, err
		}
		where, args = inWindow(where, args, w)
	}
	return readMatches(ctx, c, ex, c.failed, w, f, c.failedSelect()+where+" ORDER BY id DESC",
		args, scanFailedRow, keep, func(r FailedRow) int64 { return r.ID })
}

var (
	_ Searcher = (*postgres)(nil)
	_ Searcher = (*mysql)(nil)
	_ Searcher = (*sqlite)(nil)
)
