// Package dbqueuetest gives tests of code that enqueues jobs a real queue
// that needs no server: a migrated SQLite database in the test's temporary
// directory, removed when the test ends. It is to dbqueue what httptest is
// to net/http.
package dbqueuetest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/dbqueue/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/sqldb"
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
	h := sqldb.HandleOf(q)
	if queue == "" {
		queue = h.Queue
	}
	rows, err := h.DB.Query(context.Background(), h.Dialect.Rebind("SELECT payload FROM jobs WHERE queue = ? ORDER BY id"), queue)
	if err != nil {
		t.Fatalf("dbqueuetest: %v", err)
	}
	defer rows.Close()
	var out []dbqueue.Payload
	for rows.Next() {
		var raw []byte
		if err := rows.Scan(&raw); err != nil {
			t.Fatal(err)
		}
		p, err := dbqueue.DecodePayload(raw)
		if err != nil {
			t.Fatalf("dbqueuetest: %v", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
