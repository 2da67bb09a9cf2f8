// Package dbqueuetest gives tests of code that enqueues jobs a real queue
// that needs no server: a migrated SQLite database in the test's temporary
// directory, removed when the test ends. It is to dbqueue what httptest is
// to net/http.
package dbqueuetest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/dbqueue/dbqueue"
	_ "github.com/dbqueue/dbqueue/driver/dbqsqlite" // the embedded default
	"github.com/dbqueue/dbqueue/internal/core"
	"github.com/dbqueue/dbqueue/migrations"
)

// New returns a queue on a fresh, migrated SQLite file, closed when the
// test ends. Options are passed to dbqueue.Open.
func New(t testing.TB, opts ...dbqueue.Option) *dbqueue.Queue {
	t.Helper()
	ctx := context.Background()
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "queue.db")
	if err := migrations.UpDSN(ctx, dsn); err != nil {
		t.Fatalf("dbqueuetest: migrate: %v", err)
	}
	q, err := dbqueue.Open(ctx, dsn, opts...)
	if err != nil {
		t.Fatalf("dbqueuetest: open: %v", err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

// Pushed returns the payloads of the jobs waiting in a queue ("" for the
// default), oldest first, without reserving them: for asserting what the
// code under test enqueued.
func Pushed(t testing.TB, q *dbqueue.Queue, queue string) []dbqueue.Payload {
	t.Helper()
	c := core.Of(q)
	if queue == "" {
		queue = c.DefaultQueue
	}
	raws, err := c.Dialect.Payloads(context.Background(), c.DB, queue)
	if err != nil {
		t.Fatalf("dbqueuetest: %v", err)
	}
	out := make([]dbqueue.Payload, 0, len(raws))
	for _, raw := range raws {
		p, err := dbqueue.DecodePayload(raw)
		if err != nil {
			t.Fatalf("dbqueuetest: %v", err)
		}
		out = append(out, p)
	}
	return out
}
