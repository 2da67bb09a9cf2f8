package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// TestDashboard serves the dashboard on a free port, reads a page and the
// counts, and stops on the interrupt (the context).
func TestDashboard(t *testing.T) {
	db := dbtest.New(t, dbqueue.SQLite)
	push(t, db.Queue(t), "mail", 0)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- runConsole(ctx, []string{"-dsn", db.DSN, "dashboard", "-addr", "127.0.0.1:0", "-read-only", "-queue", "idle"},
			console{in: strings.NewReader(""), out: pw, errOut: io.Discard})
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no first line: %v (exit: %v)", err, <-done)
	}
	go io.Copy(io.Discard, pr)
	m := regexp.MustCompile(`http://[^ ]+/`).FindString(line)
	if m == "" || !strings.Contains(line, "read-only") {
		t.Fatalf("first line %q names no URL or misses read-only", line)
	}
	for path, want := range map[string]string{"": `data-queue="mail"`, "api/stats": `"name":"idle"`} {
		res, err := http.Get(m + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Errorf("GET %s: %d, want 200 with %s: %.300s", path, res.StatusCode, want, body)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("dashboard after the interrupt: %v, want nil", err)
	}
}

func TestDashboardUsage(t *testing.T) {
	for _, args := range [][]string{
		{"dashboard", "-interval", "1ms"},
		{"dashboard", "extra"},
		{"dashboard", "-bogus"},
	} {
		db := dbtest.New(t, dbqueue.SQLite)
		if r := dbq(t, db, args...); r.code() != exitUsage {
			t.Errorf("dbqueue %v: exit %d (%v), want %d", args, r.code(), r.err, exitUsage)
		}
	}
	t.Setenv("DATABASE_URL", "")
	if r := dbq(t, nil, "dashboard"); r.code() != exitUsage || !strings.Contains(r.err.Error(), "DATABASE_URL") {
		t.Errorf("dashboard without a DSN: exit %d (%v), want usage naming DATABASE_URL", r.code(), r.err)
	}
}
