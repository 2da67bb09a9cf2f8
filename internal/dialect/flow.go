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
	// many as the limits let start now, earliest due first. Limits another
	// claim is counting are skipped, not waited for.
	ClaimFlow(ctx context.Context, db sqldb.DB, queue string, retryAfter int64, n int) ([]JobRow, error)
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
	// skipLocked ends a read that locks the rows it returns and skips
	// those another transaction holds ("" where a write transaction holds
	// the whole database).
	skipLocked string
	tx         sqldb.TxOptions
}

// flowDue is the predicate of a limited job a claim may take: parked and
// due, or running with a reservation that expired (its holder died).
// Params: now, now, retryAfter.
var flowDue = "((reserved_at = " + parked + " AND available_at <= ?) OR (reserved_at > " + parked + " AND reserved_at <= " + parked + " + ? - ?))"

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

// claimFlow is ClaimFlow in the spelling fs: in one transaction, lock the
// limits that have a job of queue to take (skipping those another claim
// holds), then, reading after the locks (so every claim that held them
// before has committed and is counted), take for each limit the earliest
// jobs whose keys have room, and reserve them.
func (c *common) claimFlow(ctx context.Context, db sqldb.DB, queue string, retryAfter int64, n int, fs flowSpelling) ([]JobRow, error) {
	var out []JobRow
	err := sqldb.InTx(ctx, db, fs.tx, func(tx sqldb.Tx) error {
		out = nil
		var now int64
		if err := tx.QueryRow(ctx, "SELECT "+c.now).Scan(c.ints(&now)); err != nil {
			return err
		}
		names, err := scanStrings(tx.Query(ctx, c.rebind("SELECT f.name FROM "+c.flowTable()+" f WHERE EXISTS (SELECT 1 FROM "+c.jobs+
			" WHERE flow_name = f.name AND queue = ? AND "+flowDue+")"), queue, now, now, retryAfter))
		if err != nil || len(names) == 0 {
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
			rows, err := c.claimUnder(ctx, tx, f, queue, now, retryAfter, n-len(out))
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

// lockFlows locks the limits named, in name order, skipping those
// another transaction holds, and reads their caps.
func (c *common) lockFlows(ctx context.Context, tx sqldb.Tx, names []string, fs flowSpelling) ([]Flow, error) {
	args := make([]any, len(names))
	for i, n := range names {
		args[i] = n
	}
	rows, err := tx.Query(ctx, c.rebind("SELECT name, per_key, total FROM "+c.flowTable()+" WHERE name IN ("+sqldb.List(len(names))+") ORDER BY name"+fs.skipLocked), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var flows []Flow
	for rows.Next() {
		var (
			f          Flow
			per, total int64
		)
		if err := rows.Scan(&f.Name, c.ints(&per), c.ints(&total)); err != nil {
			return nil, err
		}
		f.PerKey, f.Total = int(per), int(total)
		flows = append(flows, f)
	}
	return flows, rows.Err()
}

// claimUnder reserves up to n jobs of queue under limit f: per key, the
// earliest due jobs that fit beside those of the key running, and no more
// in all than the total leaves room for.
func (c *common) claimUnder(ctx context.Context, tx sqldb.Tx, f Flow, queue string, now, retryAfter int64, n int) ([]JobRow, error) {
	if f.Total > 0 {
		var running int64
		if err := tx.QueryRow(ctx, c.rebind("SELECT COUNT(*) FROM "+c.jobs+" WHERE flow_name = ? AND reserved_at > "+parked+" + ? - ?"),
			f.Name, now, retryAfter).Scan(c.ints(&running)); err != nil {
			return nil, err
		}
		n = min(n, f.Total-int(running))
		if n <= 0 {
			return nil, nil
		}
	}
	rs, err := tx.Query(ctx, c.rebind("SELECT c.id FROM (SELECT id, available_at, flow_key,"+
		" ROW_NUMBER() OVER (PARTITION BY flow_key ORDER BY available_at, id) AS rn"+
		" FROM "+c.jobs+" WHERE flow_name = ? AND queue = ? AND "+flowDue+") c"+
		" LEFT JOIN (SELECT flow_key, COUNT(*) AS running FROM "+c.jobs+" WHERE flow_name = ? AND reserved_at > "+parked+" + ? - ?"+
		" GROUP BY flow_key) r ON r.flow_key = c.flow_key"+
		" WHERE c.rn + COALESCE(r.running, 0) <= ? ORDER BY c.available_at, c.id LIMIT ?"),
		f.Name, queue, now, now, retryAfter, f.Name, now, retryAfter, f.PerKey, n)
	ids, err := scanInts(rs, err, c.ints)
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	in := sqldb.Ints(ids)
	if _, err := tx.Exec(ctx, c.rebind("UPDATE "+c.jobs+" SET "+flowClaimSet+", reserved_at = "+parked+" + ? WHERE id IN ("+in+") AND flow_name = ? AND "+flowDue),
		now, f.Name, now, now, retryAfter); err != nil {
		return nil, err
	}
	rs, err = tx.Query(ctx, c.rebind("SELECT id, payload, attempts, reserved_at - "+parked+", available_at, created_at, reservation_token FROM "+c.jobs+
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
