package main

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

func TestWorkerExampleRunsAndStops(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "q.db")
	if err := run(ctx, dsn, 5, log); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(logs.String(), "welcome mail sent"); n != 5 {
		t.Fatalf("%d mails sent, want 5:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "reason=cancelled") {
		t.Fatalf("no graceful stop logged:\n%s", logs.String())
	}
}

// The migrations' notices go to the application's logger, the one its
// worker logs to, not to slog.Default(): on a fresh PostgreSQL schema,
// migration 00012 reports the autovacuum options it set.
func TestWorkerExampleLogsMigrationsToItsLogger(t *testing.T) {
	db := dbtest.Empty(t, dbqueue.Postgres)
	var logs syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Stopped once its one job ran: the migrations are long done.
	log := slog.New(stopOn{Handler: slog.NewTextHandler(&logs, nil), msg: "welcome mail sent", stop: cancel})
	if err := run(ctx, db.DSN, 1, log); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "dbqueue migrations: set autovacuum") {
		t.Fatalf("the migrations' notice is not in the application's log:\n%s", logs.String())
	}
}

// syncBuffer is a bytes.Buffer the worker's goroutines may write to at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// stopOn is a slog handler that calls stop when a record's message is msg.
type stopOn struct {
	slog.Handler
	msg  string
	stop func()
}

func (h stopOn) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.stop()
	}
	return h.Handler.Handle(ctx, r)
}

func (h stopOn) WithAttrs(attrs []slog.Attr) slog.Handler {
	h.Handler = h.Handler.WithAttrs(attrs)
	return h
}
