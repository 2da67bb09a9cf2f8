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
	// at is the column the limited claim reads reserved_at from: the
	// column itself, or one that mirrors it on limited rows only (for a
	// database without partial indexes).
	at string
}

// flowDue is the predicate of a limited job a claim may take, on column
// at (flowSpelling.at): parked and due, or running with a reservation that
// expired (its holder died). Params: now, now, retryAfter.
func flowDue(at string) string {
	return "((" + at + " = " + parked + " AND available_at <= ?) OR (" + at + " > " + parked + " AND " + at + " <= " + parked + " + ? - ?))"
}

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

// flowVisits bounds the keys one limited claim visits, and flowKeysAtOnce
// those one statement finds (MySQL stops a recursive CTE at 1,000 rounds
// by default): keys past the bound get their turn at the next claims.
const (
	flowVisits      = 2 * maxClaim
	flowKeysAtOnce  = 1000
	flowHeadsAtOnce = 100 // keys whose first jobs one statement reads
)

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
func (c *common) claimFlow(ctx context.Context, db sqldb.DB, queue string, retryAfter int64, n int, fs flowSpelling) ([]JobRow, error) {
	var out []JobRow
	err := sqldb.InTx(ctx, db, fs.tx, func(tx sqldb.Tx) error {
		out = nil
		var now int64
		if err := tx.QueryRow(ctx, "SELECT "+c.now).Scan(c.ints(&now)); err != nil {
			return err
		}
		names, err := scanStrings(tx.Query(ctx, c.rebind("SELECT f.name FROM "+c.flowTable()+" f WHERE EXISTS (SELECT 1 FROM "+c.jobs+
			" WHERE flow_name = f.name AND queue = ? AND "+flowDue(fs.at)+") ORDER BY f.name"), queue, now, now, retryAfter))
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

// lockFlows locks the limits named, in name order, skipping those
// another transaction holds, and reads their caps and cursors.
func (c *common) lockFlows(ctx context.Context, tx sqldb.Tx, names []string, fs flowSpelling) ([]lockedFlow, error) {
	args := make([]any, len(names))
	for i, n := range names {
		args[i] = n
	}
	rows, err := tx.Query(ctx, c.rebind("SELECT name, per_key, total, key_cursor FROM "+c.flowTable()+" WHERE name IN ("+sqldb.List(len(names))+") ORDER BY name"+fs.skipLocked), args...)
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
// locked: first expired reservations (their holders died), then, visiting
// the keys with jobs waiting in turn from f's cursor, each key's earliest
// due jobs, as many as fit beside the key's jobs running, and no more in
// all than f's total leaves room for. The cursor moves to the last key
// visited, so the next claim starts after it: every key gets its turn
// however many jobs the keys before it hold.
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

	expired, err := tx.Query(ctx, c.rebind("SELECT id, flow_key FROM "+c.jobs+" WHERE flow_name = ? AND queue = ? AND "+fs.at+" > "+parked+
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

	keys, last, err := c.visitKeys(ctx, tx, f, queue, fs)
	if err != nil {
		return nil, err
	}
	// The keys with room, each asked for as many jobs as fit, until the
	// claim could be full.
	var (
		ask   []string
		rooms []int
		asked = len(take)
	)
	for i, k := range keys {
		if asked >= n {
			last = nil // the cursor stays: the claim filled before any key
			if i > 0 {
				last = &keys[i-1]
			}
			break
		}
		if r := min(room(k), n-asked); r > 0 {
			ask, rooms = append(ask, k), append(rooms, r)
			asked += r
		}
	}
	heads, err := c.keyHeads(ctx, tx, f.Name, queue, now, ask, rooms, fs)
	if err != nil {
		return nil, err
	}
	for _, k := range ask {
		for _, id := range heads[k] {
			if len(take) < n {
				take = append(take, id)
			}
		}
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
	if _, err := tx.Exec(ctx, c.rebind("UPDATE "+c.jobs+" SET "+flowClaimSet+", reserved_at = "+parked+" + ? WHERE id IN ("+in+") AND flow_name = ? AND "+flowDue(fs.at)),
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

// visitKeys lists the keys with jobs of queue parked under f, in key
// order from f's cursor round to it again, up to flowVisits of them, and
// the key the cursor moves to when the claim takes from all of them.
func (c *common) visitKeys(ctx context.Context, tx sqldb.Tx, f lockedFlow, queue string, fs flowSpelling) ([]string, *string, error) {
	var (
		keys []string
		seen = map[string]bool{}
	)
	// From past the cursor, then from the first key (>= ''), never
	// listing a key twice.
	from, op, wrapped := "", ">=", true
	if f.cursor != nil {
		from, op, wrapped = *f.cursor, ">", false
	}
	for len(keys) < flowVisits {
		want := min(flowKeysAtOnce, flowVisits-len(keys))
		got, err := scanStrings(tx.Query(ctx, c.rebind("WITH RECURSIVE k (flow_key, depth) AS ("+
			"SELECT MIN(flow_key), 1 FROM "+c.jobs+" WHERE flow_name = ? AND queue = ? AND "+fs.at+" = "+parked+" AND flow_key "+op+" ?"+
			" UNION ALL SELECT (SELECT MIN(j.flow_key) FROM "+c.jobs+" j WHERE j.flow_name = ? AND j.queue = ? AND j."+fs.at+" = "+parked+" AND j.flow_key > k.flow_key), k.depth + 1"+
			" FROM k WHERE k.flow_key IS NOT NULL AND k.depth < ?"+
			") SELECT flow_key FROM k WHERE flow_key IS NOT NULL"), f.Name, queue, from, f.Name, queue, want))
		if err != nil {
			return nil, nil, err
		}
		fresh := 0
		for _, k := range got {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
				fresh++
			}
		}
		switch {
		case len(got) == want && fresh > 0:
			from, op = got[len(got)-1], ">" // more past the last found
		case !wrapped:
			from, op, wrapped = "", ">=", true // round to the first key
		default:
			var last *string
			if len(keys) > 0 {
				last = &keys[len(keys)-1]
			}
			return keys, last, nil
		}
	}
	return keys, &keys[len(keys)-1], nil
}

// keyHeads reads the first rooms[i] due parked jobs of queue of each key
// keys[i] under limit name, in claim order, flowHeadsAtOnce keys to a
// statement.
func (c *common) keyHeads(ctx context.Context, tx sqldb.Tx, name, queue string, now int64, keys []string, rooms []int, fs flowSpelling) (map[string][]int64, error) {
	heads := make(map[string][]int64, len(keys))
	for start := 0; start < len(keys); start += flowHeadsAtOnce {
		end := min(start+flowHeadsAtOnce, len(keys))
		var (
			b    strings.Builder
			args []any
		)
		for i := start; i < end; i++ {
			if i > start {
				b.WriteString(" UNION ALL ")
			}
			fmt.Fprintf(&b, "SELECT id, flow_key FROM (SELECT id, flow_key FROM %s WHERE flow_name = ? AND queue = ? AND %s = %s AND flow_key = ? AND available_at <= ?"+
				" ORDER BY available_at, id LIMIT %d) h%d", c.jobs, fs.at, parked, rooms[i], i-start)
			args = append(args, name, queue, keys[i], now)
		}
		rs, err := tx.Query(ctx, c.rebind(b.String()), args...)
		err = scanIDKeys(rs, err, c.ints, func(id int64, key string) { heads[key] = append(heads[key], id) })
		if err != nil {
			return nil, err
		}
	}
	return heads, nil
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
