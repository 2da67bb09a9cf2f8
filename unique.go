package dbqueue

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// Until says what, besides Unique.For running out, ends a unique job's
// lock, as Laravel's ShouldBeUnique and ShouldBeUniqueUntilProcessing do.
type Until int

const (
	// UntilFinished holds the lock while the job is in the jobs table:
	// until it succeeds or fails for good (Laravel's ShouldBeUnique). A job
	// waiting to be retried still holds it, and a job retried from
	// failed_jobs takes it again (see PushUnique). It is the zero value.
	UntilFinished Until = dialect.UntilFinished
	// UntilStarted holds the lock until a worker first claims the job
	// (ShouldBeUniqueUntilProcessing): a new one may be queued while this
	// one runs.
	UntilStarted Until = dialect.UntilStarted
	// UntilExpired holds the lock for Unique.For, whatever becomes of the
	// job: at most one such job per period (a debounce).
	UntilExpired Until = dialect.UntilExpired
)

// Unique makes a push refuse a duplicate of a job that is already queued.
// The database enforces it, so it holds across any number of processes:
// the lock is written in the same transaction as the job.
type Unique struct {
	// Key names what must be unique. Empty: the job's Name and its Data
	// as JSON (a struct encodes the same every time; raw JSON counts
	// byte for byte, spaces included).
	Key string
	// PerQueue makes jobs on different queues not duplicates of each other.
	PerQueue bool
	// For ends the lock this long after the push, even if the job is
	// still queued (Laravel's uniqueFor), so a lost or stuck job cannot
	// block its key forever; whole seconds, rounded up. 0: no time limit,
	// except with UntilExpired, which needs one.
	For time.Duration
	// Until is what else ends the lock (default UntilFinished).
	Until Until
}

// lock builds the lock of job, pushed to queue, whose data encodes as data.
func (u Unique) lock(name string, data []byte, queue string) (dialect.UniqueLock, error) {
	switch {
	case u.Until < UntilFinished || u.Until > UntilExpired:
		return dialect.UniqueLock{}, fmt.Errorf("dbqueue: job %q: Unique.Until %d is not UntilFinished, UntilStarted or UntilExpired", name, u.Until)
	case u.For < 0 || u.For > MaxDelay:
		return dialect.UniqueLock{}, fmt.Errorf("dbqueue: job %q: Unique.For %v must be between 0 and MaxDelay (100 years)", name, u.For)
	case u.Until == UntilExpired && u.For == 0:
		return dialect.UniqueLock{}, fmt.Errorf("dbqueue: job %q: Unique.Until is UntilExpired but For is 0: the lock would never end; give it a For", name)
	}
	parts := []string{"args", name, string(data)}
	if u.Key != "" {
		parts = []string{"key", u.Key}
	}
	if u.PerQueue {
		parts = append(parts, "queue", queue)
	}
	return dialect.UniqueLock{Key: lockKey(parts...), Mode: int(u.Until), ExpiresIn: wholeSeconds(u.For)}, nil
}

// lockKey hashes parts into the lock table's key: fixed length whatever
// the job's data, and parts joined so that no two lists meet.
func lockKey(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s;", len(p), p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// PushUnique pushes job unless a live lock already holds its unique key,
// and returns the id of the job pushed or, with duplicate true, of the job
// that holds the key. Concurrent pushes of one key, from any number of
// processes, queue exactly one job; the others all get its id. The lock
// and the job are written in one transaction. Pushes without uniqueness
// (Push, PushMany) never read or write the lock table.
//
// A lock ends when u.For runs out and as u.Until says; an ended lock is
// taken over by the next push. Locks are kept in a table of their own
// (dbqueue_unique, created by migrate up); PruneUnique clears ended ones.
//
// An UntilFinished job carries its lock's key in its payload
// ("uniqueLock", which PHP ignores), so that retrying it from failed_jobs
// (package failed) takes the lock again for the retried job, for a new
// u.For, unless another job of the key took it while this one was failed:
// then the lock stays with that job, and the retried job runs without it.
func (q *Queue) PushUnique(ctx context.Context, job NewJob, u Unique) (id int64, duplicate bool, err error) {
	rows, lock, err := q.uniqueRows(job, u)
	if err != nil {
		return 0, false, err
	}
	notify := q.wake.shouldNotify(rows)
	err = sqldb.Retry(ctx, func() error {
		return sqldb.InTx(ctx, q.db, sqldb.TxOptions{ReadCommitted: true}, func(tx sqldb.Tx) (err error) {
			id, duplicate, err = q.pushLocked(ctx, tx, rows[0], lock, notify)
			return err
		})
	})
	if err != nil {
		return 0, false, sqldb.Wrap("push unique", err)
	}
	return id, duplicate, nil
}

// PushUniqueTx is PushUnique inside the caller's database/sql
// transaction: the job and its lock exist only if it commits. A concurrent
// push of the same key waits for that commit. Conflicts are not retried
// here; the error reaches the caller, whose transaction it is.
func (q *Queue) PushUniqueTx(ctx context.Context, tx *sql.Tx, job NewJob, u Unique) (id int64, duplicate bool, err error) {
	if tx == nil {
		return 0, false, errors.New("dbqueue: PushUniqueTx: nil *sql.Tx")
	}
	rows, lock, err := q.uniqueRows(job, u)
	if err != nil {
		return 0, false, err
	}
	id, duplicate, err = q.pushLocked(ctx, sqldb.SQLTx(tx), rows[0], lock, q.wake.shouldNotify(rows))
	if err != nil {
		return 0, false, sqldb.Wrap("push unique", err)
	}
	return id, duplicate, nil
}

func (q *Queue) uniqueRows(job NewJob, u Unique) ([]dialect.PushRow, dialect.UniqueLock, error) {
	rows, err := q.rows([]NewJob{job})
	if err != nil {
		return nil, dialect.UniqueLock{}, err
	}
	var data []byte
	if u.Key == "" {
		if data, err = encodeData(job.Data); err != nil {
			return nil, dialect.UniqueLock{}, err // q.rows reported it already
		}
	}
	lock, err := u.lock(job.Name, data, rows[0].Queue)
	if err != nil {
		return nil, dialect.UniqueLock{}, err
	}
	if lock.Mode == dialect.UntilFinished {
		rows[0].Payload = dialect.MarkRetryLock(rows[0].Payload, lock)
	}
	return rows, lock, nil
}

// pushLocked takes lock and inserts row inside ex, one transaction.
func (q *Queue) pushLocked(ctx context.Context, ex sqldb.Execer, row dialect.PushRow, lock dialect.UniqueLock, notify bool) (int64, bool, error) {
	u := q.sql
	holder, ok, err := u.AcquireUnique(ctx, ex, lock)
	if err != nil || !ok {
		return holder, err == nil, err
	}
	ids, err := q.sql.Insert(ctx, ex, []dialect.PushRow{row}, notify)
	if err != nil {
		return 0, false, err
	}
	return ids[0], false, u.SetUniqueJob(ctx, ex, lock.Key, ids[0])
}

// pruneBatch bounds the locks one PruneUnique transaction deletes.
const pruneBatch = 1000

// PruneUnique deletes the unique locks that have ended (expired, or their
// job finished or started as the lock's Until says) and returns how many.
// Ended locks hold nothing, and the next push of their key reuses the row,
// but keys that are never pushed again (unique by data, say) leave one row
// each: prune now and then, like failed.Prune.
func (q *Queue) PruneUnique(ctx context.Context) (int64, error) {
	u := q.sql
	var total int64
	for {
		var n int64
		err := sqldb.Retry(ctx, func() (err error) {
			n, err = u.PruneUnique(ctx, q.db, pruneBatch)
			return err
		})
		total += n
		if err != nil {
			return total, sqldb.Wrap("prune unique locks", err)
		}
		if n < pruneBatch {
			return total, nil
		}
	}
}

// DBNow reads the database's clock, in Unix seconds: the clock every
// process of a periodic schedule agrees on.
func (e workerOps) DBNow(ctx context.Context) (int64, error) {
	var now int64
	err := sqldb.Retry(ctx, func() (err error) {
		now, err = e.q.sql.DBNow(ctx, e.q.db)
		return err
	})
	return now, sqldb.Wrap("read the database clock", err)
}
