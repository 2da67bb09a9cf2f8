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

// parkedOffset is a limited row's reserved_at - Parked, written as the
// limit's index holds it (migration 00014) on the databases that index
// an expression: 0 while the job waits, its claim's time while it runs.
// COALESCE, though a limited row's reserved_at is never NULL: a test of
// reserved_at itself implies reserved_at IS NOT NULL, the predicate of
// the plain claim's (queue, reserved_at) index, and a planner whose
// statistics predate the limited rows priced a whole scan of that index
// at nothing and read every waiting job for each part of a claim.
var parkedOffset = "(COALESCE(reserved_at, 0) - " + parked + ")"

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
	// at is what the limited claim reads of a limited row's reserved_at:
	// reserved_at - Parked (0: waiting; else the claim's time), as the
	// limit's index holds it, an expression or a generated column. Not
	// reserved_at itself: the plain claim's index on (queue, reserved_at)
	// would serve that too, and a planner that misjudged the limited rows
	// chose it, reading every waiting job for each part of a claim.
	at string
	// planner, when set, is run first in the claim's transaction, and
	// query runs the statement before it (where a planner with stale
	// statistics would read the whole table: see PostgresClaimPlanner).
	planner string
	query   func(ctx context.Context, db sqldb.DB, collect func(sqldb.Rows, error) error, query string, args ...any) error
	// oneStatement: the database runs UPDATE in a WITH clause, so the
	// choice, the claim and the cursor's move are one statement.
	oneStatement bool
	// rowCompare: the database reads an index range from a row
	// comparison, (flow_key, available_at, id) > (?, ?, ?); elsewhere it
	// is spelled out column by column.
	rowCompare bool
	// limitSubquery: LIMIT takes a scalar subquery, so the read round
	// from the first job stops at once when the read past the cursor
	// found enough due jobs; elsewhere it reads flowScan(n) always.
	limitSubquery bool
}

// past is the test that a job comes after pos in a limit's claim order
// (after), or not (!after), with its arguments added by p.
func (fs flowSpelling) past(p func(any) string, pos flowPos, after bool) string {
	if fs.rowCompare {
		op := "<="
		if after {
			op = ">"
		}
		return "(flow_key, available_at, id) " + op + " (" + p(pos.key) + ", " + p(pos.av) + ", " + p(pos.id) + ")"
	}
	t := "(flow_key > " + p(pos.key) + " OR (flow_key = " + p(pos.key) + " AND (available_at > " + p(pos.av) +
		" OR (available_at = " + p(pos.av) + " AND id > " + p(pos.id) + "))))"
	if after {
		return t
	}
	return "NOT " + t
}

// flowStill is the claim's last check that a job it chose is still to
// take (parked and due, or its reservation expired at the cutoff), in a
// form no index serves, so the claim reads its jobs by id. Params: now,
// now - retryAfter.
var flowStill = "CASE WHEN flow_name IS NOT NULL AND (reserved_at = " + parked + " AND available_at <= ? OR reserved_at > " + parked +
	" AND reserved_at <= " + parked + " + ?) THEN 1 ELSE 0 END = 1"

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
// last job read.
func flowScan(n int) int { return max(4*n, 100) }

// lockedFlow is a limit a claim holds: its caps and cursor.
type lockedFlow struct {
	Flow
	cursor *flowPos
}

// flowPos is a waiting job's place in a limit's claim order: its key,
// then available_at, then id. A limit's cursor is the place of the last
// job a claim read: the next claim reads on from there, so every key gets
// its turn however many jobs the keys before it hold, and a claim does
// not walk again the index entries of the jobs claimed before it (on
// PostgreSQL they stay, dead, until VACUUM).
type flowPos struct {
	key    string
	av, id int64
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
	// Scalar subqueries with LIMIT 1, not EXISTS: PostgreSQL turned EXISTS
	// into one hashed read of every waiting job's limit (10 ms for 20,000
	// jobs, at every claim).
	query := c.rebind("SELECT f.name FROM " + c.flowTable() + " f WHERE (SELECT 1 FROM " + c.jobs +
		" WHERE flow_name = f.name AND " + fs.at + " = 0 AND available_at <= " + c.now + " AND " + inQueue("") + " LIMIT 1) IS NOT NULL" +
		" OR (SELECT 1 FROM " + c.jobs + " WHERE flow_name = f.name AND " + fs.at + " > 0 AND " + fs.at + " <= " + c.now + " - ? AND " + inQueue("") + " LIMIT 1) IS NOT NULL" +
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
		flows, now, err := c.lockFlows(ctx, tx, names, fs)
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
// and cursors, and the database's time. It waits for a limit another
// claim holds (for that claim's two statements): skipping it left the
// processes that skipped with an empty claim, and so idle until their
// next poll, while the limit had room.
func (c *common) lockFlows(ctx context.Context, tx sqldb.Tx, names []string, fs flowSpelling) ([]lockedFlow, int64, error) {
	args := make([]any, len(names))
	for i, n := range names {
		args[i] = n
	}
	rows, err := tx.Query(ctx, c.rebind("SELECT name, per_key, total, key_cursor, cursor_av, cursor_id, "+c.now+" FROM "+c.flowTable()+
		" WHERE name IN ("+sqldb.List(len(names))+") ORDER BY name"+fs.lock), args...)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	var (
		flows []lockedFlow
		now   int64
	)
	for rows.Next() {
		var (
			f          lockedFlow
			per, total int64
			key        sql.NullString
			av, id     sql.NullInt64
		)
		if err := rows.Scan(&f.Name, c.ints(&per), c.ints(&total), &key, &av, &id, c.ints(&now)); err != nil {
			return nil, 0, err
		}
		f.PerKey, f.Total = int(per), int(total)
		if key.Valid && av.Valid && id.Valid {
			f.cursor = &flowPos{key.String, av.Int64, id.Int64}
		}
		flows = append(flows, f)
	}
	return flows, now, rows.Err()
}

// flowPick is the WITH clause that chooses what a claim of up to n jobs
// of queue under the locked limit f takes, and the arguments of its
// placeholders, in order. Its tables:
//
//	run   the limit's jobs running, by key (claimed less than retryAfter
//	      ago, in any queue);
//	scan  candidates in claim order: expired reservations of queue (part
//	      0), then the jobs waiting, key by key past f's cursor (part 1)
//	      and round from the first up to it (part 2), flowScan(n) of each;
//	fit   those due whose key has room beside its jobs running, numbered;
//	lim   how many the total lets start (n when it has no total);
//	ok    the first lim of fit: the jobs to claim;
//	last  the place the cursor moves to: of the last job read before the
//	      claim filled, or of the last job read; no row (it stays) when
//	      the total is full or only expired reservations were taken.
func (c *common) flowPick(fs flowSpelling, f lockedFlow, queue string, now, retryAfter int64, n int) (string, []any) {
	var args []any
	p := func(v any) string { args = append(args, v); return "?" }
	at := fs.at
	m := flowScan(n)
	// after and round read the waiting jobs past the cursor, then from
	// the first up to it; with no cursor, after reads from the first and
	// round reads nothing.
	waiting := func(part string, after bool, limit func() string) string {
		where := "flow_name = " + p(f.Name) + " AND " + at + " = 0"
		switch {
		case f.cursor != nil:
			where += " AND " + fs.past(p, *f.cursor, after)
		case !after:
			where += " AND 1 = 0"
		}
		return "SELECT id, flow_key, " + part + " AS part, available_at AS o1, id AS o2 FROM " + c.jobs + " WHERE " + where +
			" AND CASE WHEN queue = " + p(queue) + " THEN 1 ELSE 0 END = 1 ORDER BY flow_key, available_at, id LIMIT " + limit()
	}
	run := "SELECT flow_key, COUNT(*) AS c FROM " + c.jobs + " WHERE flow_name = " + p(f.Name) + " AND " + at + " > " + p(now-retryAfter) + " GROUP BY flow_key"
	exp := "SELECT id, flow_key, 0 AS part, " + at + " AS o1, id AS o2 FROM " + c.jobs + " WHERE flow_name = " + p(f.Name) +
		" AND " + at + " > 0 AND " + at + " <= " + p(now-retryAfter) +
		" AND CASE WHEN queue = " + p(queue) + " THEN 1 ELSE 0 END = 1 ORDER BY " + at + " LIMIT " + p(n)
	scanLimit := func() string { return p(m) }
	after := waiting("1", true, scanLimit)
	roundLimit := scanLimit
	if fs.limitSubquery {
		// On PostgreSQL the head of a limit's waiting jobs is the index
		// entries of every job claimed since the last VACUUM: read it
		// only when the jobs past the cursor were not enough.
		roundLimit = func() string {
			return "(SELECT CASE WHEN COUNT(*) >= " + p(m) + " THEN 0 ELSE " + p(m) + " END FROM after WHERE o1 <= " + p(now) + ")"
		}
	}
	round := waiting("2", false, roundLimit)
	due := "s.part = 0 OR s.o1 <= " + p(now)
	due2 := "s.part = 0 OR s.o1 <= " + p(now)
	due3 := "s.part = 0 OR s.o1 <= " + p(now)
	ranked := "SELECT s.id, s.flow_key, s.part, s.o1, s.o2, ROW_NUMBER() OVER (ORDER BY s.part, CASE WHEN s.part = 0 THEN s.o1 ELSE 0 END, s.flow_key, s.o1, s.o2) AS pos," +
		" CASE WHEN " + due + " THEN ROW_NUMBER() OVER (PARTITION BY s.flow_key, CASE WHEN " + due2 + " THEN 1 ELSE 0 END ORDER BY s.part, s.o1, s.o2) END AS rk," +
		" CASE WHEN " + due3 + " THEN 1 ELSE 0 END AS due FROM scan s"
	fit := "SELECT r.id, r.flow_key, r.part, r.o1, r.o2, r.pos, ROW_NUMBER() OVER (ORDER BY r.pos) AS fpos FROM ranked r LEFT JOIN run ON run.flow_key = r.flow_key" +
		" WHERE r.due = 1 AND r.rk + COALESCE(run.c, 0) <= " + p(f.PerKey)
	left := p(f.Total) + " - COALESCE((SELECT SUM(c) FROM run), 0)"
	lim := "SELECT CASE WHEN " + p(f.Total) + " > 0 AND " + left + " < " + p(n) + " THEN " + p(f.Total) + " - COALESCE((SELECT SUM(c) FROM run), 0) ELSE " + p(n) + " END AS n"
	ok := "SELECT fit.id, fit.flow_key, fit.part, fit.o1, fit.o2, fit.pos FROM fit, lim WHERE fit.fpos <= lim.n"
	last := "SELECT x.k, x.av, x.id FROM (SELECT flow_key AS k, o1 AS av, o2 AS id, pos, 1 AS src FROM ok WHERE part > 0" +
		" UNION ALL SELECT flow_key, o1, o2, pos, 2 FROM ranked WHERE part > 0) x" +
		" WHERE (SELECT n FROM lim) > 0 AND x.src = CASE WHEN (SELECT COUNT(*) FROM ok) >= (SELECT n FROM lim) THEN 1 ELSE 2 END" +
		" ORDER BY x.pos DESC LIMIT 1"
	return "WITH run AS (" + run + "), exp AS (" + exp + "), after AS (" + after + "), round AS (" + round + ")," +
		" scan AS (SELECT * FROM exp UNION ALL SELECT * FROM after UNION ALL SELECT * FROM round)," +
		" ranked AS (" + ranked + "), fit AS (" + fit + "), lim AS (" + lim + "), ok AS (" + ok + "), last AS (" + last + ")", args
}

// claimUnder reserves up to n jobs of queue under limit f, with f locked
// and now the database's time: the jobs flowPick chooses. Where the
// database runs data-modifying WITH clauses (fs.oneStatement) the choice,
// the claim and the cursor's move are one statement; elsewhere the choice
// is one, then the claim, the cursor and the claimed rows.
func (c *common) claimUnder(ctx context.Context, tx sqldb.Tx, f lockedFlow, queue string, now, retryAfter int64, n int, fs flowSpelling) ([]JobRow, error) {
	with, args := c.flowPick(fs, f, queue, now, retryAfter, n)
	returning := "id, payload, attempts, reserved_at - " + parked + ", available_at, created_at, reservation_token"
	if fs.oneStatement {
		// By id from ok alone, the state checked in a form no index
		// serves: given the limit's index too, the planner (which the
		// claim's settings keep from hash joins) read every job of the
		// limit and matched each against ok (0.5 s a claim at 20,000).
		q := with + ", upd AS (UPDATE " + c.jobs + " SET " + flowClaimSet + ", reserved_at = " + parked + " + ? WHERE id = ANY (ARRAY(SELECT id FROM ok))" +
			" AND " + flowStill + " RETURNING " + returning + ")," +
			" cur AS (UPDATE " + c.flowTable() + " SET key_cursor = last.k, cursor_av = last.av, cursor_id = last.id FROM last WHERE name = ?)" +
			" SELECT * FROM upd ORDER BY 5, 1"
		args = append(args, now, now, now-retryAfter, f.Name)
		rs, err := tx.Query(ctx, c.rebind(q), args...)
		return limitedRows(appendClaimed(nil, rs, err, queue, c.ints))
	}
	rs, err := tx.Query(ctx, c.rebind(with+" SELECT 0 AS kind, id, flow_key, 0 AS av FROM ok UNION ALL SELECT 1, id, k, av FROM last"), args...)
	if err != nil {
		return nil, err
	}
	var (
		take []int64
		last *flowPos
	)
	err = func() error {
		defer rs.Close()
		for rs.Next() {
			var (
				kind, id, av int64
				key          string
			)
			if err := rs.Scan(c.ints(&kind), c.ints(&id), &key, c.ints(&av)); err != nil {
				return err
			}
			if kind == 1 {
				last = &flowPos{key, av, id}
			} else {
				take = append(take, id)
			}
		}
		return rs.Err()
	}()
	if err != nil {
		return nil, err
	}
	if last != nil {
		if _, err := tx.Exec(ctx, c.rebind("UPDATE "+c.flowTable()+" SET key_cursor = ?, cursor_av = ?, cursor_id = ? WHERE name = ?"), last.key, last.av, last.id, f.Name); err != nil {
			return nil, err
		}
	}
	if len(take) == 0 {
		return nil, nil
	}
	in := sqldb.Ints(take)
	if _, err := tx.Exec(ctx, c.rebind("UPDATE "+c.jobs+" SET "+flowClaimSet+", reserved_at = "+parked+" + ? WHERE id IN ("+in+") AND "+flowStill),
		now, now, now-retryAfter); err != nil {
		return nil, err
	}
	rs, err = tx.Query(ctx, c.rebind("SELECT "+returning+" FROM "+c.jobs+" WHERE id IN ("+in+") AND reserved_at = "+parked+" + ? ORDER BY available_at, id"), now)
	return limitedRows(appendClaimed(nil, rs, err, queue, c.ints))
}

// limitedRows marks claimed rows as run under a limit.
func limitedRows(rows []JobRow, err error) ([]JobRow, error) {
	if err != nil {
		return nil, fmt.Errorf("claim under a concurrency limit: %w", err)
	}
	for i := range rows {
		rows[i].Limited = true
	}
	return rows, nil
}
