package dashboard_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/dashboard"
	_ "github.com/dbqueue/dbqueue/driver/dbqsqlite" // makes sqlite: DSNs known to Open
	"github.com/dbqueue/dbqueue/migrations"
)

// Mount the dashboard under a path of the application's own mux, behind
// the application's authentication. Every link of the dashboard is
// relative, so http.StripPrefix is all it takes.
func Example() {
	dir, err := os.MkdirTemp("", "dbqueue-dashboard-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	dsn := "sqlite:" + filepath.Join(dir, "queue.db")
	if err := migrations.UpDSN(ctx, dsn, migrations.WithLogger(slog.New(slog.DiscardHandler))); err != nil {
		log.Fatal(err)
	}
	q, err := dbqueue.Open(ctx, dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close()

	dash, err := dashboard.New(q, dashboard.Options{
		// Called for every request: the application's own check. An error
		// answers 403 Forbidden with its text.
		Authorize: func(r *http.Request) error {
			if r.Header.Get("X-Admin") != "yes" { // a session lookup, in a real application
				return errors.New("sign in as an administrator")
			}
			return nil
		},
		// The names the application is reached by. Loopback names are
		// always served; any other Host is refused (DNS rebinding).
		AllowedHosts: []string{"admin.example.com"},
	})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/admin/queue/", http.StripPrefix("/admin/queue", dash))
	// In the application: http.ListenAndServe(":8080", mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	if _, err := q.Push(ctx, dbqueue.NewJob{Name: "send-mail", Queue: "mail"}); err != nil {
		log.Fatal(err)
	}
	get := func(path string, admin bool) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if admin {
			req.Header.Set("X-Admin", "yes")
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		return res
	}

	res := get("/admin/queue/", false)
	res.Body.Close()
	fmt.Println("a stranger gets", res.Status)

	// The page polls api/stats for its counts; scripts may read it too.
	res = get("/admin/queue/api/stats", true)
	defer res.Body.Close()
	var stats struct{ Queues []dashboard.QueueStats }
	if err := json.NewDecoder(res.Body).Decode(&stats); err != nil {
		log.Fatal(err)
	}
	for _, s := range stats.Queues {
		fmt.Printf("%s: %d pending, paused %v\n", s.Name, s.Pending, s.Paused)
	}
	// Output:
	// a stranger gets 403 Forbidden
	// default: 0 pending, paused false
	// mail: 1 pending, paused false
}
