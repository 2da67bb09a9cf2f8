package dbqueue

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// The signals live in the signals table (migration 00002): Laravel keeps
// them in its cache, dbqueue where the jobs are. Restart's is the same for
// every queue connection of the database.
const restartSignal = "restart"

// maxSignalName is the width of the signals table's name column.
const maxSignalName = 255

// pauseSignal names the pause signal of a queue of a connection:
// "pause:<connection>:<queue>", as builds before v0.1.0 named it, when that
// fits the name column and reads one way only (a connection name without
// a colon: "a:b" + "c" and "a" + "b:c" would share a name). Otherwise it
// is "pause-sha256:" and the hash of the two names, length-prefixed, so
// every queue name Push accepts (255 bytes) can be paused, whatever the
// connection's name. No short name starts with "pause-sha256:".
func pauseSignal(connection, queue string) string {
	name := "pause:" + connection + ":" + queue
	if len(name) <= maxSignalName && !strings.Contains(connection, ":") {
		return name
	}
	sum := sha256.Sum256([]byte(strconv.Itoa(len(connection)) + ":" + connection + ":" + queue))
	return "pause-sha256:" + hex.EncodeToString(sum[:])
}

// Restart asks every worker of this database to stop after its current
// jobs (Laravel's queue:restart): a supervisor starts them again with the
// new code. Workers read the signal every few seconds and stop when its
// value changes; every Restart changes it, even two in one second.
func (q *Queue) Restart(ctx context.Context) error {
	return q.signalOp(ctx, "restart", func() error { return q.sql.SetSignal(ctx, q.db, restartSignal, nil) })
}

// Pause stops workers taking jobs from queue ("" for the default queue)
// until Resume; running jobs finish (Laravel's queue:pause).
func (q *Queue) Pause(ctx context.Context, queue string) error {
	queue, err := q.signalQueue(queue)
	if err != nil {
		return err
	}
	one := int64(1)
	return q.signalOp(ctx, "pause", func() error {
		return q.sql.SetSignal(ctx, q.db, pauseSignal(q.connection, queue), &one)
	})
}

// Resume lets workers take jobs from a paused queue again.
func (q *Queue) Resume(ctx context.Context, queue string) error {
	queue, err := q.signalQueue(queue)
	if err != nil {
		return err
	}
	return q.signalOp(ctx, "resume", func() error {
		return q.sql.DeleteSignal(ctx, q.db, pauseSignal(q.connection, queue))
	})
}

// Paused reports whether queue ("" for the default queue) is paused.
func (q *Queue) Paused(ctx context.Context, queue string) (bool, error) {
	queue, err := q.signalQueue(queue)
	if err != nil {
		return false, err
	}
	name := pauseSignal(q.connection, queue)
	got, err := q.sql.Signals(ctx, q.db, []string{name})
	if err != nil {
		return false, signalErr("paused", err)
	}
	_, paused := got[name]
	return paused, nil
}

// signalQueue is the queue a pause operation names: the default queue
// for "", and an error for a name no job can have (one Push refuses).
func (q *Queue) signalQueue(queue string) (string, error) {
	if queue == "" {
		return q.queue, nil
	}
	if err := checkQueueName(queue); err != nil {
		return "", err
	}
	return queue, nil
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
