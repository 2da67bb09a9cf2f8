package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
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
		{"dashboard", "-allow-host", "https://queues.example.com/"},
		{"dashboard", "-addr", "8080"},
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

// syncBuffer is a strings.Builder the command may write while the test
// reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
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

// startDashboard runs dbqueue dashboard with args until the test ends,
// and returns the URL of its first line (with the port it got) and its
// standard error.
func startDashboard(t *testing.T, db *dbtest.DB, args ...string) (string, *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	pr, pw := io.Pipe()
	stderr := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- runConsole(ctx, append([]string{"-dsn", db.DSN, "dashboard"}, args...),
			console{in: strings.NewReader(""), out: pw, errOut: stderr})
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("dashboard %v after the interrupt: %v, want nil", args, err)
		}
	})
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		cancel()
		t.Fatalf("dashboard %v: no first line: %v (stderr %q)", args, err, stderr.String())
	}
	go io.Copy(io.Discard, pr)
	u := regexp.MustCompile(`http://[^ ]+/`).FindString(line)
	if u == "" {
		t.Fatalf("dashboard %v: first line %q names no URL", args, line)
	}
	return u, stderr
}

// hostRequest sends a request to base naming host in its Host header, as
// a browser does for a name rebound to the dashboard's address.
func hostRequest(t *testing.T, method, base, host, path string, form url.Values) (int, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		req.Header.Set("Origin", "http://"+host)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestDashboardRefusesRebinding: a web page that rebinds its name to the
// dashboard's address gets nothing from `dbqueue dashboard` on its
// defaults; the names given with -allow-host and localhost work.
func TestDashboardRefusesRebinding(t *testing.T) {
	db := dbtest.New(t, dbqueue.SQLite)
	q := db.Queue(t)
	push(t, q, "mail", 0)
	base, _ := startDashboard(t, db, "-addr", "127.0.0.1:0", "-allow-host", "queues.example.com")
	_, port, _ := net.SplitHostPort(strings.TrimSuffix(strings.TrimPrefix(base, "http://"), "/"))

	code, body := hostRequest(t, http.MethodGet, base, "127.0.0.1:"+port, "api/stats", nil)
	var stats struct{ CSRF string }
	if code != http.StatusOK || json.Unmarshal([]byte(body), &stats) != nil || stats.CSRF == "" {
		t.Fatalf("GET api/stats on 127.0.0.1: %d, want 200 with a token: %.300s", code, body)
	}
	for _, path := range []string{"", "jobs", "api/stats"} {
		if code, body := hostRequest(t, http.MethodGet, base, "attacker.example:"+port, path, nil); code != http.StatusMisdirectedRequest ||
			strings.Contains(body, `data-queue="mail"`) || strings.Contains(body, "csrf") {
			t.Errorf("GET %s with Host attacker.example: %d, want 421 and no data: %.300s", path, code, body)
		}
		for _, host := range []string{"localhost:" + port, "queues.example.com:" + port, "QUEUES.example.com"} {
			if code, body := hostRequest(t, http.MethodGet, base, host, path, nil); code != http.StatusOK {
				t.Errorf("GET %s with Host %s: %d, want 200: %.300s", path, host, code, body)
			}
		}
	}
	form := url.Values{"csrf": {stats.CSRF}, "op": {"pause"}, "queue": {"mail"}}
	if code, body := hostRequest(t, http.MethodPost, base, "attacker.example:"+port, "action", form); code != http.StatusMisdirectedRequest {
		t.Errorf("POST pause with Host attacker.example: %d, want 421: %.300s", code, body)
	}
	if p, err := q.Paused(context.Background(), "mail"); err != nil || p {
		t.Errorf("a rebound page's pause: paused %v (%v), want not paused", p, err)
	}
	if code, body := hostRequest(t, http.MethodPost, base, "queues.example.com", "action", form); code != http.StatusSeeOther {
		t.Errorf("POST pause with Host queues.example.com (-allow-host): %d, want 303: %.300s", code, body)
	}
}

// TestDashboardBeyondLoopback: on an address other machines reach, the
// command will not serve actions without a login unless told so loudly.
func TestDashboardBeyondLoopback(t *testing.T) {
	db := dbtest.New(t, dbqueue.SQLite)
	r := dbq(t, db, "dashboard", "-addr", "0.0.0.0:0")
	if r.code() != exitUsage || r.err == nil {
		t.Fatalf("dashboard -addr 0.0.0.0:0 with actions: exit %d (%v), want a usage refusal", r.code(), r.err)
	}
	for _, says := range []string{"-read-only", "-allow-remote-actions", "127.0.0.1", "no login"} {
		if !strings.Contains(r.err.Error(), says) {
			t.Errorf("the refusal does not say %q: %v", says, r.err)
		}
	}

	base, stderr := startDashboard(t, db, "-addr", "0.0.0.0:0", "-allow-remote-actions")
	if !strings.Contains(stderr.String(), "WARNING") || !strings.Contains(stderr.String(), "NO LOGIN") {
		t.Errorf("-allow-remote-actions on 0.0.0.0: stderr %q, want a warning", stderr.String())
	}
	// The URL it prints is one a browser can open.
	res, err := http.Get(base + "api/stats")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("GET %sapi/stats, the URL of the first line: %d, want 200", base, res.StatusCode)
	}
	_, port, _ := net.SplitHostPort(strings.TrimSuffix(strings.TrimPrefix(base, "http://"), "/"))
	local := "http://127.0.0.1:" + port + "/"
	if code, _ := hostRequest(t, http.MethodGet, local, "attacker.example", "api/stats", nil); code != http.StatusMisdirectedRequest {
		t.Errorf("GET api/stats with Host attacker.example on 0.0.0.0: %d, want 421", code)
	}
	// Listening on every interface, it answers to the interfaces' addresses.
	if ip := firstOutsideAddress(t); ip != "" {
		if code, body := hostRequest(t, http.MethodGet, local, net.JoinHostPort(ip, port), "api/stats", nil); code != http.StatusOK {
			t.Errorf("GET api/stats with Host %s (an interface's address): %d, want 200: %.300s", ip, code, body)
		}
	}

	_, stderr = startDashboard(t, db, "-addr", "0.0.0.0:0", "-read-only")
	if s := stderr.String(); strings.Contains(s, "WARNING") {
		t.Errorf("-read-only on 0.0.0.0 warns: %q", s)
	}
	_, stderr = startDashboard(t, db, "-addr", "127.0.0.1:0")
	if s := stderr.String(); strings.Contains(s, "WARNING") {
		t.Errorf("actions on 127.0.0.1 warn: %q", s)
	}
}

// firstOutsideAddress is an address of this machine that is not a
// loopback one, or "".
func firstOutsideAddress(t *testing.T) string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	t.Log("no address beyond loopback: not checking that the interfaces' addresses are served")
	return ""
}
