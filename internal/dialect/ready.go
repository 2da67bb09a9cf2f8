package dialect

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sync"
	"unicode/utf8"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// ReadyQueues answers, for a worker that lists many queues, which of them
// a claim would take a row from, so that it claims from those alone and
// never runs a claim statement per empty queue (see worker/ready.go).
//
// The condition is the claim's own, on the database's clock as the claim
// reads it: a row is due and unreserved (reserved_at IS NULL AND
// available_at <= now), or reserved longer ago than retryAfter
// (reserved_at <= now - retryAfter). Each name is one EXISTS probe per arm
// on the claim's indexes — PostgreSQL's and SQLite's partial indexes
// queue_ready_idx and queue_reserved_idx, MySQL's (queue, reserved_at,
// available_at) — which reads the first entry of the queue's range: a
// queue's backlog of delayed or running rows is never read. The two
// probes are scalar subqueries ORed, so that no planner turns them into a
// join (which could read every due row of the table once instead of one
// entry per name).
//
// The names travel as one parameter: a text[] on PostgreSQL, a JSON array
// unpacked by json_each on SQLite and JSON_TABLE on MySQL. A name that is
// not valid UTF-8 cannot travel in JSON unchanged; it is reported ready
// without a probe, so the caller's claim (which takes the name as is)
// decides.

// readyArms are the two probes of ReadyQueues on PostgreSQL and SQLite,
// for a name in the expression name; the expired arm takes retryAfter as
// its one parameter.
// Each reads the first entry of the queue's range of a claim index in
// that index's order and compares it: an EXISTS over the same condition
// let PostgreSQL and MariaDB plan a scan of the table, costed as if a
// match came early, when a large queue held no due row at all.
func (c *common) readyArms(name string) (ready, expired string) {
	ready = "(SELECT available_at FROM " + c.jobs + " WHERE queue = " + name + " AND reserved_at IS NULL ORDER BY available_at LIMIT 1) <= " + c.now
	expired = "(SELECT reserved_at FROM " + c.jobs + " WHERE queue = " + name + " AND reserved_at IS NOT NULL ORDER BY reserved_at LIMIT 1) <= " + c.now + " - ?"
	return ready, expired
}

// readyJSON splits names into those that go to the database as a JSON
// array and those that cannot (not valid UTF-8), which are ready as far as
// ReadyQueues can tell.
func readyJSON(names []string) (string, []string, error) {
	var odd []string
	send := names
	for i, n := range names {
		if !utf8.ValidString(n) {
			if odd == nil {
				send = append([]string(nil), names[:i]...)
			}
			odd = append(odd, n)
			continue
		}
		if odd != nil {
			send = append(send, n)
		}
	}
	b, err := json.Marshal(send)
	if err != nil {
		return "", nil, fmt.Errorf("dbqueue: encode queue names: %w", err)
	}
	return string(b), odd, nil
}

// scanNames appends the names rows holds to into.
func scanNames(into []string, rows sqldb.Rows, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		into = append(into, name)
	}
	return into, rows.Err()
}

func (p *postgres) ReadyQueues(ctx context.Context, ex sqldb.Execer, queues []string, retryAfter int64) ([]string, error) {
	if len(queues) == 0 {
		return nil, nil
	}
	rows, err := ex.Query(ctx, p.readyQueues, queues, retryAfter)
	return scanNames(nil, rows, err)
}

func (s *sqlite) ReadyQueues(ctx context.Context, ex sqldb.Execer, queues []string, retryAfter int64) ([]string, error) {
	if len(queues) == 0 {
		return nil, nil
	}
	list, odd, err := readyJSON(queues)
	if err != nil {
		return nil, err
	}
	rows, err := ex.Query(ctx, s.readyQueues, list, retryAfter)
	return scanNames(odd, rows, err)
}

// ReadyQueues on MySQL declares JSON_TABLE's column with the collation of
// jobs.queue, read from information_schema on the first call: two columns
// of different collations do not compare through the index (and under the
// session's case-insensitive collation "Mail" would answer for "mail").
func (m *mysql) ReadyQueues(ctx context.Context, ex sqldb.Execer, queues []string, retryAfter int64) ([]string, error) {
	if len(queues) == 0 {
		return nil, nil
	}
	query, err := m.readyStatement(ctx, ex)
	if err != nil {
		return nil, err
	}
	list, odd, err := readyJSON(queues)
	if err != nil {
		return nil, err
	}
	rows, err := ex.Query(ctx, query, list, retryAfter)
	return scanNames(odd, rows, err)
}

// sqlName is what a character set or collation name read from the server
// must look like before it goes into a statement.
var sqlName = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

// mysqlReady holds MySQL's ReadyQueues statement once built.
type mysqlReady struct {
	mu    sync.Mutex
	query string
}

func (m *mysql) readyStatement(ctx context.Context, ex sqldb.Execer) (string, error) {
	m.ready.mu.Lock()
	defer m.ready.mu.Unlock()
	if m.ready.query != "" {
		return m.ready.query, nil
	}
	var charset, collation string
	err := ex.QueryRow(ctx, "SELECT character_set_name, collation_name FROM information_schema.columns"+
		" WHERE table_schema = COALESCE(NULLIF(?, ''), DATABASE()) AND table_name = ? AND column_name = 'queue'",
		m.tables.Schema, m.tables.Jobs).Scan(&charset, &collation)
	if err != nil {
		return "", fmt.Errorf("dbqueue: read the collation of %s.queue (run migrate up if the table is missing): %w", m.jobs, err)
	}
	if !sqlName.MatchString(charset) || !sqlName.MatchString(collation) {
		return "", fmt.Errorf("dbqueue: %s.queue has character set %q and collation %q, which are not names", m.jobs, charset, collation)
	}
	m.ready.query = m.readyQuery(charset, collation)
	return m.ready.query, nil
}

// readyQuery is ReadyQueues' statement for a queue column of charset and
// collation. MySQL's one claim index, (queue, available_at), cannot tell
// reserved rows from ready ones, so its probe is the claim's look from the
// start of the queue (fromStart) stopped at the first row: it reads past
// the queue's rows in flight, never its delayed ones.
func (m *mysql) readyQuery(charset, collation string) string {
	return "SELECT q.name FROM JSON_TABLE(?, '$[*]' COLUMNS (name VARCHAR(255) CHARACTER SET " + charset + " COLLATE " + collation +
		" PATH '$')) AS q WHERE (SELECT 1 FROM " + m.jobs + " FORCE INDEX (" + m.tables.ClaimIndex() + ") WHERE queue = q.name AND available_at <= " + m.now +
		" AND (reserved_at IS NULL OR reserved_at <= " + m.now + " - ?) LIMIT 1) IS NOT NULL"
}

// ReadyText is ReadyQueues' statement on d (MySQL's for a queue column of
// utf8mb4_nopad_bin), for the root package's plan tests.
func ReadyText(d Dialect) string {
	switch d := d.(type) {
	case *postgres:
		return d.readyQueues
	case *sqlite:
		return d.readyQueues
	case *mysql:
		return d.readyQuery("utf8mb4", "utf8mb4_nopad_bin")
	}
	return ""
}
