package dialect

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// postgres claims in one statement (FOR UPDATE SKIP LOCKED in CTEs),
// finishes batches with arrays so each statement is prepared once per
// connection, and wakes listeners with pg_notify inside the push.
type postgres struct {
	*common
	claimCursors
	channel string
	// claim looks from the start of the queue (expired reservations,
	// then ready rows; each row says which arm took it); claimFrom claims
	// ready rows past the queue's cursor (see postgres_claim.go).
	claim, claimFrom string
	// claimQueues is ClaimQueues' statement (postgres_claim.go).
	claimQueues       string
	deleteA, releaseA string
	// deleteOne deletes held rows that share one reservation token and
	// attempts count, as the rows of one claim usually do: the ids travel
	// alone, 12 bytes a job where three arrays took 32. pgx grows its
	// parameter and message buffers from a few hundred bytes for every
	// statement, so a 500-job delete allocated about 260 bytes a job; with
	// one array it allocates about 90. (id = ANY($1) instead of the join
	// on unnest cost the server 13.7 µs a job instead of 10.4 on
	// PostgreSQL 15.)
	deleteOne string
	// deleteOneH and deleteAH are deleteOne and deleteA that also delete
	// the history of the rows they delete, for batches with such rows.
	deleteOneH, deleteAH string
	// releaseErrA is releaseA that also writes the errors of the rows it
	// released to their history, in the same statement (see history.go).
	releaseErrA string
	// readyQueues is ReadyQueues' statement (ready.go).
	readyQueues string
}

// newPostgres builds the dialect; zoneless says failed_at is a timestamp
// without time zone (Laravel's table) rather than dbqueue's timestamptz.
func newPostgres(t Tables, zoneless bool) *postgres {
	// failed_at holds UTC wall time in Laravel's table, as PHP writes it:
	// EXTRACT reads a plain timestamp as UTC and a timestamptz as the
	// instant it is, whatever the session's TimeZone, and comparisons and
	// inserts convert the same way, so the failed_at index still serves.
	epoch := func(col string) string { return "CAST(floor(EXTRACT(EPOCH FROM " + col + ")) AS bigint)" }
	timestamp := func(param string) string { return "to_timestamp(" + param + ")" }
	now := "date_trunc('second', now())"
	if zoneless {
		timestamp = func(param string) string { return "(to_timestamp(" + param + ") AT TIME ZONE 'UTC')" }
		now = "date_trunc('second', now() AT TIME ZONE 'UTC')"
	}
	c := newCommon("postgres", t, "CAST(floor(EXTRACT(EPOCH FROM now())) AS bigint)", epoch, timestamp)
	c.rebinder = sqldb.Rebind
	c.spelling = spelling{
		intDiv: slashDiv,
		// PostgreSQL's SUM of a bigint is numeric.
		sumInt:       func(col string) string { return "CAST(SUM(" + col + ") AS bigint)" },
		contains:     func(col string) string { return "strpos(" + col + ", ?) > 0" },
		least:        "LEAST",
		lockRead:     " FOR UPDATE",
		lockTx:       sqldb.TxOptions{ReadCommitted: true},
		skipTaken:    insertOnConflictNothing,
		keepTaken:    onConflictNothing,
		takenCounts:  true,
		replaceTaken: onConflictReplace,
		addTaken:     onConflictAdd,
		replaceNewer: onConflictReplaceNewer,
		deleteFirst:  deleteInFirst,
		topJoin:      true,
	}
	c.failInsert = "INSERT INTO " + c.failed + " (uuid, connection, queue, payload, exception, failed_at) VALUES (?, ?, ?, ?, ?, " + now + ")" +
		" ON CONFLICT (uuid) DO UPDATE SET connection = excluded.connection, queue = excluded.queue, payload = excluded.payload, exception = excluded.exception, failed_at = excluded.failed_at"
	p := &postgres{common: c, channel: notifyChannel(t)}
	expired, ready := c.claimArms()
	// FOR UPDATE cannot sit under a UNION, so each arm locks in its own
	// CTE; CTEs run on demand, so the ready arm is read only when the
	// expired arm leaves room.
	p.claim = sqldb.Rebind(`WITH expired AS (SELECT id FROM ` + c.jobs + ` WHERE ` + expired + ` FOR UPDATE SKIP LOCKED),
ready AS (SELECT id FROM ` + c.jobs + ` WHERE ` + ready + ` FOR UPDATE SKIP LOCKED),
due AS (SELECT id, false AS ready FROM expired UNION ALL SELECT id, true FROM ready LIMIT ?)
UPDATE ` + c.jobs + ` AS jobs SET ` + claimSet + `, reserved_at = ` + c.now + `
FROM due WHERE jobs.id = due.id
RETURNING ` + pgClaimReturning + `, due.ready`)
	p.claimQueues = pgClaimQueues(c)
	p.claimFrom = sqldb.Rebind(`WITH ready AS (SELECT id FROM ` + c.jobs + ` WHERE ` + pgReadyFrom(c.now) + ` FOR UPDATE SKIP LOCKED)
UPDATE ` + c.jobs + ` AS jobs SET ` + claimSet + `, reserved_at = ` + c.now + `
FROM ready WHERE jobs.id = ready.id
RETURNING ` + pgClaimReturning)
	// (reserved_at + 0), as in common.held: after an ANALYZE that saw no
	// reserved row, the generic plan of "reserved_at IS NOT NULL" hashed
	// the whole partial index of reserved rows — every row in flight and,
	// until VACUUM, every finished one — on each batch.
	p.deleteA = `DELETE FROM ` + c.jobs + ` AS jobs USING unnest($1::bigint[], $2::bigint[], $3::int[]) AS held(id, token, attempts)
WHERE jobs.id = held.id AND jobs.reservation_token = held.token AND jobs.attempts = held.attempts AND (jobs.reserved_at + 0) IS NOT NULL
RETURNING jobs.id, jobs.reservation_token`
	p.deleteOne = `DELETE FROM ` + c.jobs + ` AS jobs USING unnest($1::bigint[]) AS held(id)
WHERE jobs.id = held.id AND jobs.reservation_token = $2 AND jobs.attempts = $3 AND (jobs.reserved_at + 0) IS NOT NULL
RETURNING jobs.id, jobs.reservation_token`
	p.releaseA = `UPDATE ` + c.jobs + ` AS jobs SET ` + unreserve + `, available_at = ` + c.now + ` + held.delay,
  payload = COALESCE(held.payload, jobs.payload)
FROM unnest($1::bigint[], $2::bigint[], $3::int[], $4::bigint[], $5::text[]) AS held(id, token, attempts, delay, payload)
WHERE jobs.id = held.id AND jobs.reservation_token = held.token AND jobs.attempts = held.attempts AND (jobs.reserved_at + 0) IS NOT NULL
RETURNING jobs.id, jobs.reservation_token`
	p.deleteOneH, p.deleteAH = c.withHistory(p.deleteOne), c.withHistory(p.deleteA)
	readyArm, expiredArm := c.readyArms("q.name")
	p.readyQueues = sqldb.Rebind("SELECT q.name FROM unnest(?::text[]) AS q(name) WHERE " + readyArm + " OR " + expiredArm)
	e := c.errorsTable()
	p.releaseErrA = `WITH rel AS (UPDATE ` + c.jobs + ` AS jobs SET ` + unreserve + `, available_at = ` + c.now + ` + held.delay,
  payload = COALESCE(held.payload, jobs.payload),
  reservation_token = CASE WHEN held.error IS NULL THEN jobs.reservation_token ELSE jobs.reservation_token | ` + historyMark + ` END
FROM unnest($1::bigint[], $2::bigint[], $3::int[], $4::bigint[], $5::text[], $6::text[], $7::text[]) AS held(id, token, attempts, delay, payload, error, worker)
WHERE jobs.id = held.id AND jobs.reservation_token = held.token AND jobs.attempts = held.attempts AND jobs.reserved_at IS NOT NULL
RETURNING jobs.id, held.token, held.attempts, held.error, held.worker),
pruned AS (DELETE FROM ` + e + ` WHERE id IN (SELECT id FROM (SELECT x.id, row_number() OVER (PARTITION BY x.job_id ORDER BY x.id DESC) AS n
  FROM ` + e + ` x WHERE x.job_id IN (SELECT id FROM rel WHERE error IS NOT NULL)) ranked WHERE n >= ` + strconv.Itoa(ErrorHistoryKeep) + `)),
ins AS (INSERT INTO ` + e + ` (job_id, attempt, error, worker, created_at)
  SELECT id, attempts, error, worker, ` + c.now + ` FROM rel WHERE error IS NOT NULL)
SELECT id, token FROM rel`
	return p
}

func (p *postgres) NotifyChannel() string { return p.channel }

// maxChannel is PostgreSQL's identifier limit: pg_notify refuses a longer
// channel ("channel name too long") and LISTEN truncates one.
const maxChannel = 63

// notifyChannel is the channel pushes to t's jobs table notify and its
// workers listen on: dbqueue_jobs for Laravel's table in the search_path,
// dbqueue_<schema>_<jobs> otherwise, as builds before v0.1.0 named them, so
// old and new processes still hear each other during a rolling deploy.
// A name that would pass maxChannel (a long schema and table name) keeps
// a readable start and ends in '#' and a hash of the schema-qualified
// table: '#' never occurs in the short form, so two table sets get one
// channel only if their 64-bit hashes collide.
func notifyChannel(t Tables) string {
	if t.Jobs == DefaultTables.Jobs && t.Schema == "" {
		return "dbqueue_jobs"
	}
	name := "dbqueue_" + strings.ReplaceAll(t.JobsTable(), ".", "_")
	if len(name) <= maxChannel {
		return name
	}
	sum := sha256.Sum256([]byte(t.JobsTable()))
	hash := "#" + hex.EncodeToString(sum[:8])
	return name[:maxChannel-len(hash)] + hash
}

func heldArrays(held []Held) (ids, tokens []int64, attempts []int32) {
	ids, tokens, attempts = make([]int64, len(held)), make([]int64, len(held)), make([]int32, len(held))
	for i, h := range held {
		ids[i], tokens[i], attempts[i] = h.ID, h.Token, int32(h.Attempts)
	}
	return ids, tokens, attempts
}

// oneReservation reports whether every row of held carries the same
// reservation token and attempts count.
func oneReservation(held []Held) bool {
	return len(held) > 0 && !slices.ContainsFunc(held[1:], func(h Held) bool {
		return h.Token != held[0].Token || h.Attempts != held[0].Attempts
	})
}

func (p *postgres) DeleteHeld(ctx context.Context, db sqldb.DB, held []Held) ([]Key, error) {
	if len(held) == 0 {
		return nil, nil
	}
	one, all := p.deleteOne, p.deleteA
	if anyMarked(held) && !p.noHistory {
		// Rows with history: the same statement deletes it.
		one, all = p.deleteOneH, p.deleteAH
	}
	if oneReservation(held) {
		ids := make([]int64, len(held))
		for i, h := range held {
			ids[i] = h.ID
		}
		rows, err := db.Query(ctx, one, ids, held[0].Token, held[0].Attempts)
		return scanKeys(rows, err, len(held), plainInt)
	}
	ids, tokens, attempts := heldArrays(held)
	rows, err := db.Query(ctx, all, ids, tokens, attempts)
	return scanKeys(rows, err, len(held), plainInt)
}

func (p *postgres) ReleaseHeld(ctx context.Context, db sqldb.DB, rs []Release) (map[Key]bool, error) {
	ids, tokens, attempts := heldArrays(helds(rs))
	delays, texts := make([]int64, len(rs)), make([]*string, len(rs))
	for i, r := range rs {
		delays[i] = r.Delay
		if r.Payload != nil {
			text := string(r.Payload)
			texts[i] = &text
		}
	}
	var (
		released map[Key]bool
		err      error
	)
	if !p.writesHistory(rs) {
		released, err = collectKeys(db.Query(ctx, p.releaseA, ids, tokens, attempts, delays, texts))
	} else {
		errs, workers := make([]*string, len(rs)), make([]*string, len(rs))
		for i, r := range rs {
			if r.Error != nil {
				errs[i], workers[i] = &r.Error.Error, &r.Error.Worker
			}
		}
		released, err = collectKeys(db.Query(ctx, p.releaseErrA, ids, tokens, attempts, delays, texts, errs, workers))
	}
	p.releasedDue(rs, err)
	return released, err
}

// notifyWrap wraps an INSERT … RETURNING id so that the same statement,
// inside the pusher's transaction, wakes listeners of the queues of due
// rows: a rolled-back push wakes nobody, and PostgreSQL delivers one
// notification per queue however many rows there are.
func (p *postgres) notifyWrap(insert string) string {
	return `WITH ins AS (` + insert + `, queue, available_at)
SELECT ins.id FROM ins CROSS JOIN (SELECT count(pg_notify('` + p.channel + `', q)) FROM
  (SELECT DISTINCT queue AS q FROM ins WHERE available_at <= ` + p.now + `) d) n`
}

// Insert writes rows with one of four statements whose text never
// changes: the rows travel as arrays. A multi-row VALUES list was a
// statement of ~130 bytes per row for the server to parse and plan on
// every push, and three boxed parameters per row on the Go side. The usual
// push — one queue, no delays — sends the queue once and the payloads as
// the one array. Ids are drawn in the arrays' order (ORDER BY ord), as a
// VALUES list draws them in its own.
func (p *postgres) Insert(ctx context.Context, ex sqldb.Execer, rows []PushRow, notify bool) ([]int64, error) {
	oneQueue, timed := true, false
	for _, r := range rows {
		oneQueue = oneQueue && r.Queue == rows[0].Queue
		timed = timed || r.At != 0 || r.Absolute
	}
	// Payloads go as strings: pgx would send [][]byte as bytea[] when it
	// does not ask the server for the parameter's type (exec and simple
	// protocol modes, as under PgBouncer), and bytea[]::text[] is hex.
	payloads := make([]string, len(rows))
	for i, r := range rows {
		payloads[i] = string(r.Payload)
	}
	var queues any = rows[0].Queue
	if !oneQueue {
		list := make([]string, len(rows))
		for i, r := range rows {
			list[i] = r.Queue
		}
		queues = list
	}
	args := []any{queues, payloads}
	if timed {
		ats, absolute := make([]int64, len(rows)), make([]bool, len(rows))
		for i, r := range rows {
			ats[i], absolute[i] = r.At, r.Absolute
		}
		args = append(args, ats, absolute)
	}
	query := p.insert(oneQueue, timed)
	if notify {
		query = p.notifyWrap(query)
	}
	rs, err := ex.Query(ctx, query, args...)
	ids, err := scanInts(rs, err, plainInt)
	if err != nil {
		return nil, err
	}
	if len(ids) != len(rows) {
		return nil, fmt.Errorf("insert returned %d ids for %d rows", len(ids), len(rows))
	}
	slices.Sort(ids)
	return ids, nil
}

// insert is Insert's statement: $1 the queue (or a text[] of them), $2 the
// payloads, and, when timed, $3 the delays or times and $4 which are times.
func (p *postgres) insert(oneQueue, timed bool) string {
	from, queue, cols := "unnest($1::text[], $2::text[]", "r.queue", "queue, payload"
	if oneQueue {
		from, queue, cols = "unnest($2::text[]", "$1::text", "payload"
	}
	available := "n.now"
	if timed {
		from += ", $3::bigint[], $4::bool[]"
		cols += ", at, absolute"
		available = "CASE WHEN r.absolute THEN r.at ELSE n.now + r.at END"
	}
	return `INSERT INTO ` + p.jobs + ` (queue, payload, attempts, reserved_at, available_at, created_at)
SELECT ` + queue + `, r.payload, 0, NULL, ` + available + `, n.now
FROM ` + from + `) WITH ORDINALITY AS r(` + cols + `, ord)
CROSS JOIN (SELECT ` + p.now + ` AS now) n
ORDER BY r.ord
RETURNING id`
}

func (p *postgres) RetryFromFailed(ctx context.Context, tx sqldb.Tx, rows []FailedRow) error {
	return p.retryFromFailed(ctx, tx, rows, p.Insert)
}

func (p *postgres) CheckServer(ctx context.Context, ex sqldb.Execer) error {
	return checkVersion(ctx, ex, "SELECT version()", "postgres", func(v string) bool {
		return strings.Contains(strings.ToLower(v), "postgresql")
	}, serverUnread("postgres"))
}

// forServer reads the type of failed_at: Laravel's is a timestamp without
// time zone, dbqueue's own timestamptz. A missing table reads as
// dbqueue's: the queue's table check reports it next.
func (p *postgres) forServer(ctx context.Context, ex sqldb.Execer) (database, error) {
	t := p.tables
	var zoneless bool
	err := ex.QueryRow(ctx, `SELECT COALESCE((SELECT atttypid = 'timestamp without time zone'::regtype FROM pg_attribute
WHERE attrelid = to_regclass($1) AND attname = 'failed_at' AND NOT attisdropped), false)`, t.FailedTable()).Scan(&zoneless)
	if err != nil {
		return nil, fmt.Errorf("dbqueue: read the type of %s.failed_at: %w", t.FailedTable(), err)
	}
	return newPostgres(t, zoneless), nil
}

var _ database = (*postgres)(nil)

func (p *postgres) FinishLinked(ctx context.Context, db sqldb.DB, h Held, f Finish) (FinishResult, error) {
	return p.finishLinked(ctx, db, h, f, p.BatchTxOptions(), p.Insert, p.CountInBatch)
}

// ReleaseIn on PostgreSQL forces looks too: its claim has a cursor.
func (p *postgres) ReleaseIn(ctx context.Context, tx sqldb.Tx, h Held, delay int64, giveBack bool) (bool, error) {
	return p.putBack(p.releaseIn(ctx, tx, h, delay, giveBack))
}

// FinishIn runs the dialect's own FinishLinked inside the caller's
// transaction (see joined), so a chain's next link and a batch's count are
// written exactly as a worker's own finish writes them, in the same lock
// order.
func (p *postgres) FinishIn(ctx context.Context, tx sqldb.Tx, h Held, f Finish) (FinishResult, error) {
	return finishIn(ctx, tx, func(db sqldb.DB) (FinishResult, error) { return p.FinishLinked(ctx, db, h, f) })
}

// LockReservation on PostgreSQL waits at most lockWaitSeconds per try
// (lock_timeout, local to its transaction; 55P03 is retryable).
func (p *postgres) LockReservation(ctx context.Context, db sqldb.DB, id int64) (Reservation, bool, error) {
	return p.lockReservation(ctx, db, id, "SET LOCAL lock_timeout = '"+strconv.Itoa(lockWaitSeconds)+"s'", " FOR UPDATE")
}

// RunNow on PostgreSQL notifies the queue's listeners in the statement
// that makes the row due, as a push does.
func (p *postgres) RunNow(ctx context.Context, db sqldb.DB, id int64) (string, string, error) {
	var queues []string
	rows, err := db.Query(ctx, sqldb.Rebind(`WITH u AS (`+p.runNowSQL()+` RETURNING queue)
SELECT queue FROM u CROSS JOIN LATERAL (SELECT pg_notify('`+p.channel+`', u.queue)) n`), id)
	if err != nil {
		return "", "", err
	}
	for rows.Next() {
		var q string
		if err := rows.Scan(&q); err != nil {
			rows.Close()
			return "", "", err
		}
		queues = append(queues, q)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return "", "", err
	}
	if len(queues) == 0 {
		return p.runNowState(ctx, db, id)
	}
	return StateDelayed, queues[0], nil
}

func (p *postgres) ReadyQueues(ctx context.Context, ex sqldb.Execer, queues []string, retryAfter int64) ([]string, error) {
	if len(queues) == 0 {
		return nil, nil
	}
	rows, err := ex.Query(ctx, p.readyQueues, queues, retryAfter)
	return scanNames(nil, rows, err)
}

func (p *postgres) RetryUnique(ctx context.Context, tx sqldb.Tx, row FailedRow, l UniqueLock) (bool, error) {
	return p.retryUnique(ctx, tx, row, l, p.Insert)
}
