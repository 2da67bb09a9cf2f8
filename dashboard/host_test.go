package dashboard_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/dashboard"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// as sends a request naming host in its Host header, as a browser does
// for the name it was asked to open, whatever address that name resolved
// to. header pairs add headers.
func (s *site) as(host, method, path string, form url.Values, header ...string) (int, string) {
	s.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, s.srv.URL+s.prefix+"/"+path, body)
	if err != nil {
		s.t.Fatal(err)
	}
	req.Host = host
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := s.client.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestDNSRebinding: a page on attacker.example rebinds its name to the
// dashboard's address. The browser then sends the page's requests to the
// dashboard as same-origin ones, with Host attacker.example. None of them
// may read a page, the counts or a token, or act.
func TestDNSRebinding(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		s := serve(t, q, dashboard.Options{AllowedHosts: []string{"admin.example.com", "*.corp.example", "192.0.2.7"}})
		id := push(t, q, dbqueue.NewJob{Name: "send-mail", Queue: "mail", Delay: time.Hour, Data: map[string]string{"password": "hunter2"}})
		uuid := failJob(t, q, "mail", "charge-card", "card 4111 declined")
		token := s.token() // the worst case: the page holds a valid token

		rebound := []string{
			"attacker.example:8080", "attacker.example", "ATTACKER.EXAMPLE:80",
			"localhost.attacker.example", "127.0.0.1.nip.io:8080", "admin.example.com.attacker.example",
			"corp.example", "evil-corp.example", "notadmin.example.com", "10.1.2.3:8080", "0.0.0.0:8080",
			"[::2]:8080", "192.0.2.77", "localhost:80x", "[::1]x", "::1",
		}
		pages := []string{"", "jobs", fmt.Sprintf("job?id=%d", id), "failed", "failed-job?uuid=" + uuid,
			"api/stats", "static/app.js", "nowhere", "action", "metrics", "metrics?range=week", "workers", "?after=mail",
			"search", "search?in=jobs&text=hunter2", "search?in=failed&text=4111"}
		for _, host := range rebound {
			for _, page := range pages {
				code, body := s.as(host, http.MethodGet, page, nil)
				if code != http.StatusMisdirectedRequest {
					t.Errorf("GET %s with Host %q: %d, want 421: %.200s", page, host, code, body)
					continue
				}
				if strings.Contains(body, "hunter2") || strings.Contains(body, "4111") || strings.Contains(body, "csrf") {
					t.Errorf("GET %s with Host %q: the refusal shows the dashboard's data: %.300s", page, host, body)
				}
				if !strings.Contains(body, "AllowedHosts") {
					t.Errorf("GET %s with Host %q: the refusal does not say what to do: %.300s", page, host, body)
				}
			}
			for _, op := range [][]string{
				{"op", "pause", "queue", "mail"}, {"op", "resume", "queue", "mail"},
				{"op", "retry", "uuid", uuid}, {"op", "forget", "uuid", uuid},
				{"op", "retry-all", "queue", "mail"}, {"op", "retry-all"}, {"op", "flush"},
				{"op", "cancel", "id", fmt.Sprint(id)}, {"op", "run-now", "id", fmt.Sprint(id)},
			} {
				form := url.Values{"csrf": {token}}
				for i := 0; i+1 < len(op); i += 2 {
					form.Set(op[i], op[i+1])
				}
				// After rebinding the browser calls the post same-origin.
				code, body := s.as(host, http.MethodPost, "action", form,
					"Sec-Fetch-Site", "same-origin", "Origin", "http://"+host)
				if code != http.StatusMisdirectedRequest {
					t.Errorf("POST %v with Host %q: %d, want 421: %.200s", op, host, code, body)
				}
			}
		}
		// X-Forwarded-Host is anyone's to send: it does not make a foreign
		// Host acceptable.
		if code, _ := s.as("attacker.example", http.MethodGet, "api/stats", nil, "X-Forwarded-Host", "127.0.0.1"); code != http.StatusMisdirectedRequest {
			t.Errorf("foreign Host with X-Forwarded-Host 127.0.0.1: %d, want 421", code)
		}
		if p, _ := q.Paused(ctx, "mail"); p {
			t.Errorf("a rebound page paused the queue")
		}
		if got := failedUUIDs(t, q); len(got) != 1 || got[0] != uuid {
			t.Errorf("a rebound page changed failed_jobs: %v", got)
		}
		if j, err := q.Job(ctx, id); err != nil || j.State != dbqueue.JobDelayed {
			t.Errorf("a rebound page changed job %d: %+v, %v; want it delayed", id, j, err)
		}

		// The names the dashboard serves: loopback ones on any port, and
		// the configured ones, however the browser spells them.
		port := s.srv.Listener.Addr().(*net.TCPAddr).Port
		served := []string{
			fmt.Sprintf("127.0.0.1:%d", port), fmt.Sprintf("localhost:%d", port), "LOCALHOST", "localhost.",
			"127.0.0.2:9", "[::1]:8080", "[::1]", "app.localhost:8080", "[::ffff:127.0.0.1]:80",
			"admin.example.com", "Admin.Example.COM.:443", "q.corp.example", "a.b.corp.example:8443", "192.0.2.7:8080",
		}
		for _, host := range served {
			for _, page := range []string{"", "api/stats", fmt.Sprintf("job?id=%d", id)} {
				if code, body := s.as(host, http.MethodGet, page, nil); code != http.StatusOK {
					t.Errorf("GET %s with Host %q: %d, want 200: %.200s", page, host, code, body)
				}
			}
		}
		form := url.Values{"csrf": {token}, "op": {"pause"}, "queue": {"mail"}}
		code, body := s.as("admin.example.com", http.MethodPost, "action", form,
			"Sec-Fetch-Site", "same-origin", "Origin", "http://admin.example.com")
		if code != http.StatusSeeOther {
			t.Errorf("POST pause with Host admin.example.com: %d, want 303: %.200s", code, body)
		}
		if p, _ := q.Paused(ctx, "mail"); !p {
			t.Errorf("an action on a configured host did not pause the queue")
		}
	})
}

// TestNoHost: a request without a Host header (HTTP/1.0) names no host
// the dashboard serves.
func TestNoHost(t *testing.T) {
	db := dbtest.New(t, dbqueue.SQLite)
	s := serve(t, db.Queue(t), dashboard.Options{})
	conn, err := net.Dial("tcp", s.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(conn, "GET /api/stats HTTP/1.0\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusMisdirectedRequest || strings.Contains(string(body), "csrf") || !strings.Contains(string(body), "Host") {
		t.Errorf("HTTP/1.0 request without Host: %d, want 421 naming the Host header: %.300s", res.StatusCode, body)
	}
}

// TestAllowedHostsAny: "*" is for a proxy that checks the Host itself.
func TestAllowedHostsAny(t *testing.T) {
	db := dbtest.New(t, dbqueue.SQLite)
	s := serve(t, db.Queue(t), dashboard.Options{AllowedHosts: []string{"*"}})
	if code, body := s.as("tenant-7.example.net", http.MethodGet, "api/stats", nil); code != http.StatusOK {
		t.Errorf("AllowedHosts *: Host tenant-7.example.net: %d, want 200: %.200s", code, body)
	}
}

func TestAllowedHostsRefusesBadEntries(t *testing.T) {
	db := dbtest.New(t, dbqueue.SQLite)
	q := db.Queue(t)
	for _, entry := range []string{"", " ", "https://admin.example.com", "admin.example.com:8443", "admin.example.com/queue",
		"*.192.0.2.7", "ad*min.example.com", "user@admin.example.com", "[::1]:80"} {
		_, err := dashboard.New(q, dashboard.Options{AllowedHosts: []string{entry}})
		if err == nil || !strings.Contains(err.Error(), "AllowedHosts") {
			t.Errorf("AllowedHosts %q: %v, want an error naming AllowedHosts", entry, err)
		}
	}
	if _, err := dashboard.New(q, dashboard.Options{AllowedHosts: []string{"Admin.Example.com.", "*.example.org", "::1", "[2001:db8::1]", "192.0.2.7"}}); err != nil {
		t.Errorf("good AllowedHosts: %v", err)
	}
}
