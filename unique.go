package dbqueue

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
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
	// one runs, or after it snoozed (a snooze takes the attempt back, not
	// the start).
	UntilStarted Until = dialect.UntilStarted
	// UntilExpired holds the lock for Unique.For, whatever becomes of the
	// job: at most one such job per period (a debounce).
	UntilExpired Until = dialect.UntilExpired
)

// Unique makes a push refuse a duplicate of a job that is already queued.
// The database enforces it, so it holds across any number of processes:
// the lock is written in the same transaction as the job. Give it to
// PushUnique, or set it on any push's NewJob.Unique or on a typed job's
// JobOptions.Unique.
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
// and the job are written in one transaction. u replaces job.Unique. Pushes
// of jobs without Unique never read or write the lock table.
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
//
// The push goes through the queue's push middleware like any other;
// duplicate is what the innermost push reported for the job (false when a
// middleware pushed other jobs in its place).
func (q *Queue) PushUnique(ctx context.Context, job NewJob, u Unique) (id int64, duplicate bool, err error) {
	return q.pushUnique(ctx, nil, job, u)
}

// PushUniqueTx is PushUnique inside the caller's database/sql
// transaction: the job and its lock exist only if it commits, and a
// rollback takes both away. A concurrent push of the same key waits for
// that commit or rollback, then finds the job or takes the lock. Conflicts
// are not retried here; the error reaches the caller, whose transaction it
// is. For a pgx transaction, use dbqpgx.PushUniqueTx.
func (q *Queue) PushUniqueTx(ctx context.Context, tx *sql.Tx, job NewJob, u Unique) (id int64, duplicate bool, err error) {
	if tx == nil {
		return 0, false, errors.New("dbqueue: PushUniqueTx: nil *sql.Tx")
	}
	return q.pushUnique(ctx, sqldb.SQLTx(tx), job, u)
}

// pushUnique is PushUnique in ex, or in a transaction of its own when ex
// is nil.
func (q *Queue) pushUnique(ctx context.Context, ex sqldb.Execer, job NewJob, u Unique) (int64, bool, error) {
	job.Unique = &u
	ids, dup, err := q.push(ctx, ex, []NewJob{job})
	if err != nil {
		return 0, false, err
	}
	return ids[0], len(dup) == 1 && dup[0], nil
}

// refuseUnique fails a push that cannot take unique locks (a chain, a
// batch, a periodic tick) when one of its jobs asks for one, rather than
// queue it without the lock it asked for.
func refuseUnique(fn, instead string, jobs []NewJob) error {
	for i, j := range jobs {
		if j.Unique != nil {
			return fmt.Errorf("dbqueue: %s: job %d (%q) sets Unique: %s", fn, i, j.Name, instead)
		}
	}
	return nil
}

// uniqueLocks builds the lock of each job that has a Unique, at its index,
// and marks the payloads of UntilFinished jobs for a retry from
// failed_jobs (MarkRetryLock). It returns nil when no job is unique.
func uniqueLocks(jobs []NewJob, rows []dialect.PushRow) ([]*dialect.UniqueLock, error) {
	var locks []*dialect.UniqueLock
	for i, j := range jobs {
		if j.Unique == nil {
			continue
		}
		if locks == nil {
			locks = make([]*dialect.UniqueLock, len(jobs))
		}
		var data []byte
		if j.Unique.Key == "" {
			var err error
			if data, err = encodeData(j.Data); err != nil {
				return nil, err // q.rows reported it already
			}
		}
		l, err := j.Unique.lock(j.Name, data, rows[i].Queue)
		if err != nil {
			return nil, err
		}
		if l.Mode == dialect.UntilFinished {
			rows[i].Payload = dialect.MarkRetryLock(rows[i].Payload, l)
		}
		locks[i] = &l
	}
	return locks, nil
}

// insertLocked takes locks[i] for rows[i] where it is set and inserts the
// rows whose lock was free (and those without one), inside ex, one
// transaction. It returns the ids in order, a duplicate's being the id of
// the job that holds its key, and which rows were duplicates.
//
// Locks are taken in key order, so two pushes that share keys wait for
// each other instead of deadlocking; a key given twice in one push is
// taken by its first row, and the later rows are its duplicates. Every
// lock is taken before the insert, as a single unique push always did.
func (q *Queue) insertLocked(ctx context.Context, ex sqldb.Execer, rows []dialect.PushRow, locks []*dialect.UniqueLock, notify bool) ([]int64, []bool, error) {
	u := q.sql
	ids, dup := make([]int64, len(rows)), make([]bool, len(rows))
	order := make([]int, 0, len(rows))
	for i, l := range locks {
		if l != nil {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return strings.Compare(locks[a].Key, locks[b].Key) })
	sameAs := map[int]int{} // a repeated key's row → the row that took it
	taker := -1
	for n, i := range order {
		if n > 0 && locks[order[n-1]].Key == locks[i].Key {
			dup[i], sameAs[i] = true, taker
			continue
		}
		taker = i
		holder, ok, err := u.AcquireUnique(ctx, ex, *locks[i])
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			ids[i], dup[i] = holder, true
		}
	}
	insert := make([]dialect.PushRow, 0, len(rows))
	for i, r := range rows {
		if !dup[i] {
			insert = append(insert, r)
		}
	}
	if len(insert) > 0 {
		got, err := q.insert(ctx, ex, insert, notify)
		if err != nil {
			return nil, nil, err
		}
		n := 0
		for i := range rows {
			if !dup[i] {
				ids[i] = got[n]
				n++
			}
		}
	}
	for i, l := range locks {
		if l != nil && !dup[i] {
			if err := u.SetUniqueJob(ctx, ex, l.Key, ids[i]); err != nil {
				return nil, nil, err
			}
		}
	}
	for i, first := range sameAs {
		ids[i] = ids[first]
	}
	return ids, dup, nil
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
