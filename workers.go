package dbqueue

import (
	"context"
	"encoding/json"
	"time"

	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// WorkerInfo is a running worker.Worker as its heartbeat row shows it.
// Every worker writes one every worker.Options.MetricsInterval, deletes it
// when it stops, and deletes those of workers that died (not seen for
// three intervals).
type WorkerInfo struct {
	// ID is drawn per Run; Name is worker.Options.Name.
	ID, Name string
	// Host and PID are the process's; Version is dbqueue's module version
	// in it ("(devel)" in a build without module information).
	Host    string
	PID     int64
	Version string
	// Queues the worker reads, in its order; Concurrency its goroutines.
	Queues      []string
	Concurrency int64
	// Running is how many jobs it held at its last heartbeat, Processed
	// how many it had finished since it started.
	Running, Processed int64
	// Started, LastSeen and Expires are by the database clock; Expires is
	// when another worker may delete the row as a dead worker's.
	Started, LastSeen, Expires time.Time
	// SeenAgo is how long before the database's now LastSeen was.
	SeenAgo time.Duration
}

// Workers lists the workers running on the queue's tables (of every
// queue), by name, host and pid. The table comes with migration 00009.
func (q *Queue) Workers(ctx context.Context) ([]WorkerInfo, error) {
	rows, now, err := q.sql.Workers(ctx, q.db)
	if err != nil {
		return nil, sqldb.Wrap("workers", err)
	}
	out := make([]WorkerInfo, 0, len(rows))
	for _, r := range rows {
		w := WorkerInfo{
			ID: r.ID, Name: r.Name, Host: r.Host, PID: r.PID, Version: r.Version,
			Concurrency: r.Concurrency, Running: r.Running, Processed: r.Processed,
			Started: time.Unix(r.StartedAt, 0), LastSeen: time.Unix(r.LastSeen, 0), Expires: time.Unix(r.ExpiresAt, 0),
			SeenAgo: time.Duration(max(now-r.LastSeen, 0)) * time.Second,
		}
		if json.Unmarshal([]byte(r.Queues), &w.Queues) != nil {
			w.Queues = []string{r.Queues} // written by another tool: show it as it is
		}
		out = append(out, w)
	}
	return out, nil
}

// HistoryQuery selects finished jobs for Queue.History; zero fields
// select all.
type HistoryQuery struct {
	Queue, Kind string
	// Outcome is "done" or "failed".
	Outcome string
	// Before pages back: entries with Seq below it.
	Before int64
	// Limit caps the entries (default 100, at most 10,000).
	Limit int
}

// HistoryEntry is a finished job, as worker.Options.HistoryRetention
// records it.
type HistoryEntry struct {
	// Seq orders entries (and pages them: HistoryQuery.Before).
	Seq, ID     int64
	UUID, Queue string
	Kind        string
	Attempts    int64
	// Finished is by the database clock; Runtime is the last run's.
	Finished time.Time
	Runtime  time.Duration
	// Outcome is "done" or "failed".
	Outcome string
}

// History reads finished jobs newest first, from the history workers
// write when worker.Options.HistoryRetention is set (off by default).
func (q *Queue) History(ctx context.Context, hq HistoryQuery) ([]HistoryEntry, error) {
	op := q.sql
	limit := hq.Limit
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 10000)
	rows, err := op.History(ctx, q.db, dialect.HistoryFilter{Queue: hq.Queue, Kind: hq.Kind, Outcome: hq.Outcome, BeforeSeq: hq.Before, Limit: limit})
	if err != nil {
		return nil, sqldb.Wrap("history", err)
	}
	out := make([]HistoryEntry, len(rows))
	for i, r := range rows {
		out[i] = HistoryEntry{
			Seq: r.Seq, ID: r.ID, UUID: r.UUID, Queue: r.Queue, Kind: r.Kind, Attempts: r.Attempts,
			Finished: time.Unix(r.FinishedAt, 0), Runtime: time.Duration(r.RuntimeUS) * time.Microsecond, Outcome: r.Outcome,
		}
	}
	return out, nil
}
