package dialect

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// The MySQL claim keeps each queue's claims on (queue, available_at), an
// index a claim never changes: marking rows reserved moves no index entry,
// and purge has none to clean up. That index cannot tell reserved rows
// from ready ones, and the reserved ones — every job in flight — sit at
// the head of a queue's range. So a Queue keeps a cursor per queue, the
// (available_at, id) its claims have read up to, and reads candidates from
// there, without locks and from the index alone; the rows are then locked
// by primary key with SKIP LOCKED, their due check repeated on the row.
//
// Rows can end up behind the cursor: reservations that expire, jobs given
// back or released with no delay, jobs pushed by a transaction that
// committed after later ones were claimed, rows another claim skipped and
// then let go. A claim therefore also looks from the start of the queue —
// reading every row there through the primary key, which is what the
// cursor saves — when the cursor is new, at least every lookEvery, when the
// last look found a full batch behind the cursor, when a claim from the
// cursor comes back empty, and when it comes back short, as long as looks
// so far took less than lookShare of the time (a bucket refilled at that
// rate). A claim is short or empty however its rounds from the cursor
// ended: at the end of the ready rows, or with every row they read in
// flight with another claim. A queue that
// keeps up looks on every claim, which is cheap while few rows are in
// flight; under full load a row behind the cursor waits up to lookEvery.
//
// Measured with two claimers on MariaDB 10.11 (see docs/measurements/choices.md,
// "Choices, and what each measured"): 44 µs of server CPU per job against 69 with the index
// (queue, reserved_at, available_at) and candidates read from its start,
// and 42 for the hand-written ceiling that walks the primary key.
// candidate is a row the claim may take, in claim order.
type candidate struct{ id, av int64 }

func scanCandidates(rows sqldb.Rows, err error) ([]candidate, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var (
		cs   []candidate
		c    candidate
		dest = []any{mysqlInt(&c.id), mysqlInt(&c.av)}
	)
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		cs = append(cs, c)
	}
	return cs, rows.Err()
}

// mysqlInt scans what go-sql-driver/mysql returns for an integer column
// into an int64. database/sql would put an unsigned value (ids are bigint
// unsigned) through a string and parse it back: an allocation per column.
func mysqlInt(p *int64) any { return int64Scanner{p} }

type int64Scanner struct{ p *int64 }

func (s int64Scanner) Scan(src any) error {
	switch v := src.(type) {
	case int64:
		*s.p = v
	case uint64:
		*s.p = int64(v)
	case []byte:
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return fmt.Errorf("dbqueue: integer column holds %q: %w", v, err)
		}
		*s.p = n
	default:
		return fmt.Errorf("dbqueue: integer column holds %T", src)
	}
	return nil
}

func candidateIDs(cs []candidate) []int64 {
	ids := make([]int64, len(cs))
	for i, c := range cs {
		ids[i] = c.id
	}
	return ids
}

// mysqlLockColumns is claimColumns with whether the row is reserved (1:
// an expired reservation) in reserved_at's place: the claim sets
// reserved_at after the lock, and draws the token claimToken says.
const mysqlLockColumns = "id, payload, attempts, reserved_at IS NOT NULL, available_at, created_at, reservation_token"

// Claim reads candidates from the queue's cursor (or from its start, see
// above), locks those still due by primary key with SKIP LOCKED, and marks
// them reserved (MySQL has no UPDATE … RETURNING), all in one READ
// COMMITTED transaction.
func (m *mysql) Claim(ctx context.Context, db sqldb.DB, queue string, retryAfter int64, n int) ([]JobRow, error) {
	cur := m.cursor(queue)
	var (
		rows            []JobRow
		moved           bool // this claim moved the cursor, from (fromAV, fromID)
		fromAV, fromID  int64
		claimedAV, last int64
		back            *candidate // the first row skipped but still unreserved
	)
	err := sqldb.InTx(ctx, db, sqldb.TxOptions{ReadCommitted: true}, func(tx sqldb.Tx) error {
		rows, moved, back = claimRows(n), false, nil
		var now int64
		// take locks the candidates still due, leaving out any this claim
		// holds already: a cursor that another claim moved back can hand a
		// round rows an earlier round locked, and FOR UPDATE would return
		// them again. A candidate it could not lock that is still
		// unreserved becomes where the cursor goes back to (back).
		take := func(cs []candidate) (taken int, err error) {
			before := len(rows)
			ids := candidateIDs(cs)
			if len(rows) > 0 {
				mine := make(map[int64]bool, len(rows))
				for _, r := range rows {
					mine[r.ID] = true
				}
				ids = slices.DeleteFunc(ids, func(id int64) bool { return mine[id] })
				if len(ids) == 0 {
					return 0, nil
				}
			}
			rs, err := tx.Query(ctx, "SELECT "+mysqlLockColumns+", "+m.now+" FROM "+m.jobs+" WHERE id IN ("+sqldb.Ints(ids)+
				") AND "+m.due+" FOR UPDATE SKIP LOCKED", retryAfter)
			if rows, err = appendClaimed(rows, rs, err, queue, mysqlInt, mysqlInt(&now)); err != nil {
				return 0, err
			}
			taken = len(rows) - before
			if taken < len(cs) {
				at, err := m.firstSkipped(ctx, tx, cs, rows)
				if err != nil {
					return 0, err
				}
				back = earlier(back, at)
			}
			return taken, nil
		}
		look := cur.lookNow(time.Now(), false, false)
		if !look {
			for round := 0; round < cursorRounds && len(rows) < n; round++ {
				want := n - len(rows)
				cur.read.Lock()
				av, id := cur.position()
				cs, err := scanCandidates(tx.Query(ctx, m.fromCursor, queue, av, av, id, want))
				if err == nil && len(cs) > 0 {
					if !moved {
						fromAV, fromID, moved = av, id, true
					}
					end := cs[len(cs)-1]
					cur.moveTo(end.av, end.id)
				}
				cur.read.Unlock()
				if err != nil {
					return err
				}
				if len(cs) > 0 {
					if _, err := take(cs); err != nil {
						return err
					}
				}
				if len(cs) < want {
					break
				}
			}
			// Short whether the cursor ran out of rows or the rounds ran
			// out with every row read in flight with another claim (of
			// another Queue, or another process): either way the ready
			// rows may all be behind the cursor.
			look = len(rows) < n && cur.lookNow(time.Now(), true, len(rows) == 0)
		}
		if look {
			start := time.Now()
			var tried []int64 // rows another claim holds: look past them
			again := false
			for round := 0; round < cursorRounds && len(rows) < n; round++ {
				skip := ""
				if len(rows)+len(tried) > 0 {
					ids := tried
					for _, r := range rows {
						ids = append(ids, r.ID)
					}
					skip = "id NOT IN (" + sqldb.Ints(ids) + ") AND "
				}
				want := n - len(rows)
				cs, err := scanCandidates(tx.Query(ctx, fmt.Sprintf(m.fromStart, skip), queue, retryAfter, want))
				if err != nil {
					return err
				}
				if len(cs) == 0 {
					break
				}
				taken, err := take(cs)
				if err != nil {
					return err
				}
				end := cs[len(cs)-1]
				again = len(cs) == want && cur.behind(end.av, end.id)
				if len(cs) < want || taken == len(cs) {
					break // every candidate read, or every one taken
				}
				tried = append(tried, candidateIDs(cs)...)
			}
			cur.looked(time.Since(start), again)
		}
		if len(rows) == 0 {
			return nil
		}
		ids := make([]int64, len(rows))
		claimedAV, last = rows[0].AvailableAt, rows[0].ID
		for i, r := range rows {
			ids[i] = r.ID
			if r.AvailableAt > claimedAV || r.AvailableAt == claimedAV && r.ID > last {
				claimedAV, last = r.AvailableAt, r.ID
			}
		}
		if _, err := tx.Exec(ctx, "UPDATE "+m.jobs+" SET "+claimSet+", reserved_at = ? WHERE id IN ("+sqldb.Ints(ids)+")", now); err != nil {
			return err
		}
		for i := range rows {
			if rows[i].Attempts < MaxAttempts {
				rows[i].Attempts++
			}
			// The rows are locked: the UPDATE read what the lock read.
			rows[i].Token = claimToken(rows[i].Token, rows[i].ReservedAt != 0)
			rows[i].ReservedAt, rows[i].Reserved = now, true
		}
		return nil
	})
	if err != nil {
		// The rows were marked in a transaction that did not commit (on
		// Galera, a claim on another node may have won them at commit):
		// none of them is this claim's, and the rows it passed are read
		// again.
		if moved {
			cur.rewind(fromAV, fromID)
		}
		return nil, err
	}
	if len(rows) > 0 {
		cur.moveTo(claimedAV, last)
	}
	if back != nil {
		cur.rewind(back.av, back.id-1)
	}
	return rows, nil
}

// earlier is the earlier of two candidates in claim order (nil: none).
func earlier(a, b *candidate) *candidate {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case b.av < a.av || b.av == a.av && b.id < a.id:
		return b
	}
	return a
}

// firstSkipped is the first candidate the lock step skipped that is still
// unreserved, or nil: another transaction held its lock (a claim of
// another process, or a delete reading past it), and whether it takes
// the row is not this claim's to know, so the cursor goes back to it once
// the claim is over. Candidates that are reserved or gone were another
// claim's, and the cursor stays past them.
func (m *mysql) firstSkipped(ctx context.Context, tx sqldb.Tx, cs []candidate, locked []JobRow) (*candidate, error) {
	got := make(map[int64]bool, len(locked))
	for _, r := range locked {
		got[r.ID] = true
	}
	var missing []int64
	for _, c := range cs {
		if !got[c.id] {
			missing = append(missing, c.id)
		}
	}
	if len(missing) == 0 {
		// Every candidate is this claim's: the ones left out were rows an
		// earlier round had locked already.
		return nil, nil
	}
	still, err := scanCandidates(tx.Query(ctx, "SELECT id, available_at FROM "+m.jobs+" WHERE id IN ("+sqldb.Ints(missing)+
		") AND reserved_at IS NULL ORDER BY available_at, id LIMIT 1"))
	if err != nil || len(still) == 0 {
		return nil, err
	}
	return &still[0], nil
}

// GiveBack puts a row back where the cursor may have passed it: the next
// claims look from the start.
func (m *mysql) GiveBack(ctx context.Context, db sqldb.DB, h Held) (bool, error) {
	return m.putBack(m.common.GiveBack(ctx, db, h))
}

// ClaimQueues locks the rows of many queues in one read, the names from
// JSON_TABLE in their order (STRAIGHT_JOIN keeps them the outer loop;
// each queue's rows come from the claim index in claim order, and the
// LIMIT stops the join at the queue that fills the claim), FOR UPDATE
// SKIP LOCKED, then marks them (MySQL has no UPDATE … RETURNING), in one
// READ COMMITTED transaction. Claim reads candidates without locks and
// locks them by primary key, with per-queue cursors that keep a Queue's
// claims on disjoint ranges; across thousands of queues with no cursors,
// racing claims read the same candidates and the one that lost them came
// back short, so here the read locks: a row another claim holds is
// skipped and the read goes on to the next. It reads each queue from its
// start: a queue of a few jobs has few rows in flight to read past.
func (m *mysql) ClaimQueues(ctx context.Context, db sqldb.DB, queues []string, retryAfter int64, n int) ([]JobRow, error) {
	if len(queues) == 0 {
		return nil, nil
	}
	if _, err := m.readyStatement(ctx, db); err != nil {
		return nil, err
	}
	list, odd, err := readyJSON(queues)
	if err != nil {
		return nil, err
	}
	if len(odd) > 0 {
		return nil, fmt.Errorf("dbqueue: claim from queues %q: a name that is not valid UTF-8 cannot be listed in one claim; claim its queue alone", odd)
	}
	m.ready.mu.Lock()
	charset, collation := m.ready.charset, m.ready.collation
	m.ready.mu.Unlock()
	read := "SELECT j.id, j.payload, j.attempts, j.reserved_at IS NOT NULL, j.available_at, j.created_at, j.reservation_token, " + m.now + ", q.ord" +
		" FROM JSON_TABLE(?, '$[*]' COLUMNS (ord FOR ORDINALITY, name VARCHAR(255) CHARACTER SET " + charset + " COLLATE " + collation +
		" PATH '$')) AS q STRAIGHT_JOIN " + m.jobs + " AS j FORCE INDEX (" + m.tables.ClaimIndex() + ")" +
		" WHERE j.queue = q.name AND j.available_at <= " + m.now + " AND (j.reserved_at IS NULL OR j.reserved_at <= " + m.now + " - ?)" +
		" LIMIT ? FOR UPDATE SKIP LOCKED"
	var rows []JobRow
	err = sqldb.InTx(ctx, db, sqldb.TxOptions{ReadCommitted: true}, func(tx sqldb.Tx) error {
		var (
			now  int64
			ords []int64
		)
		rs, err := tx.Query(ctx, read, list, retryAfter, n)
		if rows, err = appendClaimed(claimRows(n), rs, err, "", mysqlInt, mysqlInt(&now), queueOrds{&ords}); err != nil {
			return err
		}
		if len(rows) == 0 {
			return nil
		}
		if len(ords) != len(rows) {
			return fmt.Errorf("dbqueue: claim read %d queue positions for %d rows", len(ords), len(rows))
		}
		ids := make([]int64, len(rows))
		for i, r := range rows {
			ids[i] = r.ID
		}
		if _, err := tx.Exec(ctx, "UPDATE "+m.jobs+" SET "+claimSet+", reserved_at = ? WHERE id IN ("+sqldb.Ints(ids)+")", now); err != nil {
			return err
		}
		for i := range rows {
			if ords[i] < 1 || ords[i] > int64(len(queues)) {
				return fmt.Errorf("dbqueue: claim read queue position %d of %d", ords[i], len(queues))
			}
			if rows[i].Attempts < MaxAttempts {
				rows[i].Attempts++
			}
			// The rows are locked: the UPDATE read what the lock read.
			rows[i].Token = claimToken(rows[i].Token, rows[i].ReservedAt != 0)
			rows[i].ReservedAt, rows[i].Reserved = now, true
			rows[i].Queue = queues[ords[i]-1]
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	inQueueOrder(rows, queues)
	return rows, nil
}
