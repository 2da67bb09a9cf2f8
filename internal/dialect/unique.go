package dialect

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// Lock modes, the unique table's until_mode column: what, besides
// expires_at, ends a lock.
const (
	// UntilFinished holds the lock while its job is in the jobs table.
	UntilFinished = 0
	// UntilStarted holds it while its job has never been claimed (see
	// neverClaimed).
	UntilStarted = 1
	// UntilExpired holds it until expires_at only.
	UntilExpired = 2
	// UntilTick is a periodic schedule's tick lock (see TickLocker): only
	// a later tick takes it over (UniqueLock.StaleAt), and PruneUnique
	// leaves it alone, since a scheduler catching up on a tick must still
	// find it; PruneTickLocks deletes those of removed schedules.
	UntilTick = 3
)

// UniqueLock is one lock to take for a job about to be inserted.
type UniqueLock struct {
	Key  string
	Mode int
	// ExpiresIn is the lock's life in seconds from the database's now (0:
	// no expiry), unless ExpiresAt is set.
	ExpiresIn int64
	// ExpiresAt, when set, is the lock's end as a Unix time. StaleAt is
	// for tick locks (AcquireTickLock): a lock already there may be taken
	// over when its expires_at is at or before *StaleAt, whatever the
	// clock says.
	// The periodic scheduler locks each tick until the next one this way,
	// so a late process can never enqueue a tick that was taken.
	ExpiresAt, StaleAt *int64
}

// Uniquer is the SQL of unique jobs, kept in its own file; Dialect embeds
// it.
//
// A lock is live while its row exists, has not expired, and its job is
// still in the state its mode guards (in jobs; never claimed). Deriving
// that from the jobs table, instead of deleting locks as jobs finish,
// keeps workers' deletes, releases and fails free of any extra statement,
// and stays right whoever removes the job: a Laravel worker, Clear, or a
// row deleted by hand.
type Uniquer interface {
	// AcquireUnique takes l.Key inside ex, the transaction that inserts
	// the job: it inserts the lock row, or takes over a stale one. When a
	// live lock holds the key, ok is false and holder is its job. A lock
	// taken holds job_id 0 until SetUniqueJob, before ex commits.
	AcquireUnique(ctx context.Context, ex sqldb.Execer, l UniqueLock) (holder int64, ok bool, err error)
	// SetUniqueJob records the job that holds key.
	SetUniqueJob(ctx context.Context, ex sqldb.Execer, key string, id int64) error
	// PruneUnique deletes up to limit locks that no longer hold anything,
	// and returns how many it deleted.
	PruneUnique(ctx context.Context, db sqldb.DB, limit int) (int64, error)
	// DBNow reads the database's clock in Unix seconds.
	DBNow(ctx context.Context, ex sqldb.Execer) (int64, error)
	// RetryUnique moves one failed row, locked by tx, into jobs as
	// RetryFromFailed does, and takes l for the new job unless a live job
	// holds it: locked reports whether it did.
	RetryUnique(ctx context.Context, tx sqldb.Tx, row FailedRow, l UniqueLock) (locked bool, err error)
}

// retryLockKey is the payload key under which PushUnique writes an
// UntilFinished job's lock (MarkRetryLock), for a retry from failed_jobs
// to take it again (RetryLock): the failed job left the jobs table, so its
// lock ended, and only its payload survives into failed_jobs. Laravel's
// workers ignore keys they do not know.
const retryLockKey = "uniqueLock"

type retryLock struct {
	Key string `json:"key"`
	For int64  `json:"for,omitempty"` // seconds; 0 for no time limit
}

// MarkRetryLock returns payload, a JSON object as dbqueue encodes it, with
// l's key and length added under "uniqueLock".
func MarkRetryLock(payload []byte, l UniqueLock) []byte {
	mark, _ := json.Marshal(retryLock{Key: l.Key, For: l.ExpiresIn}) // strings and ints always encode
	if len(payload) < 2 || payload[len(payload)-1] != '}' {
		return payload
	}
	out := make([]byte, 0, len(payload)+len(retryLockKey)+len(mark)+4)
	out = append(out, payload[:len(payload)-1]...)
	if len(payload) > 2 {
		out = append(out, ',')
	}
	out = append(out, `"`+retryLockKey+`":`...)
	out = append(out, mark...)
	return append(out, '}')
}

// maxRetryLockFor bounds a lock length read back from a payload: 100
// years, dbqueue's MaxDelay.
const maxRetryLockFor = 100 * 366 * 24 * 3600

// RetryLock reads back the lock MarkRetryLock wrote into a failed job's
// payload. ok is false when there is none, or it is not one dbqueue could
// have written (a payload of another producer): the job is then retried
// without a lock.
func RetryLock(payload []byte) (l UniqueLock, ok bool) {
	var p struct {
		Lock *retryLock `json:"uniqueLock"`
	}
	if json.Unmarshal(payload, &p) != nil || p.Lock == nil || p.Lock.For < 0 || p.Lock.For > maxRetryLockFor || !isLockKey(p.Lock.Key) {
		return UniqueLock{}, false
	}
	return UniqueLock{Key: p.Lock.Key, Mode: UntilFinished, ExpiresIn: p.Lock.For}, true
}

// isLockKey reports whether k is a key PushUnique makes: a SHA-256 in
// lower-case hex.
func isLockKey(k string) bool {
	if len(k) != 64 {
		return false
	}
	for i := range len(k) {
		if c := k[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// retryUnique is RetryUnique over the dialect's own Insert. The lock is
// taken first, in the order a push takes it, so a push of the same key
// waits for this retry to commit (or the retry for the push) and then
// finds the job that holds it.
func (c *common) retryUnique(ctx context.Context, tx sqldb.Tx, row FailedRow, l UniqueLock, insert insertFunc) (bool, error) {
	_, locked, err := c.AcquireUnique(ctx, tx, l)
	if err != nil {
		return false, err
	}
	ids, err := insert(ctx, tx, []PushRow{{Queue: row.Queue, Payload: row.Payload}}, true)
	if err != nil {
		return false, err
	}
	if locked {
		if err := c.SetUniqueJob(ctx, tx, l.Key, ids[0]); err != nil {
			return false, err
		}
	}
	res, err := tx.Exec(ctx, c.rebind("DELETE FROM "+c.failed+" WHERE id = ?"), row.ID)
	if err != nil {
		return false, err
	}
	if res.RowsAffected != 1 {
		return false, errors.New("failed_jobs changed during the retry: failed job " + row.UUID + " was gone; nothing was retried")
	}
	return locked, nil
}

// UniqueTable is the table of unique locks: dbqueue_unique beside
// Laravel's tables, <jobs>_unique beside tables of other names (as
// migrations names it).
func (t Tables) UniqueTable() string {
	if t.Jobs == DefaultTables.Jobs && t.Failed == DefaultTables.Failed {
		return t.qualify("dbqueue_unique")
	}
	return t.qualify(t.Jobs + "_unique")
}

// uniqueRounds bounds AcquireUnique's insert-or-lock rounds: a lock row
// seen taken by the insert may be pruned before it is locked.
const uniqueRounds = 5

func (c *common) lockExpiry(l UniqueLock) (string, []any) {
	switch {
	case l.ExpiresAt != nil:
		return "?", []any{*l.ExpiresAt}
	case l.ExpiresIn > 0:
		return c.now + " + ?", []any{l.ExpiresIn}
	}
	return "NULL", nil
}

// AcquireUnique inserts the lock if absent; otherwise it locks the row in
// one statement and judges it in the next. The order matters on
// PostgreSQL: a statement that waited for a row lock still reads the jobs
// table as it was when it began, so it would miss the job the lock's new
// holder just committed and take a live lock over.
//
// On MySQL the upsert's rows-affected count cannot tell an insert from a
// duplicate: with the DSN's clientFoundRows=true both report 1. There the
// row, locked by the upsert either way, is always read back: a lock whose
// job_id is 0 holds no job (this transaction's own new row, or one left
// by a transaction that committed without its job), so it is free, and is
// written over with this lock's mode and expiry.
func (c *common) AcquireUnique(ctx context.Context, ex sqldb.Execer, l UniqueLock) (int64, bool, error) {
	t := c.tables.UniqueTable()
	expiry, eargs := c.lockExpiry(l)
	insert := "INSERT INTO " + t + " (lock_key, job_id, until_mode, expires_at) VALUES (?, 0, ?, " + expiry + ")" + c.keepTaken("lock_key")
	for range uniqueRounds {
		res, err := ex.Exec(ctx, c.rebind(insert), append([]any{l.Key, l.Mode}, eargs...)...)
		if err != nil {
			return 0, false, err
		}
		if res.RowsAffected == 1 && c.takenCounts {
			return 0, true, nil
		}
		var (
			holder  int64
			mode    int
			expires sql.NullInt64
			now     int64
		)
		err = ex.QueryRow(ctx, c.rebind("SELECT job_id, until_mode, expires_at, "+c.now+" FROM "+t+" WHERE lock_key = ?"+c.lockRead), l.Key).
			Scan(&holder, &mode, &expires, &now)
		if errors.Is(err, sql.ErrNoRows) { // pgx's ErrNoRows is one too
			continue // pruned since the insert saw it: insert again
		}
		if err != nil {
			return 0, false, err
		}
		stale := false
		switch {
		case holder == 0:
			stale = true // no job holds it
		case expires.Valid && expires.Int64 <= now:
			stale = true
		case mode == UntilFinished || mode == UntilStarted:
			live, err := c.jobLive(ctx, ex, holder, mode)
			if err != nil {
				return 0, false, err
			}
			stale = !live
		}
		if !stale {
			return holder, false, nil
		}
		_, err = ex.Exec(ctx, c.rebind("UPDATE "+t+" SET job_id = 0, until_mode = ?, expires_at = "+expiry+" WHERE lock_key = ?"),
			append(append([]any{l.Mode}, eargs...), l.Key)...)
		return 0, err == nil, err
	}
	return 0, false, errors.New("unique lock " + l.Key + " kept vanishing: is something pruning it in a loop?")
}

// neverClaimed is true of a row of jobs (aliased by prefix) that no
// worker has claimed: none holds it, no PHP worker counted an attempt,
// and no dbqueue claim drew a token. The token, not attempts alone: a
// snooze or give-back takes the attempt back, but the claim that started
// the job happened, and the lock it ended stays ended. (Only claims and
// give-backs change the token's low bits; the marks above them are set
// after a claim, or on a retry from failed_jobs, which takes no
// UntilStarted lock.)
func neverClaimed(prefix string) string {
	return " AND " + prefix + "reserved_at IS NULL AND " + prefix + "attempts = 0 AND (" + prefix + "reservation_token & " +
		strconv.FormatInt(ErrorHistoryMark-1, 10) + ") = 0"
}

// jobLive reports whether job id still holds a lock of mode: it is in
// jobs and, for UntilStarted, was never claimed.
func (c *common) jobLive(ctx context.Context, ex sqldb.Execer, id int64, mode int) (bool, error) {
	q := "SELECT COUNT(*) FROM " + c.jobs + " WHERE id = ?"
	if mode == UntilStarted {
		q += neverClaimed("")
	}
	var n int
	err := ex.QueryRow(ctx, c.rebind(q+c.shareRead), id).Scan(&n)
	return n > 0, err
}

func (c *common) SetUniqueJob(ctx context.Context, ex sqldb.Execer, key string, id int64) error {
	res, err := ex.Exec(ctx, c.rebind("UPDATE "+c.tables.UniqueTable()+" SET job_id = ? WHERE lock_key = ?"), id, key)
	// job_id goes from 0 to id, so the row changes and counts as 1 row on
	// MySQL too, whatever clientFoundRows says.
	if err == nil && res.RowsAffected != 1 {
		err = errors.New("unique lock " + key + " is gone from under its own transaction")
	}
	return err
}

func (c *common) DBNow(ctx context.Context, ex sqldb.Execer) (int64, error) {
	var now int64
	err := ex.QueryRow(ctx, "SELECT "+c.now).Scan(&now)
	return now, err
}

// PruneUnique finds stale locks with a plain read, then, in a transaction,
// locks them and judges each again before deleting it (the order
// AcquireUnique keeps, for the same reason).
func (c *common) PruneUnique(ctx context.Context, db sqldb.DB, limit int) (int64, error) {
	t := c.tables.UniqueTable()
	alive := func(mode string) string {
		q := "SELECT 1 FROM " + c.jobs + " j WHERE j.id = u.job_id"
		if mode == "started" {
			q += neverClaimed("j.")
		}
		return q
	}
	stale := "(u.until_mode <> " + strconv.Itoa(UntilTick) + " AND u.expires_at IS NOT NULL AND u.expires_at <= " + c.now + ")" +
		" OR (u.until_mode = " + strconv.Itoa(UntilFinished) + " AND NOT EXISTS (" + alive("finished") + "))" +
		" OR (u.until_mode = " + strconv.Itoa(UntilStarted) + " AND NOT EXISTS (" + alive("started") + "))"
	keys, err := scanStrings(db.Query(ctx, "SELECT u.lock_key FROM "+t+" u WHERE "+stale+" LIMIT "+strconv.Itoa(limit)))
	if err != nil || len(keys) == 0 {
		return 0, err
	}
	var deleted int64
	err = sqldb.InTx(ctx, db, sqldb.TxOptions{ReadCommitted: true}, func(tx sqldb.Tx) error {
		deleted = 0
		args := make([]any, len(keys))
		for i, k := range keys {
			args[i] = k
		}
		in := "u.lock_key IN (" + sqldb.List(len(keys)) + ")"
		if _, err := scanStrings(tx.Query(ctx, c.rebind("SELECT u.lock_key FROM "+t+" u WHERE "+in+c.lockRead), args...)); err != nil {
			return err
		}
		// A new statement of a READ COMMITTED transaction: it sees the
		// jobs committed while the lock above waited.
		still, err := scanStrings(tx.Query(ctx, c.rebind("SELECT u.lock_key FROM "+t+" u WHERE "+in+" AND ("+stale+")"), args...))
		if err != nil || len(still) == 0 {
			return err
		}
		dargs := make([]any, len(still))
		for i, k := range still {
			dargs[i] = k
		}
		res, err := tx.Exec(ctx, c.rebind("DELETE FROM "+t+" WHERE lock_key IN ("+sqldb.List(len(still))+")"), dargs...)
		deleted = res.RowsAffected
		return err
	})
	return deleted, err
}

func scanStrings(rows sqldb.Rows, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}
