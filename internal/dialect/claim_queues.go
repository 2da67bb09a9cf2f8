package dialect

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// ClaimQueues is the claim of a worker that serves many small queues. A
// claim of 1,000 jobs from queues holding 10 each took a hundred claim
// statements, one per queue, each a round trip and (on SQLite) a write
// transaction of its own: at 10,000 queues of 10 jobs the worker ran at
// 0.10–0.45 of its rate over 10 queues. ClaimQueues takes the rows of all
// of them in one statement, queue after queue in the order given (the
// weights' order), each queue's rows from the head of its range in claim
// order, until the claim holds n:
//
//   - PostgreSQL joins the names (unnest WITH ORDINALITY, whose order the
//     planner knows) to a LATERAL claim of each queue, expired
//     reservations then ready rows, each arm FOR UPDATE SKIP LOCKED, under
//     one LIMIT: the nested loop stops at the queue that fills the claim.
//   - SQLite, whose write statement holds the whole database, reads the
//     names from json_each joined with CROSS JOIN (which fixes the names
//     as the outer loop) to the claim's partial indexes, expired
//     reservations of the listed queues first, then ready rows.
//   - MySQL reads candidates the same way from JSON_TABLE joined with
//     STRAIGHT_JOIN, locks them by primary key and marks them, as its
//     Claim does.
//
// There are no cursors (claim_cursor.go): a queue that holds a few jobs
// has few dead index entries at its head. A worker with few queues, or
// few of them ready, claims queue by queue with Claim and its cursors.

// queueArms are the two arms of ClaimQueues on PostgreSQL and SQLite for
// a name in the expression name, the jobs table's columns prefixed with
// t (claimArms' conditions, without their order and limit): the expired
// arm takes retryAfter as its parameter.
func (c *common) queueArms(t, name string) (expired, ready string) {
	expired = t + "queue = " + name + " AND " + t + "reserved_at IS NOT NULL AND " + t + "reserved_at <= " + c.now + " - ?"
	ready = t + "queue = " + name + " AND " + t + "reserved_at IS NULL AND " + t + "available_at <= " + c.now
	return expired, ready
}

// queueOrds collects a ClaimQueues statement's last column, one a row:
// the 1-based position of the row's queue in the names given.
type queueOrds struct{ ords *[]int64 }

func (q queueOrds) Scan(src any) error {
	var p int64
	if err := (int64Scanner{&p}).Scan(src); err != nil {
		return fmt.Errorf("dbqueue: claim's queue position: %w", err)
	}
	*q.ords = append(*q.ords, p)
	return nil
}

// queueColumn collects a ClaimQueues statement's last column where it is
// the row's queue: the name given that it equals (the caller's string,
// so a claim allocates no name per row).
type queueColumn struct {
	names map[string]string
	got   *[]string
}

func (q queueColumn) Scan(src any) error {
	var (
		name string
		ok   bool
	)
	switch v := src.(type) {
	case string:
		name, ok = q.names[v]
	case []byte:
		name, ok = q.names[string(v)]
	default:
		return fmt.Errorf("dbqueue: claim returned %T for the queue", src)
	}
	if !ok {
		return fmt.Errorf("dbqueue: claim returned a row of queue %v, which is not among those listed", src)
	}
	*q.got = append(*q.got, name)
	return nil
}

// collectQueuesByOrd reads the rows of a ClaimQueues statement whose last
// column is the queue's position, and puts them in claim order.
func collectQueuesByOrd(rs sqldb.Rows, err error, queues []string, n int) ([]JobRow, error) {
	var ords []int64
	rows, err := collectClaim(rs, err, "", n, queueOrds{&ords})
	if err != nil {
		return nil, err
	}
	if len(ords) != len(rows) {
		return nil, fmt.Errorf("dbqueue: claim returned %d queue positions for %d rows", len(ords), len(rows))
	}
	for i, o := range ords {
		if o < 1 || o > int64(len(queues)) {
			return nil, fmt.Errorf("dbqueue: claim returned queue position %d of %d", o, len(queues))
		}
		rows[i].Queue = queues[o-1]
	}
	inQueueOrder(rows, queues)
	return rows, nil
}

// collectQueuesByName reads the rows of a ClaimQueues statement whose last
// column is the queue, and puts them in claim order.
func collectQueuesByName(rs sqldb.Rows, err error, queues []string, n int) ([]JobRow, error) {
	names := make(map[string]string, len(queues))
	for _, q := range queues {
		names[q] = q
	}
	got := make([]string, 0, n)
	rows, err := collectClaim(rs, err, "", n, queueColumn{names, &got})
	if err != nil {
		return nil, err
	}
	if len(got) != len(rows) {
		return nil, fmt.Errorf("dbqueue: claim returned %d queues for %d rows", len(got), len(rows))
	}
	for i, q := range got {
		rows[i].Queue = q
	}
	inQueueOrder(rows, queues)
	return rows, nil
}

// inQueueOrder sorts a ClaimQueues result into claim order: by the
// queue's place in queues, then (available_at, id).
func inQueueOrder(rows []JobRow, queues []string) {
	if len(rows) < 2 {
		return
	}
	at := make(map[string]int, len(queues))
	for i, q := range queues {
		if _, ok := at[q]; !ok {
			at[q] = i
		}
	}
	slices.SortFunc(rows, func(a, b JobRow) int {
		return cmp.Or(cmp.Compare(at[a.Queue], at[b.Queue]), cmp.Compare(a.AvailableAt, b.AvailableAt), cmp.Compare(a.ID, b.ID))
	})
}
