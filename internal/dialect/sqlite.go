package dialect

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// sqlite claims with one UPDATE … RETURNING (a write transaction holds the
// whole database, so no row locks are needed) and keeps failed_at as text
// whose format depends on the writer.
type sqlite struct {
	*common
	// writing is held through this Queue's claims and its deletes of
	// held rows, the statements of a worker's loop, which run on the pool
	// (never inside a caller's transaction, which could then wait for it
	// while holding the database). SQLite has one writer, and a statement
	// that finds the write lock taken sleeps in the busy handler (1, 2, 5,
	// 10 ms…) instead of waking when it is free: a worker's two claims in
	// flight and its deletes kept finding each other there, and its
	// burn-down ran at 0.81 of the hand-written loop's rate, where it runs
	// at about 0.98 with the three queued on this mutex.
	writing sync.Mutex
	claim   string
	// claimQueues is ClaimQueues' statement (claim_queues.go).
	claimQueues string
	// readyQueues is ReadyQueues' statement (ready.go).
	readyQueues string
}

func newSQLite(t Tables) *sqlite {
	epoch := func(col string) string { return "CAST(strftime('%s'," + col + ") AS INTEGER)" }
	timestamp := func(param string) string { return "datetime(" + param + ",'unixepoch')" }
	c := newCommon("sqlite", t, "CAST(strftime('%s','now') AS INTEGER)", epoch, timestamp)
	c.spelling = spelling{
		intDiv:   slashDiv,
		sumInt:   func(col string) string { return "SUM(" + col + ")" },
		contains: func(col string) string { return "instr(" + col + ", ?) > 0" },
		least:    "MIN", // SQLite's scalar min
		// A write transaction holds the whole database: reads need no
		// locks, and no isolation level is asked for.
		lockRead:     "",
		lockTx:       sqldb.TxOptions{},
		skipTaken:    insertOnConflictNothing,
		keepTaken:    onConflictNothing,
		takenCounts:  true,
		replaceTaken: onConflictReplace,
		addTaken:     onConflictAdd,
		replaceNewer: onConflictReplaceNewer,
		deleteFirst:  deleteInFirst,
		topJoin:      true,
	}
	c.failInsert = "INSERT INTO " + c.failed + " (uuid, connection, queue, payload, exception) VALUES (?, ?, ?, ?, ?)" +
		" ON CONFLICT (uuid) DO UPDATE SET connection = excluded.connection, queue = excluded.queue, payload = excluded.payload, exception = excluded.exception, failed_at = excluded.failed_at"
	expired, ready := c.claimArms()
	s := &sqlite{common: c}
	s.claim = `UPDATE ` + c.jobs + ` SET ` + claimSet + `, reserved_at = ` + c.now + `
WHERE id IN (
  SELECT id FROM (SELECT id FROM ` + c.jobs + ` WHERE ` + expired + `)
  UNION ALL
  SELECT id FROM (SELECT id FROM ` + c.jobs + ` WHERE ` + ready + `)
  LIMIT ?)
RETURNING ` + claimColumns
	// CROSS JOIN makes the names the outer loop, read in their order, and
	// each queue's rows come from its claim index in claim order: with no
	// ORDER BY (which would read every row of every name before the
	// LIMIT), the LIMIT stops the join at the queue that fills the claim.
	qExpired, qReady := c.queueArms("j.", "q.value")
	s.claimQueues = `UPDATE ` + c.jobs + ` SET ` + claimSet + `, reserved_at = ` + c.now + `
WHERE id IN (
  SELECT id FROM (SELECT j.id FROM json_each(?) AS q CROSS JOIN ` + c.jobs + ` AS j WHERE ` + qExpired + ` LIMIT ?)
  UNION ALL
  SELECT id FROM (SELECT j.id FROM json_each(?) AS q CROSS JOIN ` + c.jobs + ` AS j WHERE ` + qReady + ` LIMIT ?)
  LIMIT ?)
RETURNING ` + claimColumns + `, queue`
	readyArm, expiredArm := c.readyArms("q.value")
	s.readyQueues = "SELECT q.value FROM json_each(?) AS q WHERE " + readyArm + " OR " + expiredArm
	return s
}

func (s *sqlite) Claim(ctx context.Context, db sqldb.DB, queue string, retryAfter int64, n int) ([]JobRow, error) {
	s.writing.Lock()
	defer s.writing.Unlock()
	rows, err := db.Query(ctx, s.claim, queue, retryAfter, n, queue, n, n)
	return collectClaim(rows, err, queue, n)
}

// ClaimQueues claims from many queues in one statement: the expired
// reservations of all of them first, then ready rows queue by queue.
func (s *sqlite) ClaimQueues(ctx context.Context, db sqldb.DB, queues []string, retryAfter int64, n int) ([]JobRow, error) {
	if len(queues) == 0 {
		return nil, nil
	}
	list, odd, err := readyJSON(queues)
	if err != nil {
		return nil, err
	}
	if len(odd) > 0 {
		return nil, fmt.Errorf("dbqueue: claim from queues %q: a name that is not valid UTF-8 cannot be listed in one claim; claim its queue alone", odd)
	}
	s.writing.Lock()
	defer s.writing.Unlock()
	rows, err := db.Query(ctx, s.claimQueues, list, retryAfter, n, list, n, n)
	return collectQueuesByName(rows, err, queues, n)
}

// DeleteHeld deletes by id alone inside a write transaction (which holds
// the whole database) and checks every deleted row's token and attempts
// against its reservation; if one was another holder's, it rolls back and
// deletes with the full ownership check. SQLite matching each row against
// a list of (id, token, attempts) tuples took half again as long as the
// delete itself (9 against 14–17 µs a job in a side test).
func (s *sqlite) DeleteHeld(ctx context.Context, db sqldb.DB, held []Held) ([]Key, error) {
	want := make(map[int64]Held, len(held))
	ids := make([]int64, len(held))
	for i, h := range held {
		want[h.ID], ids[i] = h, h.ID
	}
	var deleted []Key
	s.writing.Lock()
	defer s.writing.Unlock()
	err := sqldb.InTx(ctx, db, sqldb.TxOptions{}, func(tx sqldb.Tx) error {
		rows, err := tx.Query(ctx, "DELETE FROM "+s.jobs+" WHERE id IN ("+sqldb.Ints(ids)+") AND reserved_at IS NOT NULL RETURNING id, reservation_token, attempts")
		if err != nil {
			return err
		}
		defer rows.Close()
		deleted = make([]Key, 0, len(held))
		for rows.Next() {
			var (
				k        Key
				attempts int
			)
			if err := rows.Scan(&k.ID, &k.Token, &attempts); err != nil {
				return err
			}
			if h := want[k.ID]; h.Token != k.Token || h.Attempts != attempts {
				return errNotOurs
			}
			deleted = append(deleted, k)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rows.Close()
		return s.dropMarked(ctx, tx, deleted)
	})
	if errors.Is(err, errNotOurs) {
		return s.deleteHeldReturning(ctx, db, held)
	}
	return deleted, err
}

// errNotOurs rolls back a delete that took a row another holder holds.
var errNotOurs = errors.New("dbqueue: a row deleted by id is held by another reservation")

func (s *sqlite) ReleaseHeld(ctx context.Context, db sqldb.DB, rs []Release) (map[Key]bool, error) {
	if sharesID(rs) {
		// A stale reservation of a row beside the one that holds it (a
		// job reclaimed by the same process): the SET's CASE id and the
		// ids read back cannot tell the two apart, so the stale ones are
		// dropped first, in the transaction that holds the database.
		var released map[Key]bool
		err := sqldb.InTx(ctx, db, sqldb.TxOptions{}, func(tx sqldb.Tx) error {
			still, err := collectKeys(tx.Query(ctx, "SELECT id, reservation_token FROM "+s.jobs+heldWhere(helds(rs))))
			if err != nil {
				return err
			}
			var keep []Release
			for _, r := range rs {
				if still[r.Key()] {
					keep = append(keep, r)
				}
			}
			released = map[Key]bool{}
			if len(keep) == 0 {
				return nil
			}
			released, err = s.releaseHeld(ctx, &joined{Tx: tx}, keep)
			return err
		})
		if err != nil {
			return nil, err
		}
		return released, nil
	}
	return s.releaseHeld(ctx, db, rs)
}

// sharesID reports whether two releases of rs name one row.
func sharesID(rs []Release) bool {
	seen := make(map[int64]bool, len(rs))
	for _, r := range rs {
		if seen[r.ID] {
			return true
		}
		seen[r.ID] = true
	}
	return false
}

// releaseHeld is ReleaseHeld of releases that each name a row of their own.
func (s *sqlite) releaseHeld(ctx context.Context, db sqldb.DB, rs []Release) (map[Key]bool, error) {
	set, args := s.releaseSet(rs)
	if !s.writesHistory(rs) {
		return collectKeys(db.Query(ctx, "UPDATE "+s.jobs+" SET "+set+heldWhere(helds(rs))+" RETURNING id, reservation_token", args...))
	}
	// The mark changes the token: the rows released are read back by id
	// (the WHERE matched each against its own reservation).
	var released map[Key]bool
	err := sqldb.InTx(ctx, db, sqldb.TxOptions{}, func(tx sqldb.Tx) error {
		rows, err := tx.Query(ctx, "UPDATE "+s.jobs+" SET "+set+markSet(rs)+heldWhere(helds(rs))+" RETURNING id", args...)
		ids, err := scanInts(rows, err, plainInt)
		if err != nil {
			return err
		}
		got := make(map[int64]bool, len(ids))
		for _, id := range ids {
			got[id] = true
		}
		released = make(map[Key]bool, len(ids))
		for _, r := range rs {
			if got[r.ID] {
				released[r.Key()] = true
			}
		}
		return s.recordErrors(ctx, tx, releaseErrors(rs, func(r Release) bool { return released[r.Key()] }))
	})
	if err != nil {
		return nil, err
	}
	return released, nil
}

// Insert reads its rows from a VALUES list of parameters and the clock
// once: SQLite looks for constant expressions to compute just once by
// comparing each with those before it, so a VALUES list with the clock in
// every row cost it time quadratic in the rows (58% of an end-to-end run
// went to preparing the INSERT). The usual push — one queue, no delays —
// binds the queue once and one payload per row.
func (s *sqlite) Insert(ctx context.Context, ex sqldb.Execer, rows []PushRow, _ bool) ([]int64, error) {
	ids := make([]int64, 0, len(rows))
	for chunk := range slices.Chunk(rows, insertChunk) {
		oneQueue, timed := true, false
		for _, r := range chunk {
			oneQueue = oneQueue && r.Queue == chunk[0].Queue
			timed = timed || r.At != 0 || r.Absolute
		}
		var b strings.Builder
		// r.column1 is the payload, then the queue unless it is bound once,
		// then the delay and whether it is a time.
		queue, at, row := "?", "", "(?)"
		args := make([]any, 0, 4*len(chunk)+1)
		if oneQueue {
			args = append(args, chunk[0].Queue)
		}
		next := 2
		if !oneQueue {
			queue, row = "r.column2", "(?, ?)"
			next = 3
		}
		available := "n.now"
		if timed {
			at = strconv.Itoa(next)
			available = "CASE WHEN r.column" + strconv.Itoa(next+1) + " THEN r.column" + at + " ELSE n.now + r.column" + at + " END"
			row = row[:len(row)-1] + ", ?, ?)"
		}
		b.WriteString("INSERT INTO " + s.jobs + " (queue, payload, attempts, reserved_at, available_at, created_at) SELECT " +
			queue + ", r.column1, 0, NULL, " + available + ", n.now FROM (VALUES ")
		for i, r := range chunk {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(row)
			args = append(args, string(r.Payload))
			if !oneQueue {
				args = append(args, r.Queue)
			}
			if timed {
				args = append(args, r.At, r.Absolute)
			}
		}
		b.WriteString(") AS r, (SELECT " + s.now + " AS now) AS n RETURNING id")
		rs, err := ex.Query(ctx, b.String(), args...)
		got, err := scanInts(rs, err, plainInt)
		if err != nil {
			return nil, err
		}
		if len(got) != len(chunk) {
			return nil, fmt.Errorf("insert returned %d ids for %d rows", len(got), len(chunk))
		}
		slices.Sort(got) // ids are drawn in VALUES order
		ids = append(ids, got...)
	}
	return ids, nil
}

// failedBefore converts the column, not the bound: SQLite keeps times as
// text whose format depends on the writer.
func (s *sqlite) failedBefore(expr string) string {
	return s.epoch("failed_at") + " < " + expr
}

func (s *sqlite) ListFailed(ctx context.Context, ex sqldb.Execer, f FailedFilter) ([]FailedRow, error) {
	return s.listFailed(ctx, ex, f, s.failedBefore)
}

func (s *sqlite) DeleteFailed(ctx context.Context, ex sqldb.Execer, f FailedFilter) (int64, error) {
	return s.deleteFailed(ctx, ex, f, s.failedBefore)
}

// LockFailed needs no row locks: SQLite's write transaction (BEGIN
// IMMEDIATE) already holds the whole database.
func (s *sqlite) LockFailed(ctx context.Context, tx sqldb.Tx, f FailedFilter) ([]FailedRow, error) {
	return s.lockFailed(ctx, tx, f, "")
}

func (s *sqlite) CheckServer(ctx context.Context, ex sqldb.Execer) error {
	return checkVersion(ctx, ex, "SELECT sqlite_version()", "sqlite", func(string) bool { return true },
		"check that the DSN's path names a file this process may create or write, in a directory that exists, and that the driver package is that database's")
}

// forServer: the SQLite dialect depends on nothing of its database.
func (s *sqlite) forServer(context.Context, sqldb.Execer) (database, error) { return s, nil }

var _ database = (*sqlite)(nil)

func (s *sqlite) CountInBatch(ctx context.Context, tx sqldb.Tx, id, jobUUID string, failed bool) (*BatchChange, error) {
	return s.countInBatch(ctx, tx, id, jobUUID, failed, "")
}

func (s *sqlite) FinishLinked(ctx context.Context, db sqldb.DB, h Held, f Finish) (FinishResult, error) {
	return s.finishLinked(ctx, db, h, f, s.BatchTxOptions(), s.Insert, s.CountInBatch)
}

func (s *sqlite) RetryFromFailed(ctx context.Context, tx sqldb.Tx, rows []FailedRow) error {
	return s.retryFromFailed(ctx, tx, rows, s.Insert)
}

func (s *sqlite) FinishIn(ctx context.Context, tx sqldb.Tx, h Held, f Finish) (FinishResult, error) {
	return finishIn(ctx, tx, func(db sqldb.DB) (FinishResult, error) { return s.FinishLinked(ctx, db, h, f) })
}

// LockReservation on SQLite reads inside a transaction, which waits for
// the one writer (busy_timeout): SQLite has no row locks.
func (s *sqlite) LockReservation(ctx context.Context, db sqldb.DB, id int64) (Reservation, bool, error) {
	return s.lockReservation(ctx, db, id, "", "")
}

func (s *sqlite) CancelJob(ctx context.Context, tx sqldb.Tx, id int64) (string, []byte, error) {
	return s.cancelJob(ctx, tx, id, "")
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

func (s *sqlite) RetryUnique(ctx context.Context, tx sqldb.Tx, row FailedRow, l UniqueLock) (bool, error) {
	return s.retryUnique(ctx, tx, row, l, s.Insert)
}
