package dashboard

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// While maxSearches searches run, another is refused with 429 at once,
// not queued behind them; a page with nothing to search runs none.
func TestSearchesAreBounded(t *testing.T) {
	db := dbtest.New(t, dbqueue.SQLite)
	d, err := New(db.Queue(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for range maxSearches {
		d.searches <- struct{}{} // searches that are still running
	}
	get := func(path string) int {
		rec := httptest.NewRecorder()
		d.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://localhost/"+path, nil))
		return rec.Code
	}
	if code := get("search?text=x"); code != http.StatusTooManyRequests {
		t.Fatalf("a search beyond %d at once: %d, want 429", maxSearches, code)
	}
	if code := get("search"); code != http.StatusOK {
		t.Fatalf("the search form while searches run: %d, want 200", code)
	}
	<-d.searches
	if code := get("search?text=x"); code != http.StatusOK {
		t.Fatalf("a search once one ended: %d, want 200", code)
	}
}
