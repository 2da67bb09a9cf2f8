package dialect

import (
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

// sqlName is what a character set or collation name read from the server
// must look like before it goes into a statement.
var sqlName = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

// mysqlReady holds MySQL's ReadyQueues statement once built, and the
// character set and collation of the queue column it was built for
// (ClaimQueues' names are read in them too).
type mysqlReady struct {
	mu                 sync.Mutex
	query              string
	charset, collation string
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
