package dialect

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// maxClaim bounds one claim (the queue's own limit).
const maxClaim = 1000

// mysql claims in two steps in a READ COMMITTED transaction (candidates
// from the claim index without locks, then those rows by primary key with
// SKIP LOCKED; see mysql_claim.go), and learns what a finish changed by
// locking first where it has no RETURNING (MySQL 8; MariaDB has DELETE …
// RETURNING).
type mysql struct {
	*common
	mariaDB bool
	// returning: the ids of an INSERT are read back with RETURNING rather
	// than counted from the first.
	returning bool
	idStep    int64
	// due rechecks a locked row; fromCursor and fromStart read candidates.
	due, fromCursor, fromStart string
	// claimCursors holds each queue's cursor.
	claimCursors
	// ready is ReadyQueues' statement, built on first use (ready.go).
	ready mysqlReady
}

func newMySQL(t Tables, srv MySQLServer) *mysql {
	// failed_at holds UTC wall time as the session shows it, as PHP writes
	// it: counted from the epoch's wall time rather than through
	// UNIX_TIMESTAMP, which would read it in the session's time_zone, and
	// written with UTC_TIMESTAMP(). Comparing the column itself keeps the
	// failed_at index in use.
	epoch := func(col string) string { return "TIMESTAMPDIFF(SECOND, '1970-01-01 00:00:00', " + col + ")" }
	timestamp := func(param string) string { return "TIMESTAMPADD(SECOND, " + param + ", '1970-01-01 00:00:00')" }
	c := newCommon("mysql", t, "UNIX_TIMESTAMP()", epoch, timestamp)
	c.failInsert = "INSERT INTO " + c.failed + " (uuid, connection, queue, payload, exception, failed_at) VALUES (?, ?, ?, ?, ?, UTC_TIMESTAMP())" +
		" ON DUPLICATE KEY UPDATE connection = VALUES(connection), queue = VALUES(queue), payload = VALUES(payload), exception = VALUES(exception), failed_at = VALUES(failed_at)"
	c.ints = mysqlInt
	c.spelling = spelling{
		intDiv: func(a, b string) string { return "(" + a + ") DIV " + b },
		// MySQL's SUM of an integer is a decimal.
		sumInt:   func(col string) string { return "CAST(SUM(" + col + ") AS SIGNED)" },
		contains: func(col string) string { return "LOCATE(CAST(? AS BINARY), CAST(" + col + " AS BINARY)) > 0" },
		least:    "LEAST",
		lockRead: " FOR UPDATE",
		// A REPEATABLE READ transaction's plain reads see its snapshot.
		shareRead: " LOCK IN SHARE MODE",
		lockTx:    sqldb.TxOptions{ReadCommitted: true},
		// INSERT IGNORE counts 1 for a row inserted and 0 for one
		// ignored, with or without clientFoundRows.
		skipTaken: func(table, cols, values, _ string) string {
			return "INSERT IGNORE INTO " + table + " (" + cols + ") VALUES " + values
		},
		// The no-op update locks the row; with the DSN's clientFoundRows
		// its count is 1, as an insert's is.
		keepTaken:   func(key string) string { return " ON DUPLICATE KEY UPDATE " + key + " = " + key },
		takenCounts: false,
		replaceTaken: func(_ string, cols []string) string {
			set := make([]string, len(cols))
			for i, col := range cols {
				set[i] = col + " = VALUES(" + col + ")"
			}
			return " ON DUPLICATE KEY UPDATE " + strings.Join(set, ", ")
		},
		// MySQL assigns in order, so by, which every IF reads, comes last.
		replaceNewer: func(table, _, by string, cols []string) (string, string) {
			newer := "(" + by + " IS NULL OR " + by + " < VALUES(" + by + "))"
			set := make([]string, 0, len(cols)+1)
			for _, col := range append(cols, by) {
				set = append(set, col+" = IF("+newer+", VALUES("+col+"), "+col+")")
			}
			return "INSERT INTO " + table, " ON DUPLICATE KEY UPDATE " + strings.Join(set, ", ")
		},
		addTaken: func(table, _ string, cols []string) (string, string) {
			set := make([]string, len(cols))
			for i, col := range cols {
				set[i] = col + " = " + col + " + VALUES(" + col + ")"
			}
			return "INSERT INTO " + table, " ON DUPLICATE KEY UPDATE " + strings.Join(set, ", ")
		},
		// MySQL reads no LIMIT in an IN subquery, nor the table a DELETE
		// deletes from; its DELETE takes ORDER BY and LIMIT itself.
		deleteFirst: func(table, _, where, tail string) string { return "DELETE FROM " + table + " WHERE " + where + tail },
		// MariaDB runs topQuery's join back as a scan of the range per
		// kept group (seconds at times): rank and sum in one pass.
		topJoin: false,
	}
	m := &mysql{common: c, mariaDB: srv.MariaDB, returning: srv.MariaDB && !srv.ConsecutiveIDs, idStep: max(srv.IDStep, 1)}
	m.due = "((reserved_at IS NULL AND available_at <= " + c.now + ") OR (reserved_at IS NOT NULL AND reserved_at <= " + c.now + " - ?))"
	// The index hint keeps both reads on the index whose order is the
	// claim's order. The cursor's bound is written out: MariaDB ranges
	// only on (queue, available_at) for a row comparison.
	from := "SELECT id, available_at FROM " + c.jobs + " FORCE INDEX (" + t.ClaimIndex() + ") WHERE "
	m.fromCursor = from + "queue = ? AND (available_at > ? OR (available_at = ? AND id > ?)) AND available_at <= " + c.now +
		" ORDER BY available_at, id LIMIT ?"
	// Expired reservations are behind now too (available_at <= reserved_at):
	// the bound keeps the read a range that stops short of delayed rows.
	m.fromStart = from + "queue = ? AND %savailable_at <= " + c.now + " AND (reserved_at IS NULL OR reserved_at <= " + c.now + " - ?)" +
		" ORDER BY available_at, id LIMIT ?"
	return m
}

func (m *mysql) FailedTxOptions() sqldb.TxOptions { return sqldb.TxOptions{ReadCommitted: true} }

// lockHeld finds which reservations are still held, locking their rows:
// MySQL 8's way to learn what a statement without RETURNING will change.
func (m *mysql) lockHeld(ctx context.Context, tx sqldb.Tx, held []Held) (map[Key]bool, error) {
	return collectKeys(tx.Query(ctx, "SELECT id, reservation_token FROM "+m.jobs+heldWhere(held)+" FOR UPDATE"))
}

func (m *mysql) DeleteHeld(ctx context.Context, db sqldb.DB, held []Held) ([]Key, error) {
	if len(held) == 0 {
		return nil, nil
	}
	if m.mariaDB {
		return m.deleteHeldReturning(ctx, db, held)
	}
	var gone []Key
	err := sqldb.InTx(ctx, db, sqldb.TxOptions{ReadCommitted: true}, func(tx sqldb.Tx) error {
		still, err := m.lockHeld(ctx, tx, held)
		if err != nil || len(still) == 0 {
			return err
		}
		ids := make([]int64, 0, len(still))
		for k := range still {
			ids = append(ids, k.ID)
			gone = append(gone, k)
		}
		if _, err := tx.Exec(ctx, "DELETE FROM "+m.jobs+" WHERE id IN ("+sqldb.Ints(ids)+")"); err != nil {
			gone = nil
			return err
		}
		if err := m.dropMarked(ctx, tx, gone); err != nil {
			gone = nil
			return err
		}
		return nil
	})
	return gone, err
}

// ReleaseHeld locks what is still held, updates exactly that, and knows
// which rows were released (MySQL has no UPDATE … RETURNING).
func (m *mysql) ReleaseHeld(ctx context.Context, db sqldb.DB, rs []Release) (map[Key]bool, error) {
	var released map[Key]bool
	err := sqldb.InTx(ctx, db, sqldb.TxOptions{ReadCommitted: true}, func(tx sqldb.Tx) error {
		still, err := m.lockHeld(ctx, tx, helds(rs))
		if err != nil || len(still) == 0 {
			released = still
			return err
		}
		var keep []Release
		for _, r := range rs {
			if still[r.Key()] {
				keep = append(keep, r)
			}
		}
		set, args := m.releaseSet(keep)
		history := m.writesHistory(keep)
		if history {
			set += markSet(keep)
		}
		if _, err := tx.Exec(ctx, "UPDATE "+m.jobs+" SET "+set+heldWhere(helds(keep)), args...); err != nil {
			return err
		}
		if history {
			if err := m.recordErrors(ctx, tx, releaseErrors(keep, func(Release) bool { return true })); err != nil {
				return err
			}
		}
		released = still
		return nil
	})
	m.releasedDue(rs, err)
	return released, err
}

func (m *mysql) SetSignal(ctx context.Context, ex sqldb.Execer, name string, value *int64) error {
	return m.setSignal(ctx, ex, name, value, "ON DUPLICATE KEY UPDATE value = VALUES(value)",
		"ON DUPLICATE KEY UPDATE value = IF(VALUES(value) > value, VALUES(value), value + 1)")
}

func (m *mysql) CheckServer(ctx context.Context, ex sqldb.Execer) error {
	return checkVersion(ctx, ex, "SELECT VERSION()", "mysql", func(v string) bool {
		return !strings.Contains(strings.ToLower(v), "postgresql")
	}, serverUnread("mysql"))
}

// forServer reads what the MySQL dialect needs to know of its server
// (MySQLServer): whether it is MariaDB, and how it draws the ids of a
// multi-row INSERT.
func (m *mysql) forServer(ctx context.Context, ex sqldb.Execer) (database, error) {
	var version string
	if err := ex.QueryRow(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return nil, fmt.Errorf("dbqueue: read the server version: %w", err)
	}
	srv := MySQLServer{MariaDB: strings.Contains(strings.ToLower(version), "mariadb")}
	// A multi-row INSERT's ids follow auto_increment_increment apart from
	// the first (Group Replication multi-primary and Galera set it above
	// 1). MySQL 8 reports only the first, so it counts on that; MariaDB
	// does too where innodb_autoinc_lock_mode (0 or 1) promises a statement
	// consecutive ids, and otherwise (2, which Galera requires) reads them
	// back with RETURNING. A server that will not say keeps RETURNING.
	var lockMode int64 = 2
	q := "SELECT @@auto_increment_increment, @@innodb_autoinc_lock_mode"
	if err := ex.QueryRow(ctx, q).Scan(&srv.IDStep, &lockMode); err != nil {
		if !srv.MariaDB {
			if err := ex.QueryRow(ctx, "SELECT @@auto_increment_increment").Scan(&srv.IDStep); err != nil {
				return nil, fmt.Errorf("dbqueue: read auto_increment_increment: %w", err)
			}
		}
		lockMode = 2
	}
	srv.ConsecutiveIDs = lockMode < 2
	return newMySQL(m.tables, srv), nil
}

var _ database = (*mysql)(nil)

func (m *mysql) BatchTxOptions() sqldb.TxOptions { return sqldb.TxOptions{ReadCommitted: true} }

func (m *mysql) FinishLinked(ctx context.Context, db sqldb.DB, h Held, f Finish) (FinishResult, error) {
	return m.finishLinked(ctx, db, h, f, m.BatchTxOptions(), m.Insert, m.CountInBatch)
}

func (m *mysql) RetryFromFailed(ctx context.Context, tx sqldb.Tx, rows []FailedRow) error {
	return m.retryFromFailed(ctx, tx, rows, m.Insert)
}

// ReleaseIn on MySQL also makes the next claims look from the start: the
// row may become due behind the claim cursor by the time the caller's
// transaction commits. Looks from the start also come every second, so a
// commit later than this only delays the row by that much.
func (m *mysql) ReleaseIn(ctx context.Context, tx sqldb.Tx, h Held, delay int64, giveBack bool) (bool, error) {
	return m.putBack(m.releaseIn(ctx, tx, h, delay, giveBack))
}

func (m *mysql) FinishIn(ctx context.Context, tx sqldb.Tx, h Held, f Finish) (FinishResult, error) {
	return finishIn(ctx, tx, func(db sqldb.DB) (FinishResult, error) { return m.FinishLinked(ctx, db, h, f) })
}

// LockReservation on MariaDB waits at most lockWaitSeconds per try (FOR
// UPDATE WAIT, error 1205, retryable); MySQL 8 has no WAIT clause and
// waits innodb_lock_wait_timeout (50s by default), also 1205.
func (m *mysql) LockReservation(ctx context.Context, db sqldb.DB, id int64) (Reservation, bool, error) {
	lock := " FOR UPDATE"
	if m.mariaDB {
		lock += " WAIT " + strconv.Itoa(lockWaitSeconds)
	}
	return m.lockReservation(ctx, db, id, "", lock)
}

func (m *mysql) Hit(ctx context.Context, db sqldb.DB, name string, per int64) (hits, left int64, err error) {
	return m.HitBy(ctx, db, name, per, 1)
}

// HitBy on MySQL: INSERT … ON DUPLICATE KEY UPDATE has no RETURNING (nor
// MariaDB's, for the updated row), so the counted row is read back in the
// same transaction, under the lock the upsert took. MySQL assigns the SET
// list left to right, each reading the columns assigned before it: hits
// comes first, so both IFs read the old window_start.
func (m *mysql) HitBy(ctx context.Context, db sqldb.DB, name string, per, n int64) (hits, left int64, err error) {
	up := "INSERT INTO " + m.limitsTable() + " (name, window_start, hits) VALUES (?, " + m.now + ", ?)" +
		" ON DUPLICATE KEY UPDATE" +
		" hits = IF(window_start > VALUES(window_start) - ?, hits + VALUES(hits), VALUES(hits))," +
		" window_start = IF(window_start > VALUES(window_start) - ?, window_start, VALUES(window_start))"
	read := "SELECT hits, window_start + ? - " + m.now + " FROM " + m.limitsTable() + " WHERE name = ?"
	err = sqldb.InTx(ctx, db, sqldb.TxOptions{}, func(tx sqldb.Tx) error {
		if _, err := tx.Exec(ctx, up, name, n, per, per); err != nil {
			return err
		}
		return tx.QueryRow(ctx, read, per, name).Scan(&hits, &left)
	})
	return hits, left, err
}

// TakeLock on MySQL: the rows-affected count of ON DUPLICATE KEY UPDATE
// depends on the DSN's clientFoundRows, so the owner is read back in the
// same transaction instead. owner is assigned first, reading the old
// expires_at, as does expires_at after it.
func (m *mysql) TakeLock(ctx context.Context, db sqldb.DB, name, owner string, expire int64) (bool, error) {
	expired := "expires_at < " + m.now
	up := "INSERT INTO " + m.locksTable() + " (name, owner, expires_at) VALUES (?, ?, " + m.now + " + ?)" +
		" ON DUPLICATE KEY UPDATE" +
		" owner = IF(" + expired + ", VALUES(owner), owner)," +
		" expires_at = IF(" + expired + ", VALUES(expires_at), expires_at)"
	var holder string
	err := sqldb.InTx(ctx, db, sqldb.TxOptions{}, func(tx sqldb.Tx) error {
		if _, err := tx.Exec(ctx, up, name, owner, expire); err != nil {
			return err
		}
		return tx.QueryRow(ctx, "SELECT owner FROM "+m.locksTable()+" WHERE name = ?", name).Scan(&holder)
	})
	return err == nil && holder == owner, err
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

func (m *mysql) RetryUnique(ctx context.Context, tx sqldb.Tx, row FailedRow, l UniqueLock) (bool, error) {
	return m.retryUnique(ctx, tx, row, l, m.Insert)
}
