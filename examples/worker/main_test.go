package main

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
