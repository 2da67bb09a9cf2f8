package dialect

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// FlowControl is the SQL of concurrency limits enforced in the claim
// (migration 00014): a job pushed under a limit (its flow_name, and its
// key within it, flow_key) waits "parked", with reserved_at = Parked,
// where neither a plain claim nor a Laravel worker takes it, and ClaimFlow
// starts it only while fewer than the limit's jobs of its key (and of the
// whole limit, where it has a total) are running. A job of a limit runs
// with reserved_at = Parked + the claim's time, so its reservation
// expires as any other does, and frees its place when it does.
type FlowControl interface {
	// DeclareFlow writes a limit's caps (<jobs>_flow) unless they are so
	// already. Writes outside any caller's transaction: a pusher's long
	// transaction must not hold the row the claims lock.
	DeclareFlow(ctx context.Context, db sqldb.DB, f Flow) error
	// Flows lists the declared limits with their jobs running and waiting
	// (running: claimed less than retryAfter seconds ago).
	Flows(ctx context.Context, ex sqldb.Execer, retryAfter int64) ([]FlowInfo, error)
	// InsertFlow pushes rows of which some carry a limit (PushRow.Flow),
	// returning their ids in order. One statement a row: limited pushes
	// take this path, plain ones keep Insert's.
	InsertFlow(ctx context.Context, ex sqldb.Execer, rows []PushRow) ([]int64, error)
	// ClaimFlow claims up to n jobs of queue that wait under a limit, as
	// many as the limits let start now: of each key in turn, its earliest
	// due. It waits for a claim counting the same limit to commit.
	ClaimFlow(ctx context.Context, db sqldb.DB, queue string, retryAfter int64, n int) ([]JobRow, error)
	// PlacesFreed tells the workers of other processes that jobs of
	// limits on queues ended (PostgreSQL's NOTIFY), so their claims try
	// again before their next poll; where nothing carries it, it does
	// nothing.
	PlacesFreed(ctx context.Context, ex sqldb.Execer, queues []string) error
}

// Parked is the reserved_at of a job waiting under a limit: 2^62, past
// any time a reservation could expire at. A limited job running has
// reserved_at = Parked + its claim's Unix time.
const Parked int64 = 1 << 62

var parked = strconv.FormatInt(Parked, 10)

// unreserve is the SET clause that ends a reservation: the row waits
// again, parked when it runs under a limit.
var unreserve = "reserved_at = CASE WHEN flow_name IS NULL THEN NULL ELSE " + parked + " END"

// MaxFlowName bounds a limit's name and key in bytes (the columns are 191
// bytes, which a MySQL index holds in full).
const MaxFlowName = 191

// Flow is one limit's caps.
type Flow struct {
	Name string
	// PerKey is the most jobs of one key running at once.
	PerKey int
	// Total is the most jobs of the limit running at once over all its
	// keys; 0 for no cap.
	Total int
}

// FlowInfo is a declared limit and its counts.
type FlowInfo struct {
	Flow
	Running, Waiting int64
	// Keys is how many keys have a job running or waiting.
	Keys int64
}

func (c *common) flowTable() string { return c.tables.JobsTable() + "_flow" }

// flowSpelling is what the databases write differently in the limited
// claim; each dialect's ClaimFlow passes its own.
type flowSpelling struct {
	// lock ends a read that locks the rows it returns, waiting for those
	// another transaction holds ("" where a write transaction holds the
	// whole database).
	lock string
	tx   sqldb.TxOptions
	// at is the column the limited claim reads reserved_at from: the
	// column itself, or one that mirrors it on limited rows only (for a
	// database without partial indexes).
	at string
	// planner, when set, is run first in the claim's transaction, and
	// query runs the statement before it (where a planner with stale
	// statistics would read the whole table: see PostgresClaimPlanner).
	planner string
	query   func(ctx context.Context, db sqldb.DB, collect func(sqldb.Rows, error) error, query string, args ...any) error
}

// flowDue is the predicate of a limited job a claim may take, on column
// at (flowSpelling.at) at time now (an expression, or "?"): parked and
// due, or running with a reservation that expired (its holder died).
// Params: [now,] [now,] retryAfter.
func flowDue(at, now string) string {
	return "((" + at + " = " + parked + " AND available_at <= " + now + ") OR (" + at + " > " + parked + " AND " + at + " <= " + parked + " + " + now + " - ?))"
}

// inQueue is the test that a job (of table alias prefix) is of the queue
// given as a parameter, written so that no index can serve it: the
// limited claim's statements must read the limit's index (flow_name
// first), and the plain claim's index on (queue, reserved_at), which
// holds the parked jobs too, looks cheaper to a planner without
// statistics of the limited rows, though it reads every job of the queue
// for each key (1 s for 2,000 keys of 4,000 jobs, against 8 ms).
func inQueue(prefix string) string { return "CASE WHEN " + prefix + "queue = ? THEN 1 ELSE 0 END = 1" }

// flowClaimSet is claimSet for a limited row, whose reserved_at is never
// NULL: a row was reserved (its claim takes over an expired
// reservation) when reserved_at is past Parked.
var flowClaimSet = strings.Replace(claimSet, "reserved_at IS NOT NULL", "reserved_at > "+parked, 1)

func (c *common) DeclareFlow(ctx context.Context, db sqldb.DB, f Flow) error {
	var per, total int64
	err := db.QueryRow(ctx, c.rebind("SELECT per_key, total FROM "+c.flowTable()+" WHERE name = ?"), f.Name).Scan(c.ints(&per), c.ints(&total))
	switch {
	case err == nil && per == int64(f.PerKey) && total == int64(f.Total):
		return nil
	case err == nil:
		_, err = db.Exec(ctx, c.rebind("UPDATE "+c.flowTable()+" SET per_key = ?, total = ? WHERE name = ?"), f.PerKey, f.Total, f.Name)
		return err
	case !errors.Is(err, sql.ErrNoRows):
		return err
	}
	_, err = db.Exec(ctx, c.rebind(c.skipTaken(c.flowTable(), "name, per_key, total", "(?, ?, ?)", "name")), f.Name, f.PerKey, f.Total)
	return err
}

func (c *common) Flows(ctx context.Context, ex sqldb.Execer, retryAfter int64) ([]FlowInfo, error) {
	rows, err := ex.Query(ctx, c.rebind("SELECT f.name, f.per_key, f.total,"+
		" (SELECT COUNT(*) FROM "+c.jobs+" j WHERE j.flow_name = f.name AND j.reserved_at > "+parked+" + "+c.now+" - ?),"+
		" (SELECT COUNT(*) FROM "+c.jobs+" j WHERE j.flow_name = f.name AND j.reserved_at = "+parked+"),"+
		" (SELECT COUNT(DISTINCT j.flow_key) FROM "+c.jobs+" j WHERE j.flow_name = f.name)"+
		" FROM "+c.flowTable()+" f ORDER BY f.name"), retryAfter)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []FlowInfo
	for rows.Next() {
		var (
			fi         FlowInfo
			per, total int64
		)
		if err := rows.Scan(&fi.Name, c.ints(&per), c.ints(&total), c.ints(&fi.Running), c.ints(&fi.Waiting), c.ints(&fi.Keys)); err != nil {
			return nil, err
		}
		fi.PerKey, fi.Total = int(per), int(total)
		out = append(out, fi)
	}
	return out, rows.Err()
}

// insertFlow writes rows one statement each; id reads the new row's id
// (RETURNING, or the driver's last insert id).
func (c *common) insertFlow(ctx context.Context, ex sqldb.Execer, rows []PushRow, id func(ctx context.Context, ex sqldb.Execer, query string, args ...any) (int64, error)) ([]int64, error) {
	ids := make([]int64, len(rows))
	insert := c.rebind("INSERT INTO " + c.jobs + " (queue, payload, attempts, reserved_at, available_at, created_at, flow_name, flow_key)" +
		" VALUES (?, ?, 0, ?, CASE WHEN ? THEN ? ELSE " + c.now + " + ? END, " + c.now + ", ?, ?)")
	for i, r := range rows {
		var (
			reserved   any
			name, key  any
			at         = r.At
			absolute   = r.Absolute
			absoluteAt = r.At
		)
		if r.Flow != "" {
			reserved, name, key = Parked, r.Flow, r.FlowKey
		}
		if !absolute && at < 0 {
			at = 0
		}
		var err error
		ids[i], err = id(ctx, ex, insert, r.Queue, string(r.Payload), reserved, absolute, absoluteAt, at, name, key)
		if err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// flowScan is how many waiting jobs a limited claim of n reads at most:
// keys past them get their turn at the next claims, which start after the
// last key read.
func flowScan(n int) int { return max(4*n, 100) }

// lockedFlow is a limit a claim holds: its caps and key cursor.
type lockedFlow struct {
	Flow
	cursor *string
}

// claimFlow is ClaimFlow in the spelling fs: in one transaction, lock the
// limits that have a job of queue to take (skipping those another claim
// holds), then, reading after the locks (so every claim that held them
// before has committed and is counted), take for each limit the jobs that
// fit, and reserve them.
func (c *common) claimFlow(ctx context.Context, db sqldb.DB, queue string, retryAfter int64, n int, fs flowSpelling) (_ []JobRow, err error) {
	// Which limits have a job of queue to take: one statement of index
	// probes outside any transaction, so a queue with none costs one
	// round trip.
	var names []string
	query := c.rebind("SELECT f.name FROM " + c.flowTable() + " f WHERE EXISTS (SELECT 1 FROM " + c.jobs +
		" WHERE flow_name = f.name AND " + fs.at + " = " + parked + " AND available_at <= " + c.now + " AND " + inQueue("") + ")" +
		" OR EXISTS (SELECT 1 FROM " + c.jobs + " WHERE flow_name = f.name AND " + fs.at + " > " + parked + " AND " + fs.at + " <= " + parked + " + " + c.now + " - ? AND " + inQueue("") + ")" +
		" ORDER BY f.name")
	collect := func(rs sqldb.Rows, err error) error {
		names, err = scanStrings(rs, err)
		return err
	}
	if fs.query != nil {
		err = fs.query(ctx, db, collect, query, queue, retryAfter, queue)
	} else {
		err = collect(db.Query(ctx, query, queue, retryAfter, queue))
	}
	if err != nil || len(names) == 0 {
		return nil, err
	}
	var out []JobRow
	err = sqldb.InTx(ctx, db, fs.tx, func(tx sqldb.Tx) error {
		out = nil
		if fs.planner != "" {
			if _, err := tx.Exec(ctx, fs.planner); err != nil {
				return err
			}
		}
		var now int64
		if err := tx.QueryRow(ctx, "SELECT "+c.now).Scan(c.ints(&now)); err != nil {
			return err
		}
		flows, err := c.lockFlows(ctx, tx, names, fs)
		if err != nil {
			return err
		}
		for _, f := range flows {
			if len(out) >= n {
				break
			}
			rows, err := c.claimUnder(ctx, tx, f, queue, now, retryAfter, n-len(out), fs)
			if err != nil {
				return err
			}
			out = append(out, rows...)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// lockFlows locks the limits named, in name order, and reads their caps
// and cursors. It waits for a limit another claim holds (for that claim's
// few statements): skipping it left the processes that skipped with an
// empty claim, and so idle until their next poll, while the limit had
// room (a limit of 40 over 4 workers of 10 handlers ran 0.14 of the
// unlimited rate).
func (c *common) lockFlows(ctx context.Context, tx sqldb.Tx, names []string, fs flowSpelling) ([]lockedFlow, error) {
	args := make([]any, len(names))
	for i, n := range names {
		args[i] = n
	}
	rows, err := tx.Query(ctx, c.rebind("SELECT name, per_key, total, key_cursor FROM "+c.flowTable()+" WHERE name IN ("+sqldb.List(len(names))+") ORDER BY name"+fs.lock), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var flows []lockedFlow
	for rows.Next() {
		var (
			f          lockedFlow
			per, total int64
			cursor     sql.NullString
		)
		if err := rows.Scan(&f.Name, c.ints(&per), c.ints(&total), &cursor); err != nil {
			return nil, err
		}
		f.PerKey, f.Total = int(per), int(total)
		if cursor.Valid {
			f.cursor = &cursor.String
		}
		flows = append(flows, f)
	}
	return flows, rows.Err()
}

// claimUnder reserves up to n jobs of queue under limit f, with f
// locked: first expired reservations (their holders died), then, reading
// the waiting jobs key by key from f's cursor, each key's earliest due
// jobs, as many as fit beside the key's jobs running, and no more in all
// than f's total leaves room for. The cursor moves to the last key read,
// so the next claim starts after it: every key gets its turn however many
// jobs the keys before it hold.
func (c *common) claimUnder(ctx context.Context, tx sqldb.Tx, f lockedFlow, queue string, now, retryAfter int64, n int, fs flowSpelling) ([]JobRow, error) {
	running, total, err := c.runningByKey(ctx, tx, f.Name, now, retryAfter, fs)
	if err != nil {
		return nil, err
	}
	if f.Total > 0 {
		n = min(n, f.Total-total)
	}
	if n <= 0 {
		return nil, nil
	}
	room := func(key string) int { return f.PerKey - running[key] }
	var take []int64

	expired, err := tx.Query(ctx, c.rebind("SELECT id, flow_key FROM "+c.jobs+" WHERE flow_name = ? AND "+inQueue("")+" AND "+fs.at+" > "+parked+
		" AND "+fs.at+" <= "+parked+" + ? - ? ORDER BY "+fs.at+" LIMIT ?"), f.Name, queue, now, retryAfter, n)
	err = scanIDKeys(expired, err, c.ints, func(id int64, key string) {
		if len(take) < n && room(key) > 0 {
			take = append(take, id)
			running[key]++
		}
	})
	if err != nil {
		return nil, err
	}

	// The waiting jobs key by key from the cursor, round to it again: of
	// each key, the first due ones that fit.
	var last *string
	visit := func(rows []waitingJob) (full bool) {
		for _, r := range rows {
			if len(take) >= n {
				return true
			}
			last = &r.key
			if r.availableAt <= now && room(r.key) > 0 {
				take = append(take, r.id)
				running[r.key]++
			}
		}
		return len(take) >= n
	}
	var waiting []waitingJob
	if f.cursor == nil {
		waiting, err = c.waitingJobs(ctx, tx, f.Name, queue, "flow_key >= ?", "", n, fs)
	} else {
		waiting, err = c.waitingJobs(ctx, tx, f.Name, queue, "flow_key > ?", *f.cursor, n, fs)
	}
	if err != nil {
		return nil, err
	}
	if !visit(waiting) && len(waiting) < flowScan(n) && f.cursor != nil {
		if waiting, err = c.waitingJobs(ctx, tx, f.Name, queue, "flow_key <= ?", *f.cursor, n, fs); err != nil {
			return nil, err
		}
		visit(waiting)
	}
	if last != nil {
		if _, err := tx.Exec(ctx, c.rebind("UPDATE "+c.flowTable()+" SET key_cursor = ? WHERE name = ?"), *last, f.Name); err != nil {
			return nil, err
		}
	}
	if len(take) == 0 {
		return nil, nil
	}
	in := sqldb.Ints(take)
	if _, err := tx.Exec(ctx, c.rebind("UPDATE "+c.jobs+" SET "+flowClaimSet+", reserved_at = "+parked+" + ? WHERE id IN ("+in+") AND flow_name = ? AND "+flowDue(fs.at, "?")),
		now, f.Name, now, now, retryAfter); err != nil {
		return nil, err
	}
	rs, err := tx.Query(ctx, c.rebind("SELECT id, payload, attempts, reserved_at - "+parked+", available_at, created_at, reservation_token FROM "+c.jobs+
		" WHERE id IN ("+in+") AND reserved_at = "+parked+" + ? ORDER BY available_at, id"), now)
	rows, err := appendClaimed(nil, rs, err, queue, c.ints)
	if err != nil {
		return nil, fmt.Errorf("read the jobs claimed under limit %q: %w", f.Name, err)
	}
	for i := range rows {
		rows[i].Limited = true
	}
	return rows, nil
}

// runningByKey counts the jobs of limit name running, by key and in all.
func (c *common) runningByKey(ctx context.Context, tx sqldb.Tx, name string, now, retryAfter int64, fs flowSpelling) (map[string]int, int, error) {
	rs, err := tx.Query(ctx, c.rebind("SELECT COUNT(*), flow_key FROM "+c.jobs+" WHERE flow_name = ? AND "+fs.at+" > "+parked+" + ? - ? GROUP BY flow_key"),
		name, now, retryAfter)
	running, total := map[string]int{}, 0
	err = scanIDKeys(rs, err, c.ints, func(count int64, key string) {
		running[key] = int(count)
		total += int(count)
	})
	return running, total, err
}

// waitingJob is a job waiting under a limit, as the claim reads it.
type waitingJob struct {
	id, availableAt int64
	key             string
}

// waitingJobs reads up to flowScan(n) jobs of queue parked under limit name
// whose key passes keyTest (on from), key by key, each key's in claim
// order: one range of the limit's index.
func (c *common) waitingJobs(ctx context.Context, tx sqldb.Tx, name, queue, keyTest, from string, n int, fs flowSpelling) ([]waitingJob, error) {
	rs, err := tx.Query(ctx, c.rebind("SELECT id, available_at, flow_key FROM "+c.jobs+" WHERE flow_name = ? AND "+fs.at+" = "+parked+
		" AND "+keyTest+" AND "+inQueue("")+" ORDER BY flow_key, available_at, id LIMIT "+strconv.Itoa(flowScan(n))), name, from, queue)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []waitingJob
	for rs.Next() {
		var w waitingJob
		if err := rs.Scan(c.ints(&w.id), c.ints(&w.availableAt), &w.key); err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, rs.Err()
}

// scanIDKeys hands each row's integer and key to fn.
func scanIDKeys(rows sqldb.Rows, err error, ints intDest, fn func(int64, string)) error {
	if err != nil {
		return err
	}
	defer rows.Close()
	var (
		n   int64
		key string
	)
	for rows.Next() {
		if err := rows.Scan(ints(&n), &key); err != nil {
			return err
		}
		fn(n, key)
	}
	return rows.Err()
}
