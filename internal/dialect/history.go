package dialect

import (
	"context"
	"strconv"
	"strings"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// Error history: the errors of a job's earlier attempts, in the errors
// table beside jobs (migration 00010). A release that carries an error
// writes it in the same statement (PostgreSQL) or transaction (MySQL,
// SQLite) as the release itself, for the rows the release found held, so
// a stale holder never writes into the new holder's history.
//
// A row of jobs with history carries ErrorHistoryMark in its reservation
// token: the release that writes the first error sets the bit in the
// same UPDATE, and a retry from failed_jobs sets it on a row whose
// history came back with it. A finish reads the bit from the token it
// already holds, so only jobs with history pay for cleaning it: a job
// that never failed is deleted exactly as before. The token only grows
// (setting a bit never lowers it, and claims still add one), so no
// reservation is handed out twice. Laravel's workers never read the
// token.
const (
	// ErrorHistoryKeep is how many errors a job keeps (the newest).
	ErrorHistoryKeep = 5
	// ErrorHistoryBytes bounds one error's text.
	ErrorHistoryBytes = 4096
	// ErrorHistoryMark is the reservation-token bit of rows with history.
	ErrorHistoryMark int64 = 1 << 48
)

var historyMark = strconv.FormatInt(ErrorHistoryMark, 10)

// Marked reports whether a reservation's token says its row has history.
func Marked(token int64) bool { return token&ErrorHistoryMark != 0 }

// AttemptError is one error of an attempt to run a job.
type AttemptError struct {
	Attempt int
	Error   string
	// Worker is the host and process that ran the attempt.
	Worker string
	// At is when it was written (the database's clock, Unix seconds).
	At int64
}

// ErrorHistory is the SQL of error history. Dialect embeds it.
type ErrorHistory interface {
	// JobErrors reads the errors of row id of jobs, oldest first.
	JobErrors(ctx context.Context, ex sqldb.Execer, id int64) ([]AttemptError, error)
	// FailedErrors reads the errors a failed job brought with it.
	FailedErrors(ctx context.Context, ex sqldb.Execer, uuid string) ([]AttemptError, error)
	// DropErrors deletes the errors of rows of jobs that are gone.
	DropErrors(ctx context.Context, ex sqldb.Execer, ids []int64) error
	// PruneErrors deletes up to limit errors whose job left both jobs
	// and failed_jobs without taking them along (a job deleted by
	// Laravel's worker, or a process that died between a job's delete
	// and its history's), and says how many it deleted.
	PruneErrors(ctx context.Context, ex sqldb.Execer, limit int) (int64, error)
}

func (c *common) errorsTable() string { return c.tables.ErrorsTable() }

func (c *common) base() *common { return c }

// probeHistory turns error history off when its table is missing: a
// database that migration 00010 has not reached yet, during a rolling
// deploy that runs this code before `migrate up`. Jobs then run, fail
// and finish as before, and keep no history; the lookups find none.
// Any other error is returned.
func probeHistory(ctx context.Context, ex sqldb.Execer, d database) error {
	c := d.base()
	rows, err := ex.Query(ctx, "SELECT id FROM "+c.errorsTable()+" WHERE 1 = 0")
	if err == nil {
		rows.Close()
		err = rows.Err()
	}
	if err != nil && sqldb.MissingTable(err) {
		c.noHistory = true
		return nil
	}
	return err
}

const historyColumns = "attempt, error, worker, created_at"

func (c *common) readHistory(ctx context.Context, ex sqldb.Execer, where string, arg any) ([]AttemptError, error) {
	if c.noHistory {
		return nil, nil
	}
	rows, err := ex.Query(ctx, c.rebind("SELECT "+historyColumns+" FROM "+c.errorsTable()+" WHERE "+where+" = ? ORDER BY id"), arg)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []AttemptError
	for rows.Next() {
		var (
			e       AttemptError
			att, at int64
		)
		if err := rows.Scan(c.ints(&att), &e.Error, &e.Worker, c.ints(&at)); err != nil {
			return nil, err
		}
		e.Attempt, e.At = int(att), at
		out = append(out, e)
	}
	return out, rows.Err()
}

func (c *common) JobErrors(ctx context.Context, ex sqldb.Execer, id int64) ([]AttemptError, error) {
	return c.readHistory(ctx, ex, "job_id", id)
}

func (c *common) FailedErrors(ctx context.Context, ex sqldb.Execer, uuid string) ([]AttemptError, error) {
	return c.readHistory(ctx, ex, "failed_uuid", uuid)
}

func (c *common) DropErrors(ctx context.Context, ex sqldb.Execer, ids []int64) error {
	if len(ids) == 0 || c.noHistory {
		return nil
	}
	_, err := ex.Exec(ctx, "DELETE FROM "+c.errorsTable()+" WHERE job_id IN ("+sqldb.Ints(ids)+")")
	return err
}

func (c *common) PruneErrors(ctx context.Context, ex sqldb.Execer, limit int) (int64, error) {
	if c.noHistory {
		return 0, nil
	}
	e := c.errorsTable()
	// The inner query is wrapped in a derived table: MySQL refuses a
	// DELETE whose subquery reads the table it deletes from.
	res, err := ex.Exec(ctx, c.rebind("DELETE FROM "+e+" WHERE id IN (SELECT id FROM (SELECT e.id FROM "+e+" e"+
		" WHERE (e.job_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM "+c.jobs+" j WHERE j.id = e.job_id))"+
		" OR (e.failed_uuid IS NOT NULL AND NOT EXISTS (SELECT 1 FROM "+c.failed+" f WHERE f.uuid = e.failed_uuid))"+
		" ORDER BY e.id LIMIT ?) AS gone)"), limit)
	return res.RowsAffected, err
}

// historyEntry is one error to write for a released row.
type historyEntry struct {
	id      int64
	attempt int
	err     *ReleaseError
}

// releaseErrors lists the errors of the rows of rs that released holds.
func releaseErrors(rs []Release, released func(Release) bool) []historyEntry {
	var out []historyEntry
	for _, r := range rs {
		if r.Error != nil && released(r) {
			out = append(out, historyEntry{r.ID, r.Attempts, r.Error})
		}
	}
	return out
}

// writesHistory reports whether a release of rs writes history: one
// carries an error, and the table is there.
func (c *common) writesHistory(rs []Release) bool {
	if c.noHistory {
		return false
	}
	for _, r := range rs {
		if r.Error != nil {
			return true
		}
	}
	return false
}

// pruneBefore is the DELETE that leaves the newest ErrorHistoryKeep-1 errors
// of rows whose ids the subquery ids selects, before one more is written.
// The derived table keeps MySQL from refusing a DELETE that reads its own
// table.
func (c *common) pruneBefore(ids string) string {
	e := c.errorsTable()
	return "DELETE FROM " + e + " WHERE id IN (SELECT id FROM (SELECT id, ROW_NUMBER() OVER (PARTITION BY job_id ORDER BY id DESC) AS n FROM " +
		e + " WHERE job_id IN (" + ids + ")) AS ranked WHERE n >= " + strconv.Itoa(ErrorHistoryKeep) + ")"
}

// recordErrors writes the errors of released rows inside the release's
// transaction: the oldest beyond ErrorHistoryKeep go first.
func (c *common) recordErrors(ctx context.Context, tx sqldb.Execer, entries []historyEntry) error {
	if len(entries) == 0 || c.noHistory {
		return nil
	}
	ids := make([]int64, len(entries))
	for i, e := range entries {
		ids[i] = e.id
	}
	if _, err := tx.Exec(ctx, c.pruneBefore(sqldb.Ints(ids))); err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("INSERT INTO " + c.errorsTable() + " (job_id, attempt, error, worker, created_at) VALUES ")
	args := make([]any, 0, 2*len(entries))
	for i, e := range entries {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(" + strconv.FormatInt(e.id, 10) + ", " + strconv.Itoa(e.attempt) + ", ?, ?, " + c.now + ")")
		args = append(args, e.err.Error, e.err.Worker)
	}
	_, err := tx.Exec(ctx, c.rebind(b.String()), args...)
	return err
}

// markSet is the SET item that marks the released rows that carry an
// error as having history ("" when none does).
func markSet(rs []Release) string {
	var b strings.Builder
	for _, r := range rs {
		if r.Error == nil {
			continue
		}
		if b.Len() == 0 {
			b.WriteString(", reservation_token = CASE id")
		}
		b.WriteString(" WHEN " + strconv.FormatInt(r.ID, 10) + " THEN reservation_token | " + historyMark)
	}
	if b.Len() > 0 {
		b.WriteString(" ELSE reservation_token END")
	}
	return b.String()
}

// moveHistory hands a failed row's errors to its failed_jobs uuid (any a
// failure of the same uuid left go first: that failure is replaced), in
// the fail's transaction; rows without history skip it.
func (c *common) moveHistory(ctx context.Context, tx sqldb.Execer, h Held, uuid string) error {
	if !Marked(h.Token) || c.noHistory {
		return nil
	}
	if _, err := tx.Exec(ctx, c.rebind("DELETE FROM "+c.errorsTable()+" WHERE failed_uuid = ?"), uuid); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, c.rebind("UPDATE "+c.errorsTable()+" SET job_id = NULL, failed_uuid = ? WHERE job_id = ?"), uuid, h.ID)
	return err
}

// anyMarked reports whether a row of held has history.
func anyMarked(held []Held) bool {
	for _, h := range held {
		if Marked(h.Token) {
			return true
		}
	}
	return false
}

// dropMarked deletes the history of the deleted rows whose tokens say
// they have one.
func (c *common) dropMarked(ctx context.Context, ex sqldb.Execer, deleted []Key) error {
	var ids []int64
	for _, k := range deleted {
		if Marked(k.Token) {
			ids = append(ids, k.ID)
		}
	}
	return c.DropErrors(ctx, ex, ids)
}

// withHistory wraps a DELETE of jobs … RETURNING jobs.id,
// jobs.reservation_token so that the same statement deletes the deleted
// rows' history.
func (c *common) withHistory(del string) string {
	return "WITH d AS (" + del + "), h AS (DELETE FROM " + c.errorsTable() + " WHERE job_id IN (SELECT id FROM d)) SELECT id, reservation_token FROM d"
}

// dropHeldHistory deletes a finished row's errors in its delete's
// transaction; rows without history skip it.
func (c *common) dropHeldHistory(ctx context.Context, tx sqldb.Execer, h Held) error {
	if !Marked(h.Token) || c.noHistory {
		return nil
	}
	return c.DropErrors(ctx, tx, []int64{h.ID})
}

// historyBack hands the errors of retried failed rows to their new rows
// in jobs (ids, in rows' order), adds each row's own failure (its
// exception, cut to ErrorHistoryBytes, with the attempt its payload's
// mark names and its failed_at) as the newest, keeping ErrorHistoryKeep,
// and marks the rows that have history. Without the failure's own text a
// job that failed on its first attempt would come back with no history
// at all, and one that failed after releases would lose its last error.
func (c *common) historyBack(ctx context.Context, tx sqldb.Execer, rows []FailedRow, ids []int64) error {
	if c.noHistory {
		return nil
	}
	var b strings.Builder
	args := make([]any, 0, 2*len(rows))
	// job_id first: MySQL's SET reads the columns as the items before it
	// left them.
	b.WriteString("UPDATE " + c.errorsTable() + " SET job_id = CASE failed_uuid")
	for i, r := range rows {
		b.WriteString(" WHEN ? THEN " + strconv.FormatInt(ids[i], 10))
		args = append(args, r.UUID)
	}
	b.WriteString(" END, failed_uuid = NULL WHERE failed_uuid IN (" + sqldb.List(len(rows)) + ")")
	for _, r := range rows {
		args = append(args, r.UUID)
	}
	if _, err := tx.Exec(ctx, c.rebind(b.String()), args...); err != nil {
		return err
	}
	if err := c.failuresBack(ctx, tx, rows, ids); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, "UPDATE "+c.jobs+" SET reservation_token = reservation_token | "+historyMark+
		" WHERE id IN ("+sqldb.Ints(ids)+") AND EXISTS (SELECT 1 FROM "+c.errorsTable()+" e WHERE e.job_id = "+c.jobs+".id)")
	return err
}

// failuresBack writes the failure of each retried row (its exception) as
// the newest error of its new row, after the oldest beyond
// ErrorHistoryKeep-1 went. The worker is not known: failed_jobs does not
// say which process failed a job, so it is left empty.
func (c *common) failuresBack(ctx context.Context, tx sqldb.Execer, rows []FailedRow, ids []int64) error {
	var b strings.Builder
	var args []any
	var with []int64
	for i, r := range rows {
		if r.Exception == "" {
			continue
		}
		if len(with) == 0 {
			b.WriteString("INSERT INTO " + c.errorsTable() + " (job_id, attempt, error, worker, created_at) VALUES ")
		} else {
			b.WriteByte(',')
		}
		at := c.now
		if r.FailedAt != nil {
			at = strconv.FormatInt(*r.FailedAt, 10)
		}
		b.WriteString("(" + strconv.FormatInt(ids[i], 10) + ", " + strconv.Itoa(max(r.Attempt, 0)) + ", ?, '', " + at + ")")
		args = append(args, StorableText(r.Exception, ErrorHistoryBytes))
		with = append(with, ids[i])
	}
	if len(with) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, c.pruneBefore(sqldb.Ints(with))); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, c.rebind(b.String()), args...)
	return err
}

// dropFailedHistory deletes the errors of the failed rows a filter names,
// before the rows themselves.
func (c *common) dropFailedHistory(ctx context.Context, ex sqldb.Execer, where string, args []any) error {
	if c.noHistory {
		return nil
	}
	_, err := ex.Exec(ctx, c.rebind("DELETE FROM "+c.errorsTable()+" WHERE failed_uuid IN (SELECT uuid FROM "+c.failed+where+")"), args...)
	return err
}

// dropQueueHistory deletes the errors of a queue's rows, before the rows.
func (c *common) dropQueueHistory(ctx context.Context, ex sqldb.Execer, queue string) error {
	if c.noHistory {
		return nil
	}
	_, err := ex.Exec(ctx, c.rebind("DELETE FROM "+c.errorsTable()+" WHERE job_id IN (SELECT id FROM "+c.jobs+" WHERE queue = ?)"), queue)
	return err
}

var (
	_ ErrorHistory = (*postgres)(nil)
	_ ErrorHistory = (*mysql)(nil)
	_ ErrorHistory = (*sqlite)(nil)
)
