package worker

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/dbqueue/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// The signals live in the dbqueue_signals table (migration 00002): Laravel
// keeps them in its cache, dbqueue where the jobs are.
const restartSignal = "restart"

func pauseSignal(connection, queue string) string {
	return "pause:" + connection + ":" + queue
}

// Restart asks every worker on the queue's database to stop once its
// current jobs are done, like `php artisan queue:restart`; a supervisor
// then starts them again with new code. Workers notice within their
// SignalInterval.
func Restart(ctx context.Context, q *dbqueue.Queue) error {
	h := sqldb.HandleOf(q)
	return setSignal(ctx, h, restartSignal, h.Dialect.Now())
}

// Pause stops every worker from taking new jobs from one queue of this
// connection, like Laravel's queue:pause, until Resume. Running jobs finish.
func Pause(ctx context.Context, q *dbqueue.Queue, queue string) error {
	h := sqldb.HandleOf(q)
	if queue == "" {
		queue = h.Queue
	}
	return setSignal(ctx, h, pauseSignal(h.Connection, queue), "1")
}

// Resume lets workers take jobs from a paused queue again.
func Resume(ctx context.Context, q *dbqueue.Queue, queue string) error {
	h := sqldb.HandleOf(q)
	if queue == "" {
		queue = h.Queue
	}
	err := sqldb.Retry(ctx, func() error {
		_, err := h.DB.Exec(ctx, h.Dialect.Rebind("DELETE FROM dbqueue_signals WHERE name = ?"), pauseSignal(h.Connection, queue))
		return err
	})
	return signalErr("resume", err)
}

// Paused reports whether a queue is paused.
func Paused(ctx context.Context, q *dbqueue.Queue, queue string) (bool, error) {
	h := sqldb.HandleOf(q)
	if queue == "" {
		queue = h.Queue
	}
	var v int64
	err := h.DB.QueryRow(ctx, h.Dialect.Rebind("SELECT value FROM dbqueue_signals WHERE name = ?"), pauseSignal(h.Connection, queue)).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) { // pgx.ErrNoRows matches it too

		return false, nil
	}
	if err != nil {
		return false, signalErr("paused", err)
	}
	return true, nil
}

func setSignal(ctx context.Context, h sqldb.Handle, name, valueExpr string) error {
	var stmt string
	switch h.Dialect {
	case sqldb.MySQL:
		stmt = "INSERT INTO dbqueue_signals (name, value) VALUES (?, " + valueExpr + ") ON DUPLICATE KEY UPDATE value = VALUES(value)"
	default:
		stmt = "INSERT INTO dbqueue_signals (name, value) VALUES (?, " + valueExpr + ") ON CONFLICT (name) DO UPDATE SET value = excluded.value"
	}
	err := sqldb.Retry(ctx, func() error {
		_, err := h.DB.Exec(ctx, h.Dialect.Rebind(stmt), name)
		return err
	})
	return signalErr("signal", err)
}

func signalErr(op string, err error) error {
	if err == nil {
		return nil
	}
	if sqldb.MissingTable(err) {
		return fmt.Errorf("worker: %s: the dbqueue_signals table is missing: run `go run ./cmd/migrate up` (%w)", op, err)
	}
	return fmt.Errorf("worker: %s: %w", op, err)
}

// signals is one reading of the signals a worker obeys.
type signals struct {
	restart int64           // value of the restart signal, 0 if never sent
	paused  map[string]bool // queue name → paused
}

// readSignals reads the restart signal and the pause state of queues in
// one query.
func readSignals(ctx context.Context, h sqldb.Handle, queues []string) (signals, error) {
	names := []any{restartSignal}
	byName := map[string]string{}
	for _, q := range queues {
		n := pauseSignal(h.Connection, q)
		names = append(names, n)
		byName[n] = q
	}
	rows, err := h.DB.Query(ctx, h.Dialect.Rebind("SELECT name, value FROM dbqueue_signals WHERE name IN ("+sqldb.List(len(names))+")"), names...)
	if err != nil {
		return signals{}, signalErr("read signals", err)
	}
	defer rows.Close()
	s := signals{paused: map[string]bool{}}
	for rows.Next() {
		var (
			name  string
			value int64
		)
		if err := rows.Scan(&name, &value); err != nil {
			return signals{}, err
		}
		if name == restartSignal {
			s.restart = value
		} else if q, ok := byName[name]; ok {
			s.paused[q] = true
		}
	}
	return s, rows.Err()
}
