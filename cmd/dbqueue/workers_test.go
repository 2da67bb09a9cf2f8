package main

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// insertWorker writes a heartbeat row as a worker would, fresh for an hour.
func insertWorker(t *testing.T, db *dbtest.DB, id, name, host, queuesJSON string) {
	t.Helper()
	db.Exec(t, "INSERT INTO jobs_workers (id, name, host, pid, version, queues, concurrency, running, processed, started_at, last_seen, expires_at)"+
		" VALUES (?, ?, ?, 42, 'v1.2.3', ?, 8, 3, 1000, "+db.Now()+" - 60, "+db.Now()+" - 2, "+db.Now()+" + 3600)", id, name, host, queuesJSON)
}

// `dbqueue workers` lists the heartbeat rows, every text from them
// escaped for the terminal, and as JSON holding the text as stored.
func TestWorkersCommand(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		if out := must(t, db, "workers"); !strings.Contains(out, "no workers running") {
			t.Errorf("workers with none: %q", out)
		}
		if out := must(t, db, "workers", "-json"); strings.TrimSpace(out) != "[]" {
			t.Errorf("workers -json with none: %q, want []", out)
		}
		queues, _ := json.Marshal([]string{"mail", hostile})
		insertWorker(t, db, "w1", "billing", "app-1", string(queues))
		insertWorker(t, db, "w2", hostile, hostile, "[]")
		out := must(t, db, "workers")
		for _, want := range []string{"billing", "app-1", "42", "v1.2.3", `mail,evil\x1b[2J`, `evil\x1b[2J`} {
			if !strings.Contains(out, want) {
				t.Errorf("workers: no %q in\n%s", want, out)
			}
		}
		if !utf8.ValidString(out) {
			t.Fatalf("not UTF-8: %q", out)
		}
		for _, c := range out {
			if terminalUnsafe(c, true) {
				t.Fatalf("workers printed %U: %q", c, out)
			}
		}
		js := must(t, db, "workers", "-json")
		list := decode[[]workerRow](t, js)
		if len(list) != 2 || list[0].Name != "billing" || list[0].Running != 3 || list[0].Concurrency != 8 || list[0].PID != 42 ||
			len(list[0].Queues) != 2 || list[0].Queues[1] != hostile || list[1].Host != hostile || list[0].SeenAgo < 1 {
			t.Fatalf("workers -json: %+v", list)
		}
		for _, c := range js {
			if terminalUnsafe(c, true) {
				t.Fatalf("workers -json printed %U", c)
			}
		}
	})
}
