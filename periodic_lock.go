package dbqueue

import (
	"context"
	"errors"
	"strconv"

	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// errTickTaken rolls back a tick's transaction when one of its locks is
// held: the locks taken over before it must not stay taken.
type errTickTaken struct{ holder int64 }

func (errTickTaken) Error() string { return "periodic tick already pushed" }

// PushScheduledTick pushes job for one tick of the periodic schedule named
// schedule (whose definition spec is its Schedule's String), unless the
// tick was pushed already by any process, one running this definition or
// the one before or after a deploy. The job and three locks are written in
// one transaction, and any lock held refuses the tick:
//
//   - the definition's lock (name and spec), lasting until next: the lock
//     PushTick takes, so processes of a build before v0.1.0 still agree with
//     this one, and a late process of this definition never pushes a tick
//     another pushed, however late;
//   - the schedule's lock (name alone), holding the newest tick pushed:
//     a definition whose spec, job, queue or data changed pushes no
//     instant the other pushed, and no instant older than the newest;
//   - the job's lock (queue, job name, data and the instant), for keep
//     seconds after the tick: a schedule renamed pushes no tick the old
//     name pushed with the same job.
//
// pushed is false when the tick was taken. Package periodic uses it.
func (e workerOps) PushScheduledTick(ctx context.Context, job NewJob, schedule, spec string, tick, next, keep int64) (id int64, pushed bool, err error) {
	q := e.q
	if err := refuseUnique("periodic schedule "+strconv.Quote(schedule), "each tick is pushed once already; leave Unique nil", []NewJob{job}); err != nil {
		return 0, false, err
	}
	rows, err := q.rows([]NewJob{job})
	if err != nil {
		return 0, false, err
	}
	if err := q.declareFlows(ctx, []NewJob{job}); err != nil {
		return 0, false, err
	}
	data, err := encodeData(job.Data)
	if err != nil {
		return 0, false, err
	}
	before, until := tick-1, tick+keep
	locks := []dialect.UniqueLock{
		{Key: lockKey("periodic", schedule+"\x00"+spec), Mode: dialect.UntilTick, ExpiresAt: &next, StaleAt: &tick},
		{Key: lockKey("periodic-schedule", schedule), Mode: dialect.UntilTick, ExpiresAt: &tick, StaleAt: &before},
		{Key: lockKey("periodic-job", rows[0].Queue, job.Name, string(data), strconv.FormatInt(tick, 10)), Mode: dialect.UntilExpired, ExpiresAt: &until, StaleAt: &tick},
	}
	return q.pushUnderTickLocks(ctx, rows, locks, "push periodic job")
}

// PruneTickLocks deletes the periodic scheduler's locks that nothing can
// need any more (see dialect.TickLocker), up to limit, and returns how
// many. Package periodic calls it now and then.
func (e workerOps) PruneTickLocks(ctx context.Context, grace int64, limit int) (int64, error) {
	var n int64
	err := sqldb.Retry(ctx, func() (err error) {
		n, err = e.q.sql.PruneTickLocks(ctx, e.q.db, grace, limit)
		return err
	})
	return n, sqldb.Wrap("prune periodic locks", err)
}

// PushScheduleStart pushes job once for the start of a scheduler of the
// periodic schedule named schedule (periodic.RunAtStart), at the database
// time at, unless a start of that schedule was pushed already, by any
// process, before until (the schedule's next tick, or later): several
// processes that start together, or one after another in a rolling
// deploy, push it once. The job and its lock, which the tick locks'
// pruning deletes once until passed, are written in one transaction.
// pushed is false when another start took it. Package periodic uses it.
func (e workerOps) PushScheduleStart(ctx context.Context, job NewJob, schedule string, at, until int64) (id int64, pushed bool, err error) {
	q := e.q
	rows, err := q.rows([]NewJob{job})
	if err != nil {
		return 0, false, err
	}
	if err := q.declareFlows(ctx, []NewJob{job}); err != nil {
		return 0, false, err
	}
	lock := dialect.UniqueLock{Key: lockKey("periodic-start", schedule), Mode: dialect.UntilExpired, ExpiresAt: &until, StaleAt: &at}
	return q.pushUnderTickLocks(ctx, rows, []dialect.UniqueLock{lock}, "push periodic job at start")
}

// pushUnderTickLocks inserts the job of rows in one transaction with the
// tick locks: every lock taken (in the order given, so two transactions
// that share locks take them in the same order and cannot deadlock) and
// pointed at the job, or nothing written and pushed false with the id of
// the job that holds the first lock taken already. what names the push in
// its errors.
func (q *Queue) pushUnderTickLocks(ctx context.Context, rows []dialect.PushRow, locks []dialect.UniqueLock, what string) (id int64, pushed bool, err error) {
	notify := q.wake.shouldNotify(rows)
	err = sqldb.Retry(ctx, func() error {
		return sqldb.InTx(ctx, q.db, sqldb.TxOptions{ReadCommitted: true}, func(tx sqldb.Tx) error {
			for _, l := range locks {
				holder, ok, err := q.sql.AcquireTickLock(ctx, tx, l)
				if err != nil {
					return err
				}
				if !ok {
					return errTickTaken{holder}
				}
			}
			ids, err := q.insert(ctx, tx, rows, notify)
			if err != nil {
				return err
			}
			id = ids[0]
			for _, l := range locks {
				if err := q.sql.SetUniqueJob(ctx, tx, l.Key, id); err != nil {
					return err
				}
			}
			return nil
		})
	})
	var taken errTickTaken
	if errors.As(err, &taken) {
		return taken.holder, false, nil
	}
	if err != nil {
		return 0, false, sqldb.Wrap(what, err)
	}
	return id, true, nil
}
