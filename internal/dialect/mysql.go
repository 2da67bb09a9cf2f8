package dialect

import (
	"context"
	"strings"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// mysqlClaimRounds bounds how many sets of candidates one claim tries when
// other claimers hold the first ones.
const mysqlClaimRounds = 8

// maxClaim bounds one claim (the queue's own limit).
const maxClaim = 1000

// mysql claims in two steps in a READ COMMITTED transaction (candidates
// from the claim index without locks, then those rows by primary key with
// SKIP LOCKED), and learns what a finish changed by locking first where
// it has no RETURNING (MySQL 8; MariaDB has DELETE … RETURNING).
type mysql struct {
	*common
	mariaDB bool
	idStep  int64
	// from starts each candidate arm; due rechecks a locked row.
	from, due, expired, ready string
}

func newMySQL(t Tables, mariaDB bool, idStep int64) *mysql {
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
	m := &mysql{common: c, mariaDB: mariaDB, idStep: max(idStep, 1)}
	m.expired, m.ready = c.claimArms()
	// The index hint keeps the claim on the index whose order is the
	// claim's order: a plan that sorts would lock every row it reads.
	m.from = "SELECT id FROM " + c.jobs + " FORCE INDEX (" + t.ClaimIndex() + ") WHERE "
	m.due = "((reserved_at IS NULL AND available_at <= " + c.now + ") OR (reserved_at IS NOT NULL AND reserved_at <= " + c.now + " - ?))"
	return m
}

// candidates lists ids to claim without locking, each arm skipping the ids
// in skip ("id NOT IN (…) AND " or ""); params: queue, retryAfter, m,
// queue, m, m.
func (m *mysql) candidates(skip string) string {
	return "(" + m.from + skip + m.expired + ") UNION ALL (" + m.from + skip + m.ready + ") LIMIT ?"
}

func (m *mysql) FailedTxOptions() sqldb.TxOptions { return sqldb.TxOptions{ReadCommitted: true} }

// Claim lists candidates (expired reservations, then ready rows, in claim
// order), locks those still due by primary key with SKIP LOCKED, then marks
// them reserved (MySQL has no UPDATE … RETURNING). A locking read through
// the secondary index took three times as long.
func (m *mysql) Claim(ctx context.Context, db sqldb.DB, queue string, retryAfter int64, n int) ([]JobRow, error) {
	var rows []JobRow
	err := sqldb.InTx(ctx, db, sqldb.TxOptions{ReadCommitted: true}, func(tx sqldb.Tx) error {
		rows = rows[:0]
		var now int64
		lockRows := func(ids []int64, limit int) error {
			rs, err := tx.Query(ctx, "SELECT "+jobColumns+", "+m.now+" FROM "+m.jobs+" WHERE id IN ("+sqldb.Ints(ids)+
				") AND "+m.due+" LIMIT ? FOR UPDATE SKIP LOCKED", retryAfter, limit)
			if err != nil {
				return err
			}
			defer rs.Close()
			for rs.Next() {
				r, err := scanJob(rs, &now)
				if err != nil {
					return err
				}
				rows = append(rows, r)
			}
			return rs.Err()
		}
		// Twice as many candidates as wanted: other claimers may hold some.
		// When they hold so many that the lock step comes back short, look
		// further, past the candidates already tried, before reporting the
		// queue empty: an empty claim makes StopWhenEmpty workers exit and
		// pollers back off while jobs wait.
		want := min(2*n, 2*maxClaim)
		var tried []int64
		for round := 0; round < mysqlClaimRounds && len(rows) < n; round++ {
			skip := ""
			if len(tried) > 0 {
				skip = "id NOT IN (" + sqldb.Ints(tried) + ") AND "
			}
			ids, err := scanInts(tx.Query(ctx, m.candidates(skip), queue, retryAfter, want, queue, want, want))
			if err != nil {
				return err
			}
			if len(ids) == 0 {
				break // no other candidates: mark what earlier rounds locked
			}
			if err := lockRows(ids, n-len(rows)); err != nil {
				return err
			}
			if len(ids) < want {
				break // every candidate was read: there are no others
			}
			tried = append(tried, ids...)
		}
		if len(rows) == 0 {
			return nil
		}
		ids := make([]int64, len(rows))
		for i, r := range rows {
			ids[i] = r.ID
		}
		if _, err := tx.Exec(ctx, "UPDATE "+m.jobs+" SET reserved_at = ?, "+claimSet+" WHERE id IN ("+sqldb.Ints(ids)+")", now); err != nil {
			return err
		}
		for i := range rows {
			if rows[i].Attempts < MaxAttempts {
				rows[i].Attempts++
			}
			rows[i].Token++
			at := now
			rows[i].ReservedAt = &at
		}
		return nil
	})
	if err != nil {
		// The rows were marked in a transaction that did not commit (on
		// Galera, a claim on another node may have won them at commit):
		// none of them is this claim's.
		return nil, err
	}
	return rows, nil
}

// lockHeld finds which reservations are still held, locking their rows:
// MySQL 8's way to learn what a statement without RETURNING will change.
func (m *mysql) lockHeld(ctx context.Context, tx sqldb.Tx, held []Held) (map[Key]bool, error) {
	return collectKeys(tx.Query(ctx, "SELECT id, reservation_token FROM "+m.jobs+heldWhere(held)+" FOR UPDATE"))
}

func (m *mysql) DeleteHeld(ctx context.Context, db sqldb.DB, held []Held) (map[Key]bool, error) {
	if m.mariaDB {
		return m.deleteHeldReturning(ctx, db, held)
	}
	var gone map[Key]bool
	err := sqldb.InTx(ctx, db, sqldb.TxOptions{ReadCommitted: true}, func(tx sqldb.Tx) error {
		still, err := m.lockHeld(ctx, tx, held)
		if err != nil || len(still) == 0 {
			gone = still
			return err
		}
		ids := make([]int64, 0, len(still))
		for k := range still {
			ids = append(ids, k.ID)
		}
		if _, err := tx.Exec(ctx, "DELETE FROM "+m.jobs+" WHERE id IN ("+sqldb.Ints(ids)+")"); err != nil {
			return err
		}
		gone = still
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
		if _, err := tx.Exec(ctx, "UPDATE "+m.jobs+" SET "+set+heldWhere(helds(keep)), args...); err != nil {
			return err
		}
		released = still
		return nil
	})
	return released, err
}

// Insert uses RETURNING on MariaDB, which gives the ids a multi-row INSERT
// drew whatever auto_increment_increment is (Galera steps it by the node
// count). MySQL 8 reports the first id; the others follow idStep apart.
func (m *mysql) Insert(ctx context.Context, ex sqldb.Execer, rows []PushRow, _ bool) ([]int64, error) {
	if m.mariaDB {
		return m.insertReturning(ctx, ex, rows, nil)
	}
	ids := make([]int64, 0, len(rows))
	for start := 0; start < len(rows); start += insertChunk {
		chunk := rows[start:min(start+insertChunk, len(rows))]
		query, args := m.insertSQL(chunk)
		res, err := ex.Exec(ctx, query, args...)
		if err != nil {
			return nil, err
		}
		for i := range chunk {
			ids = append(ids, res.LastInsertID+int64(i)*m.idStep)
		}
	}
	return ids, nil
}

func (m *mysql) SetSignal(ctx context.Context, ex sqldb.Execer, name string, value *int64) error {
	return m.setSignal(ctx, ex, name, value, "ON DUPLICATE KEY UPDATE value = VALUES(value)")
}

func (m *mysql) CheckServer(ctx context.Context, ex sqldb.Execer) error {
	return checkVersion(ctx, ex, "SELECT VERSION()", "mysql", func(v string) bool {
		return !strings.Contains(strings.ToLower(v), "postgresql")
	})
}
