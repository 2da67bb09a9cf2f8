package dialecttest

import (
	"slices"
	"strconv"
	"testing"

	"github.com/dbqueue/dbqueue/internal/dialect"
)

// searcherTests are Searcher's (own tables: a search reads a window of
// the newest rows of the whole table).
var searcherTests = []test{
	{method: "SearchJobs", fn: searchJobs},
	{method: "SearchFailed", fn: searchFailed},
}

// SearchJobs reads the newest Scan rows below BeforeID, newest first,
// hands those that match to keep until it took Limit, and says what the
// window held; an ID reads that row alone.
func searchJobs(t *testing.T, s *suite) {
	o := s.own(t)
	sr := o.Dialect
	q, other := o.queue(t), o.queue(t)
	var rows []dialect.PushRow
	for i := range 6 {
		qq := q
		if i == 4 {
			qq = other
		}
		p := []byte(`{"uuid":"` + strconv.Itoa(i) + `","data":"needle-` + strconv.Itoa(i%2) + ` Ünï"}`)
		rows = append(rows, dialect.PushRow{Queue: qq, Payload: p})
	}
	ids := o.insert(t, rows)
	search := func(f dialect.SearchFilter) ([]int64, dialect.Window) {
		t.Helper()
		var got []int64
		w, err := sr.SearchJobs(o.ctx, o.DB, f, func(r dialect.StatedRow) bool {
			if r.State != dialect.StatePending {
				t.Errorf("row %d reads state %q", r.ID, r.State)
			}
			got = append(got, r.ID)
			return true
		})
		if err != nil {
			t.Fatalf("search %+v: %v", f, err)
		}
		return got, w
	}
	got, w := search(dialect.SearchFilter{Scan: 4, Limit: 10, Queue: q})
	if want := []int64{ids[5], ids[3], ids[2]}; !slices.Equal(got, want) || w.Rows != 4 || w.Oldest != ids[2] || !w.More {
		t.Fatalf("search of %s in the newest 4: %v, window %+v; want %v, a window of 4 from %d with more", q, got, w, want, ids[2])
	}
	got, w = search(dialect.SearchFilter{Scan: 4, Limit: 10, BeforeID: ids[2]})
	if want := []int64{ids[1], ids[0]}; !slices.Equal(got, want) || w.Rows != 2 || w.More {
		t.Fatalf("search before %d: %v, window %+v; want %v, 2 rows, no more", ids[2], got, w, want)
	}
	if got, _ = search(dialect.SearchFilter{Scan: 10, Limit: 10, Contains: []string{"needle-1", "Ünï"}}); !slices.Equal(got, []int64{ids[5], ids[3], ids[1]}) {
		t.Fatalf("search for two texts: %v", got)
	}
	if got, _ = search(dialect.SearchFilter{Scan: 10, Limit: 10, Contains: []string{"NEEDLE-1"}}); len(got) != 0 {
		t.Fatalf("a search matches another case: %v", got)
	}
	if got, _ = search(dialect.SearchFilter{Scan: 10, Limit: 2}); !slices.Equal(got, []int64{ids[5], ids[4]}) {
		t.Fatalf("search with limit 2: %v", got)
	}
	if got, _ = search(dialect.SearchFilter{ID: ids[1], Limit: 10}); !slices.Equal(got, []int64{ids[1]}) {
		t.Fatalf("search by id: %v", got)
	}
	// keep decides what counts toward Limit.
	var seen []int64
	if _, err := sr.SearchJobs(o.ctx, o.DB, dialect.SearchFilter{Scan: 10, Limit: 1}, func(r dialect.StatedRow) bool {
		seen = append(seen, r.ID)
		return r.ID == ids[3]
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seen, []int64{ids[5], ids[4], ids[3]}) {
		t.Fatalf("a search whose keep takes only %d saw %v, want it to stop there", ids[3], seen)
	}
}

// SearchFailed is SearchJobs on failed_jobs, Contains matching the
// exception too, and a UUID reading that row alone.
func searchFailed(t *testing.T, s *suite) {
	o := s.own(t)
	sr := o.Dialect
	q := o.queue(t)
	var rows []dialect.FailedRow
	for i := range 4 {
		rows = append(rows, o.failed(t, q, q+"-"+strconv.Itoa(i))) // exception "boom <uuid>"
	}
	search := func(f dialect.SearchFilter) ([]int64, dialect.Window) {
		t.Helper()
		var got []int64
		w, err := sr.SearchFailed(o.ctx, o.DB, f, func(r dialect.FailedRow) bool {
			got = append(got, r.ID)
			return true
		})
		if err != nil {
			t.Fatalf("search %+v: %v", f, err)
		}
		return got, w
	}
	got, w := search(dialect.SearchFilter{Scan: 3, Limit: 10})
	if want := failedIDs([]dialect.FailedRow{rows[3], rows[2], rows[1]}); !slices.Equal(got, want) || w.Rows != 3 || w.Oldest != rows[1].ID || !w.More {
		t.Fatalf("search of the newest 3: %v, window %+v; want %v with more", got, w, want)
	}
	if got, _ = search(dialect.SearchFilter{Scan: 10, Limit: 10, Contains: []string{"boom " + rows[2].UUID}}); !slices.Equal(got, []int64{rows[2].ID}) {
		t.Fatalf("search of the exception's text: %v, want %d", got, rows[2].ID)
	}
	if got, _ = search(dialect.SearchFilter{UUID: rows[0].UUID, Limit: 10}); !slices.Equal(got, []int64{rows[0].ID}) {
		t.Fatalf("search by uuid: %v", got)
	}
	if got, _ = search(dialect.SearchFilter{ID: rows[1].ID, Limit: 10}); !slices.Equal(got, []int64{rows[1].ID}) {
		t.Fatalf("search by id: %v", got)
	}
}
