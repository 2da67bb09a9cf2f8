package dashboard_test

import (
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/dashboard"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// lie is what an attacker would like the dashboard to tell its operator.
const lie = "Session expired: sign in again at evil.example"

// TestFlashFromALinkIsNotShown: a crafted link to any page of the
// dashboard, or a cookie the dashboard did not sign, shows none of the
// attacker's text; a real action's line is shown on the page it returns
// to, once.
func TestFlashFromALinkIsNotShown(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		id := push(t, q, dbqueue.NewJob{Name: "a", Queue: "mail", Delay: time.Hour})
		uuid := failJob(t, q, "mail", "b", "boom")

		d, err := dashboard.New(q, dashboard.Options{})
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		mux.Handle("/", d)
		mux.Handle("/admin/queue/", http.StripPrefix("/admin/queue", d))
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		other := serve(t, q, dashboard.Options{}) // another secret

		pages := []string{"", "jobs", "jobs?queue=mail", fmt.Sprintf("job?id=%d", id), "failed", "failed-job?uuid=" + uuid}
		for _, prefix := range []string{"", "/admin/queue"} {
			s := &site{t: t, srv: srv, client: withCookies(t, noRedirects(srv.Client())), prefix: prefix}
			for _, page := range pages {
				sep := "?"
				if strings.Contains(page, "?") {
					sep = "&"
				}
				link := page + sep + url.Values{"flash": {lie}}.Encode()
				if body := s.page(link); strings.Contains(body, "evil.example") || strings.Contains(body, `id="flash"`) {
					t.Errorf("%s/%s shows the link's text", prefix, link)
				}
			}

			// A real action: its line is shown on the page it returns to,
			// and only there, once.
			loc := s.act("op", "pause", "queue", "mail", "back", "failed?queue=mail")
			if strings.Contains(loc, "flash") {
				t.Errorf("the action's redirect %q carries the message in the URL", loc)
			}
			back := s.page(loc)
			wantContains(t, prefix+" page after pause", back, `id="flash"`, "Paused queue &#34;mail&#34;")
			if again := s.page(loc); strings.Contains(again, `id="flash"`) {
				t.Errorf("%s: reloading the page after pause shows its line again", prefix)
			}
			if err := q.Resume(ctx, "mail"); err != nil {
				t.Fatal(err)
			}
		}

		// Cookies the dashboard did not sign: another dashboard's real one,
		// and any value an attacker could plant (a sibling site can set
		// cookies for this one).
		other.act("op", "pause", "queue", "mail")
		base, _ := url.Parse(other.srv.URL + "/")
		planted := other.client.Jar.Cookies(base)
		if len(planted) == 0 {
			t.Fatal("an action set no cookie")
		}
		name := planted[0].Name
		for _, value := range []string{
			planted[0].Value,
			base64.RawURLEncoding.EncodeToString(append(make([]byte, 40), lie...)),
			url.QueryEscape(lie),
		} {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+"/failed", nil)
			req.AddCookie(&http.Cookie{Name: name, Value: value})
			res, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(res.Body)
			res.Body.Close()
			if err != nil || res.StatusCode != http.StatusOK {
				t.Fatalf("GET failed with a planted cookie: %d %v", res.StatusCode, err)
			}
			if strings.Contains(string(body), `id="flash"`) {
				t.Errorf("a cookie %s=%.40s… the dashboard did not sign shows a line", name, value)
			}
		}
	})
}
