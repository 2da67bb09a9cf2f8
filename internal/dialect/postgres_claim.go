package dialect

import (
	"context"
	"fmt"
	"time"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// The PostgreSQL claim reads ready rows from the partial index (queue,
// available_at, id) WHERE reserved_at IS NULL. Claiming a row writes a new
// version of it that the index does not hold, and the old version's entry
// stays in the index, pointing at a dead row, until VACUUM removes it. So
// the head of a queue's range is every row claimed since the last vacuum:
// a claim that starts there walks past all of them (their entries once
// marked dead cost an index read each, the rest a heap visit too), and
// the walk grows with every job done. On a burn-down of 2,000,000 jobs
// with no vacuum in between, the ready arm of a claim of 1,000 read
// 1,000–5,000 buffers in the first half minute and 10,000–14,000 two
// minutes later, and the expired arm walked the reserved-rows index the
// same way (entries of finished jobs reserved longer than retry_after ago).
//
// So a Queue keeps a cursor per queue (claim_cursor.go): the (available_at,
// id) its claims have taken up to. A claim takes ready rows past the
// cursor (claimFrom: the row comparison starts the index scan there) and
// moves the cursor to the last row it took. It looks from the start of the
// queue — the full claim, expired reservations first — when the cursor is
// new, at least every lookEvery, when a row may have been put back behind
// the cursor by this Queue (a release due at once, a give-back), and for
// the rest of a claim that came back short (always when it came back
// empty, so an empty claim still means an empty queue; otherwise while
// looks took less than lookShare of the time). Rows behind the cursor —
// a push whose transaction committed after later rows were claimed, a row
// another process put back or held locked while the claim passed it —
// therefore wait at most lookEvery under full load, and expired
// reservations are found as often.

// pgClaimReturning is what both claims return (claimColumns' order).
const pgClaimReturning = "jobs.id, jobs.payload, jobs.attempts, jobs.reserved_at, jobs.available_at, jobs.created_at, jobs.reservation_token"

// pgReadyFrom is the ready arm from a cursor: due, unreserved rows past
// (available_at, id) = (?, ?), in claim order; params: queue, the
// cursor's available_at and id, n.
func pgReadyFrom(now string) string {
	return "queue = ? AND reserved_at IS NULL AND available_at <= " + now + " AND (available_at, id) > (?, ?) ORDER BY available_at, id LIMIT ?"
}

// readyMarks collects the claim's last column, one bool a row: whether
// the ready arm took the row (false: an expired reservation).
type readyMarks struct{ marks *[]bool }

func (r readyMarks) Scan(src any) error {
	b, ok := src.(bool)
	if !ok {
		return fmt.Errorf("dbqueue: claim returned %T for the ready mark", src)
	}
	*r.marks = append(*r.marks, b)
	return nil
}

func (p *postgres) Claim(ctx context.Context, db sqldb.DB, queue string, retryAfter int64, n int) ([]JobRow, error) {
	cur := p.cursor(queue)
	var rows []JobRow
	if !cur.lookNow(time.Now(), false, false) {
		av, id := cur.position()
		err := claimWithIndexes(ctx, db, func(rs sqldb.Rows, err error) error {
			rows, err = collectClaim(rs, err, queue, n)
			return err
		}, p.claimFrom, queue, av, id, n)
		if err != nil {
			return nil, err
		}
		if len(rows) > 0 {
			av, id := lastInClaimOrder(rows)
			cur.moveTo(av, id)
		}
		if len(rows) == n || !cur.lookNow(time.Now(), true, len(rows) == 0) {
			return rows, nil
		}
	}
	start := time.Now()
	want := n - len(rows)
	var (
		marks []bool
		more  []JobRow
	)
	err := claimWithIndexes(ctx, db, func(rs sqldb.Rows, err error) error {
		marks = marks[:0]
		more, err = collectClaim(rs, err, queue, want, readyMarks{&marks})
		return err
	}, p.claim, queue, retryAfter, want, queue, want, want)
	if err != nil {
		if len(rows) > 0 {
			// The rows from the cursor are claimed and committed: hand
			// them out; the next claim looks again.
			cur.looked(0, true)
			return rows, nil
		}
		return nil, err
	}
	if len(marks) != len(more) {
		return nil, fmt.Errorf("dbqueue: claim returned %d ready marks for %d rows", len(marks), len(more))
	}
	ready := more[:0:0]
	for i, r := range more {
		if marks[i] {
			ready = append(ready, r)
		}
	}
	again := false
	if len(ready) > 0 {
		// A full look that took rows behind the cursor may have left more
		// there: the next claim looks too.
		first := ready[0]
		for _, r := range ready[1:] {
			if r.AvailableAt < first.AvailableAt || r.AvailableAt == first.AvailableAt && r.ID < first.ID {
				first = r
			}
		}
		again = len(more) == want && cur.behind(first.AvailableAt, first.ID)
		cur.moveTo(lastInClaimOrder(ready))
	}
	cur.looked(time.Since(start), again)
	if rows == nil {
		return more, nil
	}
	return append(rows, more...), nil
}

// PostgresClaimPlanner keeps a claim's plan on its indexes: no sequential or
// bitmap scan, no hash or merge join. Under churn the jobs table and its
// indexes are mostly empty pages, and after an ANALYZE that caught few live
// rows the planner prices an index scan at several pages a row; when a
// backlog then fills the free space, it read the whole table and sorted it
// for each claim of 1,000 (a seq scan or a bitmap heap scan, then a sort;
// or a merge join walking the primary key). In an hour's soak at 50,000
// jobs/s that took claims from milliseconds to 25 seconds, and the queue
// stopped for a minute (docs/measurements/churn.md, "One stall, and its cause";
// TestPostgresClaimStaysOnIndexes rebuilds the state). The settings are
// the transaction's own (set_config's is_local), so nothing outlives the
// claim, and a transaction pooler sees one transaction; on a pgx pool the
// settings and the claim go as one batch, in the claim's one round trip.
const PostgresClaimPlanner = "SELECT set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true), " +
	"set_config('enable_mergejoin', 'off', true), set_config('enable_hashjoin', 'off', true)"

// claimWithIndexes runs a claim statement after PostgresClaimPlanner in one
// transaction and hands its rows to collect: as one batch where db can
// pipeline (a pgx pool: one round trip, as the bare statement took), else
// in an explicit transaction (database/sql).
func claimWithIndexes(ctx context.Context, db sqldb.DB, collect func(sqldb.Rows, error) error, query string, args ...any) error {
	if p, ok := db.(sqldb.Pipeliner); ok {
		rs, err := p.QueryAfter(ctx, PostgresClaimPlanner, query, args...)
		return collect(rs, err)
	}
	return sqldb.InTx(ctx, db, sqldb.TxOptions{}, func(tx sqldb.Tx) error {
		if _, err := tx.Exec(ctx, PostgresClaimPlanner); err != nil {
			return err
		}
		rs, err := tx.Query(ctx, query, args...)
		return collect(rs, err)
	})
}

// lastInClaimOrder is the greatest (available_at, id) among rows.
func lastInClaimOrder(rows []JobRow) (av, id int64) {
	av, id = rows[0].AvailableAt, rows[0].ID
	for _, r := range rows[1:] {
		if r.AvailableAt > av || r.AvailableAt == av && r.ID > id {
			av, id = r.AvailableAt, r.ID
		}
	}
	return av, id
}

// GiveBack puts a row back where the cursor may have passed it: the next
// claims look from the start.
func (p *postgres) GiveBack(ctx context.Context, db sqldb.DB, h Held) (bool, error) {
	return p.putBack(p.common.GiveBack(ctx, db, h))
}

// pgClaimQueues is ClaimQueues' statement (claim_queues.go). Params: the
// names (text[]), retryAfter, then n four times: each arm's limit, the
// queue's, the claim's. FOR UPDATE cannot sit under a UNION, so each arm
// locks in a subquery of its own; the LATERAL join runs the arms queue
// by queue in the names' order (the function scan's ordinality is its
// order, so ORDER BY q.ord sorts nothing) and the LIMIT stops it at the
// queue that fills the claim.
func pgClaimQueues(c *common) string {
	expired, ready := c.queueArms("", "q.name")
	return sqldb.Rebind(`WITH due AS (SELECT q.ord, c.id FROM unnest(?::text[]) WITH ORDINALITY AS q(name, ord) CROSS JOIN LATERAL (
  SELECT id FROM (SELECT id FROM ` + c.jobs + ` WHERE ` + expired + ` ORDER BY reserved_at LIMIT ? FOR UPDATE SKIP LOCKED) AS e
  UNION ALL
  SELECT id FROM (SELECT id FROM ` + c.jobs + ` WHERE ` + ready + ` ORDER BY available_at, id LIMIT ? FOR UPDATE SKIP LOCKED) AS r
  LIMIT ?) AS c
ORDER BY q.ord LIMIT ?)
UPDATE ` + c.jobs + ` AS jobs SET ` + claimSet + `, reserved_at = ` + c.now + `
FROM due WHERE jobs.id = due.id
RETURNING ` + pgClaimReturning + `, due.ord`)
}

// ClaimQueues claims from many queues in one statement, on the claim's
// indexes (PostgresClaimPlanner).
func (p *postgres) ClaimQueues(ctx context.Context, db sqldb.DB, queues []string, retryAfter int64, n int) ([]JobRow, error) {
	if len(queues) == 0 {
		return nil, nil
	}
	var rows []JobRow
	err := claimWithIndexes(ctx, db, func(rs sqldb.Rows, err error) error {
		rows, err = collectQueuesByOrd(rs, err, queues, n)
		return err
	}, p.claimQueues, queues, retryAfter, n, n, n, n)
	return rows, err
}
