package dbqueue

import (
	"context"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// The signals live in the signals table (migration 00002): Laravel keeps
// them in its cache, dbqueue where the jobs are. Restart's is the same for
// every queue connection of the database.
const restartSignal = "restart"

func pauseSignal(connection, queue string) string {
	return "pause:" + connection + ":" + queue
}

// Restart asks every worker of this database to stop after its current
// jobs (Laravel's queue:restart): a supervisor starts them again with the
// new code. Workers read the signal every few seconds.
func (q *Queue) Restart(ctx context.Context) error {
	return q.signalOp(ctx, "restart", func() error { return q.sql.SetSignal(ctx, q.db, restartSignal, nil) })
}

// Pause stops workers taking jobs from queue ("" for the default queue)
// until Resume; running jobs finish (Laravel's queue:pause).
func (q *Queue) Pause(ctx context.Context, queue string) error {
	if queue == "" {
		queue = q.queue
	}
	one := int64(1)
	return q.signalOp(ctx, "pause", func() error {
		return q.sql.SetSignal(ctx, q.db, pauseSignal(q.connection, queue), &one)
	})
}

// Resume lets workers take jobs from a paused queue again.
func (q *Queue) Resume(ctx context.Context, queue string) error {
	if queue == "" {
		queue = q.queue
	}
	return q.signalOp(ctx, "resume", func() error {
		return q.sql.DeleteSignal(ctx, q.db, pauseSignal(q.connection, queue))
	})
}

// Paused reports whether queue ("" for the default queue) is paused.
func (q *Queue) Paused(ctx context.Context, queue string) (bool, error) {
	if queue == "" {
		queue = q.queue
	}
	name := pauseSignal(q.connection, queue)
	got, err := q.sql.Signals(ctx, q.db, []string{name})
	if err != nil {
		return false, signalErr("paused", err)
	}
	_, paused := got[name]
	return paused, nil
}

func (q *Queue) signalOp(ctx context.Context, op string, fn func() error) error {
	return signalErr(op, sqldb.Retry(ctx, fn))
}

func signalErr(op string, err error) error {
	if err == nil {
		return nil
	}
	return sqldb.Wrap(op, err)
}

// signals reads the restart signal and the pause state of queues in one
// query.
func (q *Queue) signals(ctx context.Context, queues []string) (restart int64, paused map[string]bool, err error) {
	names := []string{restartSignal}
	byName := map[string]string{}
	for _, name := range queues {
		n := pauseSignal(q.connection, name)
		names = append(names, n)
		byName[n] = name
	}
	got, err := q.sql.Signals(ctx, q.db, names)
	if err != nil {
		return 0, nil, signalErr("read signals", err)
	}
	paused = map[string]bool{}
	for name, value := range got {
		if name == restartSignal {
			restart = value
		} else if queue, ok := byName[name]; ok {
			paused[queue] = true
		}
	}
	return restart, paused, nil
}
