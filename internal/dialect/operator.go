package dialect

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/dbqueue/dbqueue/internal/hist"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// Operator is the SQL of the operator's view (migration 00009): the
// per-minute metrics workers write, their heartbeat rows, and the
// optional history of finished jobs, which the worker writes and the
// read API reads.
//
// Every time is the database clock in Unix seconds. Every statement is a
// single one outside any session state, so it runs as it is through a
// transaction pooler (PgBouncer).
type Operator interface {
	// AddMetrics adds rows to the metrics of the current minute of the
	// database clock, and to those of its hour (migration 00011), in one
	// transaction: each row's counts are added to those already there,
	// so processes writing the same minute sum up, and an hour's row is
	// the sum of its minutes' rows. Without the hourly table it fails
	// and writes nothing.
	AddMetrics(ctx context.Context, db sqldb.DB, rows []MetricRow) error
	// PruneMetrics deletes at most limit minutes older than age seconds,
	// oldest first, and at most limit hours whose last minute is that
	// old; it returns the larger of the two counts.
	PruneMetrics(ctx context.Context, ex sqldb.Execer, age int64, limit int) (int64, error)
	// SumMetrics sums the minutes (hours, with r.Hourly) of r by step:
	// Group is the step's index from r.From.
	SumMetrics(ctx context.Context, ex sqldb.Execer, r MetricsRange) ([]MetricSum, error)
	// SumMetricGroups sums the minutes (hours, with r.Hourly) of r by
	// queue and kind, sorted by them; with r.Top, only the r.Top groups
	// that finished most jobs, busiest first, each with Group set to the
	// number of groups in all.
	SumMetricGroups(ctx context.Context, ex sqldb.Execer, r MetricsRange) ([]MetricSum, error)

	// Beat upserts w's heartbeat row: seen now, expiring ttl seconds from
	// now. started_at is set when the row is made.
	Beat(ctx context.Context, ex sqldb.Execer, w WorkerRow, ttl int64) error
	// RemoveWorker deletes the heartbeat row id.
	RemoveWorker(ctx context.Context, ex sqldb.Execer, id string) error
	// PruneWorkers deletes the rows whose expires_at has passed.
	PruneWorkers(ctx context.Context, ex sqldb.Execer) (int64, error)
	// Workers reads every heartbeat row, and the database's now.
	Workers(ctx context.Context, ex sqldb.Execer) ([]WorkerRow, int64, error)

	// AddHistory writes finished jobs.
	AddHistory(ctx context.Context, ex sqldb.Execer, rows []HistoryRow) error
	// PruneHistory deletes at most limit rows finished more than age
	// seconds ago, oldest first.
	PruneHistory(ctx context.Context, ex sqldb.Execer, age int64, limit int) (int64, error)
	// History reads finished jobs newest first.
	History(ctx context.Context, ex sqldb.Execer, f HistoryFilter) ([]HistoryRow, error)

	// DBNow reads the database clock.
	DBNow(ctx context.Context, ex sqldb.Execer) (int64, error)
}

// MetricRow is one (queue, kind)'s counts to add to a minute.
type MetricRow struct {
	Queue, Kind                 string
	Processed, Failed, Released int64
	Runtime, Wait               [hist.Buckets]int64
}

// MetricSum is a sum of minutes: of one step (Group), or of one queue and
// kind.
type MetricSum struct {
	Group int64
	MetricRow
}

// MetricsRange selects minutes: From <= bucket < To, of one queue and
// kind when set, summed Step seconds at a time. Hourly reads the hourly
// table instead: From, To and Step must then be whole hours. Top, when
// positive, limits SumMetricGroups to the busiest Top groups.
type MetricsRange struct {
	From, To, Step int64
	Queue, Kind    string
	Hourly         bool
	Top            int
}

// WorkerRow is a heartbeat row. Queues is a JSON array.
type WorkerRow struct {
	ID, Name, Host, Version, Queues string
	PID, Concurrency, Running       int64
	Processed                       int64
	StartedAt, LastSeen, ExpiresAt  int64
}

// HistoryRow is a finished job.
type HistoryRow struct {
	Seq, ID               int64
	UUID, Queue, Kind     string
	Attempts              int64
	FinishedAt, RuntimeUS int64
	Outcome               string
}

// HistoryFilter selects finished jobs; zero fields select all.
type HistoryFilter struct {
	Queue, Kind, Outcome string
	BeforeSeq            int64 // seq < BeforeSeq, when not 0
	Limit                int
}

func (c *common) metricsTable() string { return c.tables.JobsTable() + "_metrics" }
func (c *common) hourlyTable() string  { return c.tables.JobsTable() + "_metrics_hourly" }
func (c *common) workersTable() string { return c.tables.JobsTable() + "_workers" }
func (c *common) historyTable() string { return c.tables.JobsTable() + "_history" }

// metricCounts are the summed columns, in MetricRow's order.
var metricCounts = func() []string {
	cols := []string{"processed", "failed", "released"}
	for _, p := range []string{"rt", "wt"} {
		for i := range hist.Buckets {
			cols = append(cols, fmt.Sprintf("%s%02d", p, i))
		}
	}
	return cols
}()

// metricChunk bounds the rows of one upsert (53 parameters each).
const metricChunk = 500

func (r *MetricRow) args(out []any) []any {
	out = append(out, r.Queue, r.Kind, r.Processed, r.Failed, r.Released)
	for _, v := range r.Runtime {
		out = append(out, v)
	}
	for _, v := range r.Wait {
		out = append(out, v)
	}
	return out
}

func (r *MetricRow) dests(group *int64) []any {
	out := []any{group, &r.Processed, &r.Failed, &r.Released}
	for i := range r.Runtime {
		out = append(out, &r.Runtime[i])
	}
	for i := range r.Wait {
		out = append(out, &r.Wait[i])
	}
	return out
}

// AddMetrics reads the database clock, then, in one transaction, makes
// one multi-row upsert per chunk into the minute's rows and one into the
// hour's: BEGIN, SELECT, two upserts, COMMIT for up to metricChunk rows.
// Both buckets come from the one read of the clock, so a write at the
// end of an hour cannot put a minute in one hour and its counts in the
// next. The rows go in the caller's order: callers sort them, so two
// processes adding the same minute lock its rows, then the hour's, in
// one order and cannot deadlock.
func (c *common) AddMetrics(ctx context.Context, db sqldb.DB, rows []MetricRow) error {
	return c.addMetrics(ctx, db, nil, rows)
}

// addMetrics is AddMetrics at the time *at, or the database's now when
// at is nil.
func (c *common) addMetrics(ctx context.Context, db sqldb.DB, at *int64, rows []MetricRow) error {
	if len(rows) == 0 {
		return nil
	}
	return sqldb.InTx(ctx, db, sqldb.TxOptions{}, func(tx sqldb.Tx) error {
		var now int64
		if at != nil {
			now = *at
		} else {
			var err error
			if now, err = c.DBNow(ctx, tx); err != nil {
				return err
			}
		}
		if err := c.upsertMetrics(ctx, tx, c.metricsTable(), floorTo(now, 60), rows); err != nil {
			return err
		}
		return c.upsertMetrics(ctx, tx, c.hourlyTable(), floorTo(now, 3600), rows)
	})
}

// AddMetricsAt is d's AddMetrics as if the database clock read at, for
// tests that write minutes and hours other than the current ones through
// the statements workers run.
func AddMetricsAt(ctx context.Context, d Dialect, db sqldb.DB, at int64, rows []MetricRow) error {
	type adder interface {
		addMetrics(context.Context, sqldb.DB, *int64, []MetricRow) error
	}
	a, ok := d.(adder)
	if !ok {
		return errors.New("dbqueue: this dialect has no metrics tables")
	}
	return a.addMetrics(ctx, db, &at, rows)
}

// RollUpMetricsText is the statement that fills d's empty hourly table
// from its minutes, as migration 00011 does: for tests that insert
// minute rows by hand.
func RollUpMetricsText(d Dialect) string {
	c, ok := d.(interface{ base() *common })
	if !ok {
		return ""
	}
	b := c.base()
	hour := b.intDiv("bucket", "3600") + " * 3600"
	var sums []string
	for _, col := range metricCounts {
		sums = append(sums, b.sumInt(col))
	}
	return "INSERT INTO " + b.hourlyTable() + " (bucket, queue, kind, " + strings.Join(metricCounts, ", ") + ") SELECT " +
		hour + ", queue, kind, " + strings.Join(sums, ", ") + " FROM " + b.metricsTable() + " GROUP BY " + hour + ", queue, kind"
}

// floorTo is t rounded down to a multiple of unit.
func floorTo(t, unit int64) int64 {
	if t < 0 {
		return (t - unit + 1) / unit * unit
	}
	return t / unit * unit
}

// upsertMetrics adds rows to table's rows of bucket, metricChunk rows a
// statement.
func (c *common) upsertMetrics(ctx context.Context, ex sqldb.Execer, table string, bucket int64, rows []MetricRow) error {
	row := "(?, ?, ?" + strings.Repeat(", ?", len(metricCounts)) + ")"
	into, set := c.addTaken(table, "bucket, queue, kind", metricCounts)
	head := into + " (bucket, queue, kind, " + strings.Join(metricCounts, ", ") + ") VALUES "
	for rest := rows; len(rest) > 0; {
		chunk := rest[:min(len(rest), metricChunk)]
		rest = rest[len(chunk):]
		var q strings.Builder
		q.WriteString(head)
		args := make([]any, 0, len(chunk)*(3+len(metricCounts)))
		for i := range chunk {
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString(row)
			args = append(args, bucket)
			args = chunk[i].args(args)
		}
		q.WriteString(set)
		if _, err := ex.Exec(ctx, c.rebind(q.String()), args...); err != nil {
			return err
		}
	}
	return nil
}

// PruneMetrics deletes old minutes, then old hours: an hour goes once its
// last minute (bucket + 3540) is older than age, so the hours never hold
// less than the minutes left of them.
func (c *common) PruneMetrics(ctx context.Context, ex sqldb.Execer, age int64, limit int) (int64, error) {
	var most int64
	for _, p := range []struct {
		table string
		age   int64
	}{{c.metricsTable(), age}, {c.hourlyTable(), age + 3540}} {
		q := c.deleteFirst(p.table, "bucket, queue, kind", "bucket < "+c.now+" - ?", " ORDER BY bucket LIMIT ?")
		res, err := ex.Exec(ctx, c.rebind(q), p.age, limit)
		if err != nil {
			return most, err
		}
		most = max(most, res.RowsAffected)
	}
	return most, nil
}

// sumQuery is the statement of SumMetrics (byGroup false) or
// SumMetricGroups (true), and its arguments.
func (c *common) sumQuery(r MetricsRange, byGroup bool) (string, []any) {
	if byGroup && r.Top > 0 && c.topJoin {
		return c.topQuery(r)
	}
	var q strings.Builder
	var args []any
	q.WriteString("SELECT ")
	top := byGroup && r.Top > 0
	if top {
		// The number of groups in all, counted over the grouped rows
		// before the LIMIT.
		q.WriteString("queue, kind, COUNT(*) OVER ()")
	} else if byGroup {
		q.WriteString("queue, kind")
	} else {
		q.WriteString(c.intDiv("bucket - ?", "?"))
		args = append(args, r.From, max(r.Step, 60))
	}
	for _, col := range metricCounts {
		q.WriteString(", " + c.sumInt(col))
	}
	q.WriteString(" FROM " + c.rangeTable(r) + " WHERE bucket >= ? AND bucket < ?")
	args = r.filter(&q, append(args, r.From, r.To))
	switch {
	case top:
		q.WriteString(" GROUP BY queue, kind ORDER BY " + c.sumInt("processed") + " + " + c.sumInt("failed") + " + " + c.sumInt("released") +
			" DESC, queue, kind LIMIT ?")
		args = append(args, r.Top)
	case byGroup:
		q.WriteString(" GROUP BY queue, kind ORDER BY queue, kind")
	default:
		q.WriteString(" GROUP BY 1 ORDER BY 1")
	}
	return c.rebind(q.String()), args
}

// topQuery is SumMetricGroups with r.Top on PostgreSQL and SQLite: it
// ranks the groups by three sums and keeps r.Top of them (with the number
// of groups, counted over the grouped rows before the LIMIT), then sums
// every column for those only, rather than 51 sums for every group of the
// range: on 10,000 groups, a third of the time. MariaDB runs the join
// back as a scan of the range per kept group (seconds at times), so
// MySQL ranks and sums in one pass.
func (c *common) topQuery(r MetricsRange) (string, []any) {
	table := c.rangeTable(r)
	rank := func(p string) string {
		return c.sumInt(p+"processed") + " + " + c.sumInt(p+"failed") + " + " + c.sumInt(p+"released") + " DESC, " + p + "queue, " + p + "kind"
	}
	var q strings.Builder
	args := []any{r.From, r.To}
	q.WriteString("SELECT m.queue, m.kind, t.n")
	for _, col := range metricCounts {
		q.WriteString(", " + c.sumInt("m."+col))
	}
	q.WriteString(" FROM " + table + " m JOIN (SELECT queue, kind, COUNT(*) OVER () AS n FROM " + table + " WHERE bucket >= ? AND bucket < ?")
	args = r.filter(&q, args)
	q.WriteString(" GROUP BY queue, kind ORDER BY " + rank("") + " LIMIT ?) t ON m.queue = t.queue AND m.kind = t.kind" +
		" WHERE m.bucket >= ? AND m.bucket < ? GROUP BY m.queue, m.kind, t.n ORDER BY " + rank("m."))
	args = append(args, r.Top, r.From, r.To)
	return c.rebind(q.String()), args
}

// rangeTable is the table r reads: the hours' or the minutes'.
func (c *common) rangeTable(r MetricsRange) string {
	if r.Hourly {
		return c.hourlyTable()
	}
	return c.metricsTable()
}

// filter adds r's queue and kind conditions to q and their values to args.
func (r MetricsRange) filter(q *strings.Builder, args []any) []any {
	if r.Queue != "" {
		q.WriteString(" AND queue = ?")
		args = append(args, r.Queue)
	}
	if r.Kind != "" {
		q.WriteString(" AND kind = ?")
		args = append(args, r.Kind)
	}
	return args
}

// MetricsSumText is the SQL and arguments d reads metrics with, for tests
// that EXPLAIN it.
func MetricsSumText(d Dialect, r MetricsRange, byGroup bool) (string, []any) {
	type summer interface {
		sumQuery(MetricsRange, bool) (string, []any)
	}
	if s, ok := d.(summer); ok {
		return s.sumQuery(r, byGroup)
	}
	return "", nil
}

func (c *common) sumMetrics(ctx context.Context, ex sqldb.Execer, r MetricsRange, byGroup bool) ([]MetricSum, error) {
	q, args := c.sumQuery(r, byGroup)
	rows, err := ex.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []MetricSum
	for rows.Next() {
		var s MetricSum
		dest := s.dests(&s.Group)
		switch {
		case byGroup && r.Top > 0:
			dest = append([]any{&s.Queue, &s.Kind}, dest...)
		case byGroup:
			dest = append([]any{&s.Queue, &s.Kind}, dest[1:]...)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

func (c *common) SumMetrics(ctx context.Context, ex sqldb.Execer, r MetricsRange) ([]MetricSum, error) {
	return c.sumMetrics(ctx, ex, r, false)
}

func (c *common) SumMetricGroups(ctx context.Context, ex sqldb.Execer, r MetricsRange) ([]MetricSum, error) {
	return c.sumMetrics(ctx, ex, r, true)
}

const workerColumns = "id, name, host, pid, version, queues, concurrency, running, processed, started_at, last_seen, expires_at"

func (c *common) Beat(ctx context.Context, ex sqldb.Execer, w WorkerRow, ttl int64) error {
	q := "INSERT INTO " + c.workersTable() + " (" + workerColumns + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, " +
		c.now + ", " + c.now + ", " + c.now + " + ?)" + c.replaceTaken("id", []string{"running", "processed", "last_seen", "expires_at"})
	_, err := ex.Exec(ctx, c.rebind(q), w.ID, w.Name, w.Host, w.PID, w.Version, w.Queues, w.Concurrency, w.Running, w.Processed, ttl)
	return err
}

func (c *common) RemoveWorker(ctx context.Context, ex sqldb.Execer, id string) error {
	_, err := ex.Exec(ctx, c.rebind("DELETE FROM "+c.workersTable()+" WHERE id = ?"), id)
	return err
}

func (c *common) PruneWorkers(ctx context.Context, ex sqldb.Execer) (int64, error) {
	res, err := ex.Exec(ctx, "DELETE FROM "+c.workersTable()+" WHERE expires_at < "+c.now)
	return res.RowsAffected, err
}

// maxWorkerRows bounds what Workers reads.
const maxWorkerRows = 10000

func (c *common) Workers(ctx context.Context, ex sqldb.Execer) ([]WorkerRow, int64, error) {
	now, err := c.DBNow(ctx, ex)
	if err != nil {
		return nil, 0, err
	}
	rows, err := ex.Query(ctx, "SELECT "+workerColumns+" FROM "+c.workersTable()+
		" ORDER BY name, host, pid, id LIMIT "+fmt.Sprint(maxWorkerRows))
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	var out []WorkerRow
	for rows.Next() {
		var w WorkerRow
		if err := rows.Scan(&w.ID, &w.Name, &w.Host, &w.PID, &w.Version, &w.Queues, &w.Concurrency, &w.Running,
			&w.Processed, &w.StartedAt, &w.LastSeen, &w.ExpiresAt); err != nil {
			return nil, 0, err
		}
		out = append(out, w)
	}
	return out, now, rows.Err()
}

// historyChunk bounds the rows of one INSERT (8 parameters each).
const historyChunk = 1000

func (c *common) AddHistory(ctx context.Context, ex sqldb.Execer, rows []HistoryRow) error {
	head := "INSERT INTO " + c.historyTable() + " (id, uuid, queue, kind, attempts, finished_at, runtime_us, outcome) VALUES "
	for len(rows) > 0 {
		chunk := rows[:min(len(rows), historyChunk)]
		rows = rows[len(chunk):]
		var q strings.Builder
		q.WriteString(head)
		args := make([]any, 0, 8*len(chunk))
		for i, r := range chunk {
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString("(?, ?, ?, ?, ?, ?, ?, ?)")
			args = append(args, r.ID, r.UUID, r.Queue, r.Kind, r.Attempts, r.FinishedAt, r.RuntimeUS, r.Outcome)
		}
		if _, err := ex.Exec(ctx, c.rebind(q.String()), args...); err != nil {
			return err
		}
	}
	return nil
}

func (c *common) PruneHistory(ctx context.Context, ex sqldb.Execer, age int64, limit int) (int64, error) {
	q := c.deleteFirst(c.historyTable(), "seq", "finished_at < "+c.now+" - ?", " ORDER BY finished_at LIMIT ?")
	res, err := ex.Exec(ctx, c.rebind(q), age, limit)
	return res.RowsAffected, err
}

func (c *common) History(ctx context.Context, ex sqldb.Execer, f HistoryFilter) ([]HistoryRow, error) {
	var q strings.Builder
	var args []any
	q.WriteString("SELECT seq, id, uuid, queue, kind, attempts, finished_at, runtime_us, outcome FROM " + c.historyTable() + " WHERE 1 = 1")
	for _, w := range []struct {
		col, v string
	}{{"queue", f.Queue}, {"kind", f.Kind}, {"outcome", f.Outcome}} {
		if w.v != "" {
			q.WriteString(" AND " + w.col + " = ?")
			args = append(args, w.v)
		}
	}
	if f.BeforeSeq != 0 {
		q.WriteString(" AND seq < ?")
		args = append(args, f.BeforeSeq)
	}
	q.WriteString(" ORDER BY seq DESC LIMIT ?")
	args = append(args, f.Limit)
	rows, err := ex.Query(ctx, c.rebind(q.String()), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []HistoryRow
	for rows.Next() {
		var r HistoryRow
		if err := rows.Scan(&r.Seq, &r.ID, &r.UUID, &r.Queue, &r.Kind, &r.Attempts, &r.FinishedAt, &r.RuntimeUS, &r.Outcome); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
