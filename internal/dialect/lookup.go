package dialect

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// Lookup reads and changes one row of jobs by its id, for the queue's
// inspection and control methods (Queue.Job, Jobs, Cancel, RunNow).
// Dialect embeds it.
type Lookup interface {
	// FindJob reads row id with its state; found is false when it is gone.
	FindJob(ctx context.Context, ex sqldb.Execer, id int64) (row StatedRow, found bool, err error)
	// ListJobs reads rows in id order after f.AfterID.
	ListJobs(ctx context.Context, ex sqldb.Execer, f JobFilter) ([]StatedRow, error)
	// CancelJob deletes row id if no reservation holds it, and says what
	// it found. A deleted row's payload comes back, for the caller's
	// bookkeeping inside the same transaction.
	CancelJob(ctx context.Context, tx sqldb.Tx, id int64) (state string, payload []byte, err error)
	// RunNow makes row id available now if it is delayed, and says what it
	// found; PostgreSQL wakes the queue's listeners in the same statement.
	RunNow(ctx context.Context, db sqldb.DB, id int64) (state string, queue string, err error)
}

// The states of a row of jobs, as Lookup reports them; StateGone is a row
// that is not there.
const (
	StatePending  = "pending"
	StateDelayed  = "delayed"
	StateReserved = "reserved"
	StateGone     = ""
)

// StatedRow is a row of jobs and its state.
type StatedRow struct {
	JobRow
	State string
}

// JobFilter selects rows of jobs for ListJobs. Zero fields select all.
type JobFilter struct {
	Queue   string
	State   string // StatePending, StateDelayed or StateReserved
	AfterID int64
	Limit   int
}

// stateExpr computes a row's state from the database's clock. A
// reservation that ran out is still "reserved": it stays the dead
// holder's until a claim takes it over.
func (c *common) stateExpr() string {
	return "CASE WHEN reserved_at IS NOT NULL THEN '" + StateReserved + "' WHEN available_at > " + c.now +
		" THEN '" + StateDelayed + "' ELSE '" + StatePending + "' END"
}

// statePredicate is the WHERE condition of one state.
func (c *common) statePredicate(state string) (string, error) {
	switch state {
	case StatePending:
		return "reserved_at IS NULL AND available_at <= " + c.now, nil
	case StateDelayed:
		return "reserved_at IS NULL AND available_at > " + c.now, nil
	case StateReserved:
		return "reserved_at IS NOT NULL", nil
	}
	return "", errors.New("unknown job state " + strconv.Quote(state))
}

func collectStated(rs sqldb.Rows, err error) ([]StatedRow, error) {
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []StatedRow
	for rs.Next() {
		var s StatedRow
		if s.JobRow, err = scanJob(rs, &s.State); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rs.Err()
}

func (c *common) FindJob(ctx context.Context, ex sqldb.Execer, id int64) (StatedRow, bool, error) {
	rows, err := collectStated(ex.Query(ctx, c.rebind("SELECT "+jobColumns+", "+c.stateExpr()+" FROM "+c.jobs+" WHERE id = ?"), id))
	if err != nil || len(rows) == 0 {
		return StatedRow{}, false, err
	}
	return rows[0], true, nil
}

// ListJobs walks the primary key from AfterID (keyset paging: a page
// costs the same however deep it is).
func (c *common) ListJobs(ctx context.Context, ex sqldb.Execer, f JobFilter) ([]StatedRow, error) {
	where := []string{"id > ?"}
	args := []any{f.AfterID}
	if f.Queue != "" {
		where = append(where, "queue = ?")
		args = append(args, f.Queue)
	}
	if f.State != "" {
		p, err := c.statePredicate(f.State)
		if err != nil {
			return nil, err
		}
		where = append(where, p)
	}
	query := "SELECT " + jobColumns + ", " + c.stateExpr() + " FROM " + c.jobs + " WHERE " + strings.Join(where, " AND ") + " ORDER BY id"
	if f.Limit > 0 {
		query += " LIMIT " + strconv.Itoa(f.Limit)
	}
	return collectStated(ex.Query(ctx, c.rebind(query), args...))
}

// cancelJob reads the row's reservation and payload, locking it until
// tx ends (PostgreSQL and MySQL; SQLite's write transaction holds the
// whole database, so it passes "").
func (c *common) cancelJob(ctx context.Context, tx sqldb.Tx, id int64, lock string) (string, []byte, error) {
	var (
		reserved sql.NullInt64
		payload  []byte
	)
	err := tx.QueryRow(ctx, c.rebind("SELECT reserved_at, payload FROM "+c.jobs+" WHERE id = ?"+lock), id).Scan(&reserved, &payload)
	if errors.Is(err, sql.ErrNoRows) { // pgx's ErrNoRows is sql.ErrNoRows too
		return StateGone, nil, nil
	}
	if err != nil {
		return "", nil, err
	}
	if reserved.Valid {
		return StateReserved, nil, nil
	}
	res, err := tx.Exec(ctx, c.rebind("DELETE FROM "+c.jobs+" WHERE id = ? AND reserved_at IS NULL"), id)
	if err != nil {
		return "", nil, err
	}
	if res.RowsAffected == 0 {
		return StateGone, nil, nil // taken between the read and the delete: only without a lock
	}
	if err := c.DropErrors(ctx, tx, []int64{id}); err != nil {
		return "", nil, err
	}
	return StatePending, payload, nil
}

func (c *common) CancelJob(ctx context.Context, tx sqldb.Tx, id int64) (string, []byte, error) {
	return c.cancelJob(ctx, tx, id, " FOR UPDATE")
}

// runNowSQL makes a delayed row due; it returns the row's queue.
func (c *common) runNowSQL() string {
	return "UPDATE " + c.jobs + " SET available_at = " + c.now + " WHERE id = ? AND reserved_at IS NULL AND available_at > " + c.now
}

// runNowState says what RunNow found when its UPDATE changed nothing.
func (c *common) runNowState(ctx context.Context, ex sqldb.Execer, id int64) (string, string, error) {
	row, found, err := c.FindJob(ctx, ex, id)
	if err != nil || !found {
		return StateGone, "", err
	}
	return row.State, row.Queue, nil
}

func (c *common) RunNow(ctx context.Context, db sqldb.DB, id int64) (string, string, error) {
	res, err := db.Exec(ctx, c.rebind(c.runNowSQL()), id)
	if err != nil {
		return "", "", err
	}
	if res.RowsAffected == 0 {
		return c.runNowState(ctx, db, id)
	}
	row, found, err := c.FindJob(ctx, db, id)
	if err != nil || !found {
		return StateDelayed, "", err
	}
	return StateDelayed, row.Queue, nil
}

var (
	_ Lookup = (*postgres)(nil)
	_ Lookup = (*mysql)(nil)
	_ Lookup = (*sqlite)(nil)
)
