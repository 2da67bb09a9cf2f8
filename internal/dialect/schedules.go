package dialect

import (
	"context"
	"database/sql"
	"strings"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// ScheduleBook is the SQL of the periodic schedules' own table (migration
// 00013, <jobs>_schedules): what the schedulers running them say of them,
// for the operator. The tick locks decide what is pushed; this table only
// reports it, and every statement is its own, outside a tick's
// transaction. Every dialect implements it (through common).
type ScheduleBook interface {
	// SeeSchedules upserts rows' name, spec and next tick, and seen_at
	// as the database's now, in key order, leaving what was pushed as it
	// is.
	SeeSchedules(ctx context.Context, ex sqldb.Execer, rows []ScheduleRow) error
	// RecordScheduleTick upserts row as the tick just pushed: every
	// column, last_pushed_at and seen_at the database's now, unless the
	// row holds a later tick already.
	RecordScheduleTick(ctx context.Context, ex sqldb.Execer, row ScheduleRow) error
	// Schedules reads every row, by name, and the database's now.
	Schedules(ctx context.Context, ex sqldb.Execer) ([]ScheduleRow, int64, error)
	// PruneSchedules deletes up to limit rows not seen for age seconds.
	PruneSchedules(ctx context.Context, ex sqldb.Execer, age int64, limit int) (int64, error)
}

// ScheduleRow is a row of the schedules table. Key is the SHA-256 of
// Name in hex.
type ScheduleRow struct {
	Key, Name, Spec, Queue, Job string
	NextTick, LastTick          sql.NullInt64
	LastJobID, LastPushedAt     sql.NullInt64
	SeenAt                      int64
}

func (c *common) schedulesTable() string { return c.tables.JobsTable() + "_schedules" }

// maxScheduleRows bounds what Schedules reads.
const maxScheduleRows = 10000

// SeeSchedules writes all rows in one statement.
func (c *common) SeeSchedules(ctx context.Context, ex sqldb.Execer, rows []ScheduleRow) error {
	if len(rows) == 0 {
		return nil
	}
	var q strings.Builder
	q.WriteString("INSERT INTO " + c.schedulesTable() + " (schedule_key, name, spec, queue, job, next_tick, seen_at) VALUES ")
	args := make([]any, 0, 6*len(rows))
	for i, r := range rows {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?, ?, '', '', ?, " + c.now + ")")
		args = append(args, r.Key, r.Name, r.Spec, r.NextTick)
	}
	q.WriteString(c.replaceTaken("schedule_key", []string{"name", "spec", "next_tick", "seen_at"}))
	_, err := ex.Exec(ctx, c.rebind(q.String()), args...)
	return err
}

// RecordScheduleTick keeps the latest tick: a process that pushed tick t
// and records it after another recorded t+1 changes nothing.
func (c *common) RecordScheduleTick(ctx context.Context, ex sqldb.Execer, r ScheduleRow) error {
	into, set := c.replaceNewer(c.schedulesTable(), "schedule_key", "last_tick", []string{"name", "spec", "queue", "job", "next_tick", "last_job_id", "last_pushed_at", "seen_at"})
	q := into + " (schedule_key, name, spec, queue, job, next_tick, last_job_id, last_pushed_at, seen_at, last_tick)" +
		" VALUES (?, ?, ?, ?, ?, ?, ?, " + c.now + ", " + c.now + ", ?)" + set
	_, err := ex.Exec(ctx, c.rebind(q), r.Key, r.Name, r.Spec, r.Queue, r.Job, r.NextTick, r.LastJobID, r.LastTick)
	return err
}

func (c *common) Schedules(ctx context.Context, ex sqldb.Execer) ([]ScheduleRow, int64, error) {
	now, err := c.DBNow(ctx, ex)
	if err != nil {
		return nil, 0, err
	}
	rows, err := ex.Query(ctx, c.rebind("SELECT schedule_key, name, spec, queue, job, next_tick, last_tick, last_job_id, last_pushed_at, seen_at FROM "+
		c.schedulesTable()+" ORDER BY name, schedule_key LIMIT ?"), maxScheduleRows)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	var out []ScheduleRow
	for rows.Next() {
		var r ScheduleRow
		if err := rows.Scan(&r.Key, &r.Name, &r.Spec, &r.Queue, &r.Job, &r.NextTick, &r.LastTick, &r.LastJobID, &r.LastPushedAt, &r.SeenAt); err != nil {
			return nil, 0, err
		}
		out = append(out, r)
	}
	return out, now, rows.Err()
}

func (c *common) PruneSchedules(ctx context.Context, ex sqldb.Execer, age int64, limit int) (int64, error) {
	t := c.schedulesTable()
	q := c.deleteFirst(t, "schedule_key", "seen_at < "+c.now+" - ?", " LIMIT ?")
	res, err := ex.Exec(ctx, c.rebind(q), age, limit)
	return res.RowsAffected, err
}
