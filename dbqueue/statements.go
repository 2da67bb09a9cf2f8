package dbqueue

import (
	"math"
	"strconv"
	"strings"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// jobColumns is what every read of a job row selects, in Job's scan order.
const jobColumns = "id, queue, payload, attempts, reserved_at, available_at, created_at, reservation_token"

// maxAttempts is the most attempts a job can count: the largest value of
// the attempts column (integer) that migrate up leaves on every dialect.
// A claim never counts past it, and a job reserved that often is failed
// instead of run (see Reserve), so no claim can overflow the column.
const maxAttempts = math.MaxInt32

// claimSet is the SET list of every claim: reserve now, count the attempt
// (never past maxAttempts), and draw a new reservation token.
var claimSet = "attempts = CASE WHEN attempts < " + strconv.Itoa(maxAttempts) + " THEN attempts + 1 ELSE attempts END, reservation_token = reservation_token + 1"

// statements is the SQL of one dialect, built once per queue.
type statements struct {
	d Dialect
	// reserve claims jobs in one statement (PostgreSQL, SQLite); params:
	// queue, retryAfter, n, queue, n, n.
	reserve string
	// reserveCandidates lists ids to claim without locking (MySQL), each
	// arm's WHERE starting with skip ("id NOT IN (…) AND " or ""); params:
	// queue, retryAfter, m, queue, m, m. reserveDue rechecks a locked row.
	reserveCandidates func(skip string) string
	reserveDue        string
	// deleteArrays deletes held reservations given as three arrays of id,
	// token and attempts (PostgreSQL).
	deleteArrays string
	// releaseArrays releases held reservations with their delays and
	// optional new payloads, given as five arrays (PostgreSQL).
	releaseArrays                      string
	deleteOne, release, releasePayload string
	failDelete, failInsert, unreserve  string
	size, clear                        string
	countJob, countFailed              string
	insertReturnsID                    bool
	// idStep is how far apart the ids of one multi-row INSERT are where
	// they are not returned (MySQL 8: auto_increment_increment).
	idStep          int64
	deleteReturning bool
}

func newStatements(d Dialect, mariaDB bool) statements {
	now := d.Now()
	s := statements{d: d}
	r := d.Rebind
	expired := "queue = ? AND reserved_at IS NOT NULL AND reserved_at <= " + now + " - ? ORDER BY reserved_at LIMIT ?"
	ready := "queue = ? AND reserved_at IS NULL AND available_at <= " + now + " ORDER BY available_at, id LIMIT ?"
	switch d {
	case Postgres:
		// FOR UPDATE cannot sit under a UNION, so each arm locks in its own
		// CTE; CTEs run on demand, so the ready arm is read only when the
		// expired arm leaves room.
		s.reserve = r(`WITH expired AS (SELECT id FROM jobs WHERE ` + expired + ` FOR UPDATE SKIP LOCKED),
ready AS (SELECT id FROM jobs WHERE ` + ready + ` FOR UPDATE SKIP LOCKED),
due AS (SELECT id FROM expired UNION ALL SELECT id FROM ready LIMIT ?)
UPDATE jobs SET reserved_at = ` + now + `, ` + claimSet + `
FROM due WHERE jobs.id = due.id
RETURNING jobs.id, jobs.queue, jobs.payload, jobs.attempts, jobs.reserved_at, jobs.available_at, jobs.created_at, jobs.reservation_token`)
		s.deleteArrays = `DELETE FROM jobs USING unnest($1::bigint[], $2::bigint[], $3::int[]) AS held(id, token, attempts)
WHERE jobs.id = held.id AND jobs.reservation_token = held.token AND jobs.attempts = held.attempts AND jobs.reserved_at IS NOT NULL
RETURNING jobs.id, jobs.reservation_token`
		s.releaseArrays = `UPDATE jobs SET reserved_at = NULL, available_at = ` + now + ` + held.delay,
  payload = COALESCE(held.payload, jobs.payload)
FROM unnest($1::bigint[], $2::bigint[], $3::int[], $4::bigint[], $5::text[]) AS held(id, token, attempts, delay, payload)
WHERE jobs.id = held.id AND jobs.reservation_token = held.token AND jobs.attempts = held.attempts AND jobs.reserved_at IS NOT NULL
RETURNING jobs.id, jobs.reservation_token`
		s.insertReturnsID = true
		s.deleteReturning = true
	case SQLite:
		s.reserve = `UPDATE jobs SET reserved_at = ` + now + `, ` + claimSet + `
WHERE id IN (
  SELECT id FROM (SELECT id FROM jobs WHERE ` + expired + `)
  UNION ALL
  SELECT id FROM (SELECT id FROM jobs WHERE ` + ready + `)
  LIMIT ?)
RETURNING ` + jobColumns
		s.deleteReturning = true
	case MySQL:
		// The index hint keeps the claim on the index whose order is the
		// claim's order: a plan that sorts would lock every row it reads.
		// Two steps: candidate ids from the claim index without locking
		// (an index-only read), then lock those rows by primary key with
		// SKIP LOCKED, checking again that each is still due. A locking
		// read through the secondary index took three times as long.
		from := "SELECT id FROM jobs FORCE INDEX (jobs_queue_reserved_available_idx) WHERE "
		s.reserveCandidates = func(skip string) string {
			return "(" + from + skip + expired + ") UNION ALL (" + from + skip + ready + ") LIMIT ?"
		}
		s.reserveDue = "((reserved_at IS NULL AND available_at <= " + now + ") OR (reserved_at IS NOT NULL AND reserved_at <= " + now + " - ?))"
		s.deleteReturning = mariaDB
		// MariaDB returns the ids a multi-row INSERT drew, whatever
		// auto_increment_increment (Galera steps it by the node count).
		s.insertReturnsID = mariaDB
	}
	held := " WHERE id = ? AND reservation_token = ? AND attempts = ? AND reserved_at IS NOT NULL"
	s.deleteOne = r("DELETE FROM jobs" + held)
	s.release = r("UPDATE jobs SET reserved_at = NULL, available_at = " + now + " + ?" + held)
	s.releasePayload = r("UPDATE jobs SET payload = ?, reserved_at = NULL, available_at = " + now + " + ?" + held)
	// A give-back takes the attempt back and draws a new token, so a give-back
	// retried after a lost reply can never match a later claim, ours or a
	// PHP worker's (which counts attempts but leaves the token alone).
	s.unreserve = r("UPDATE jobs SET reserved_at = NULL, attempts = attempts - 1, reservation_token = reservation_token + 1" + held)
	s.failDelete = s.deleteOne
	insert := "INSERT INTO failed_jobs (uuid, connection, queue, payload, exception) VALUES (?, ?, ?, ?, ?)"
	switch d {
	case MySQL:
		s.failInsert = insert + " ON DUPLICATE KEY UPDATE connection = VALUES(connection), queue = VALUES(queue), payload = VALUES(payload), exception = VALUES(exception), failed_at = VALUES(failed_at)"
	default:
		s.failInsert = r(insert + " ON CONFLICT (uuid) DO UPDATE SET connection = excluded.connection, queue = excluded.queue, payload = excluded.payload, exception = excluded.exception, failed_at = excluded.failed_at")
	}
	s.size = r(`SELECT
  COALESCE(SUM(CASE WHEN reserved_at IS NULL AND available_at <= ` + now + ` THEN 1 ELSE 0 END), 0),
  COALESCE(SUM(CASE WHEN reserved_at IS NULL AND available_at > ` + now + ` THEN 1 ELSE 0 END), 0),
  COALESCE(SUM(CASE WHEN reserved_at IS NOT NULL THEN 1 ELSE 0 END), 0),
  MIN(CASE WHEN reserved_at IS NULL AND available_at <= ` + now + ` THEN available_at END),
  ` + now + `
FROM jobs WHERE queue = ?`)
	s.clear = r("DELETE FROM jobs WHERE queue = ?")
	s.countJob = r("SELECT COUNT(*) FROM jobs WHERE id = ?")
	s.countFailed = r("SELECT COUNT(*) FROM failed_jobs WHERE uuid = ? AND exception = ?")
	return s
}

// insert builds a multi-row INSERT for jobs. Each row's available_at is
// either the database's now plus a delay or an absolute time.
func (s statements) insert(rows []pushRow, notify bool) string {
	now := s.d.Now()
	var b strings.Builder
	b.WriteString("INSERT INTO jobs (queue, payload, attempts, reserved_at, available_at, created_at) VALUES ")
	for i, row := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		if row.absolute {
			b.WriteString("(?, ?, 0, NULL, ?, " + now + ")")
		} else {
			b.WriteString("(?, ?, 0, NULL, " + now + " + ?, " + now + ")")
		}
	}
	if s.insertReturnsID {
		b.WriteString(" RETURNING id")
	}
	if notify {
		// Wake listening workers in the same statement, inside the pusher's
		// transaction: a rolled-back push wakes nobody, and PostgreSQL
		// delivers one notification per queue however many rows there are.
		return s.d.Rebind(`WITH ins AS (` + b.String() + `, queue, available_at)
SELECT ins.id FROM ins CROSS JOIN (SELECT count(pg_notify('` + notifyChannel + `', q)) FROM
  (SELECT DISTINCT queue AS q FROM ins WHERE available_at <= ` + now + `) d) n`)
	}
	return s.d.Rebind(b.String())
}

// heldWhere matches the rows still held by the reservations given as
// columns of ids, tokens and attempts. The plain id list lets every dialect
// use the primary key.
func heldWhere(ids, tokens, attempts []int64) string {
	return " WHERE id IN (" + sqldb.Ints(ids) + ") AND (id, reservation_token, attempts) IN (" +
		sqldb.IntTuples(ids, tokens, attempts) + ") AND reserved_at IS NOT NULL"
}

// deleteMany deletes the rows of held reservations.
func (s statements) deleteMany(ids, tokens, attempts []int64, returning bool) string {
	q := "DELETE FROM jobs" + heldWhere(ids, tokens, attempts)
	if returning {
		q += " RETURNING id, reservation_token"
	}
	return q
}

// selectHeld finds which reservations are still held, locking their rows
// (MySQL's way to learn what a DELETE without RETURNING will remove).
func (s statements) selectHeld(ids, tokens, attempts []int64) string {
	return "SELECT id, reservation_token FROM jobs" + heldWhere(ids, tokens, attempts) + " FOR UPDATE"
}

// releaseMany releases held reservations, each after its own delay
// in seconds; payloads[i], when not nil, replaces the payload of ids[i]
// and is passed as an argument (the only ones the statement takes).
func (s statements) releaseMany(ids, tokens, attempts, delays []int64, payloads [][]byte, returning bool) (string, []any) {
	var b strings.Builder
	b.WriteString("UPDATE jobs SET reserved_at = NULL, available_at = " + s.d.Now() + " + CASE id")
	for i, id := range ids {
		b.WriteString(" WHEN " + strconv.FormatInt(id, 10) + " THEN " + strconv.FormatInt(delays[i], 10))
	}
	b.WriteString(" END")
	var args []any
	for i, p := range payloads {
		if p == nil {
			continue
		}
		if args == nil {
			b.WriteString(", payload = CASE id")
		}
		b.WriteString(" WHEN " + strconv.FormatInt(ids[i], 10) + " THEN ?")
		args = append(args, string(p))
	}
	if args != nil {
		b.WriteString(" ELSE payload END")
	}
	b.WriteString(heldWhere(ids, tokens, attempts))
	if returning {
		b.WriteString(" RETURNING id, reservation_token")
	}
	return b.String(), args
}
