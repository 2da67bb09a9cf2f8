package dbqueue_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/driver/dbqsqlite"
	"github.com/dbqueue/dbqueue/failed"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/migrations"
)

// pagingRow is one job the paging test pushed, and what became of it.
type pagingRow struct {
	id           int64
	uuid         string
	name, queue  string
	note, secret string
	deleted      bool
	failedAt     int // order of failing, from 1; 0 while in jobs
	exception    string
}

// pagingSearches are the searches the paging test draws from: keys that
// the database narrows (queue, text) and keys it only approximates and
// Go checks (a name also inside longer names, a text the redactor hides
// in some rows), so a page also reads rows it does not keep.
var pagingSearches = []dbqueue.Search{
	{Queue: "a"}, {Queue: "b"}, {Name: "X"}, {Name: `App\Jobs\X`}, {Text: "needle"},
	{Queue: "b", Text: "needle"}, {Name: "XY", Queue: "a"}, {Text: "boom"},
}

// Paging a search with BeforeID = the last page's Oldest, until a page is
// Complete, returns every match exactly once, newest first, and reads
// every row of the table exactly once, for random rows (with gaps in the
// ids), windows and limits: a page that stops at Limit ends at its last
// match, not at its window's end. Both tables, all three databases.
func TestSearchPagingFindsEveryMatchOnce(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		seed := uint64(time.Now().UnixNano())
		rng := rand.New(rand.NewPCG(seed, 7))
		defer func() {
			if t.Failed() {
				t.Logf("seed %d", seed)
			}
		}()
		q := db.Queue(t, dbqueue.WithRedactor(dbqueue.RedactFields("data.secret")))
		store, err := failed.New(q)
		if err != nil {
			t.Fatal(err)
		}
		n := 30 + rng.IntN(50)
		rows := make([]*pagingRow, n)
		jobs := make([]dbqueue.NewJob, n)
		for i := range rows {
			r := &pagingRow{name: []string{"X", "XY", `App\Jobs\X`}[rng.IntN(3)], queue: []string{"a", "b"}[rng.IntN(2)]}
			if rng.IntN(3) == 0 {
				r.note = "a needle here"
			}
			if rng.IntN(4) == 0 {
				r.secret = "needle" // redacted: never found by its text
			}
			rows[i] = r
			jobs[i] = dbqueue.NewJob{Name: r.name, Queue: r.queue, Data: map[string]string{"note": r.note, "secret": r.secret}}
		}
		ids, err := q.PushMany(ctx, jobs)
		if err != nil {
			t.Fatal(err)
		}
		byID := map[int64]*pagingRow{}
		for i, id := range ids {
			rows[i].id = id
			byID[id] = rows[i]
		}
		for _, r := range rows { // gaps in the ids
			if rng.IntN(5) == 0 {
				r.deleted = true
				db.Exec(t, "DELETE FROM jobs WHERE id = ?", r.id)
			}
		}
		held, err := q.Reserve(ctx, 10+rng.IntN(20), "b")
		if err != nil {
			t.Fatal(err)
		}
		for i, job := range held {
			r := byID[job.ID]
			r.uuid, r.failedAt, r.exception = job.Payload.UUID, i+1, []string{"boom", "no luck"}[rng.IntN(2)]
			if err := q.Fail(ctx, job, errors.New(r.exception)); err != nil {
				t.Fatal(err)
			}
		}
		inJobs, inFailed := 0, len(held)
		for _, r := range rows {
			if !r.deleted && r.failedAt == 0 {
				inJobs++
			}
		}
		match := func(r *pagingRow, s dbqueue.Search, failed bool) bool {
			return (s.Queue == "" || r.queue == s.Queue) && (s.Name == "" || r.name == s.Name) &&
				(s.Text == "" || strings.Contains(r.note, s.Text) || failed && strings.Contains(r.exception, s.Text))
		}

		for trial := range 25 {
			s := pagingSearches[rng.IntN(len(pagingSearches))]
			s.Scan, s.Limit = 1+rng.IntN(n+5), 1+rng.IntN(8)
			what := fmt.Sprintf("trial %d: %+v", trial, s)

			var want, got []int64 // jobs ids, newest first
			for _, r := range slices.Backward(rows) {
				if !r.deleted && r.failedAt == 0 && match(r, s, false) {
					want = append(want, r.id)
				}
			}
			page, scanned, err := pageAll(s, inJobs, q.SearchJobs, func(j dbqueue.JobInfo) int64 { return j.ID })
			if err != nil {
				t.Fatalf("%s in jobs: %v", what, err)
			}
			for _, j := range page {
				got = append(got, j.ID)
			}
			if !slices.Equal(got, want) || scanned != inJobs {
				t.Fatalf("%s in jobs: pages found %v, want %v; read %d rows of %d", what, got, want, scanned, inJobs)
			}

			var wantU, gotU []string // failed uuids, newest first
			for i := len(held); i >= 1; i-- {
				for _, r := range rows {
					if r.failedAt == i && match(r, s, true) {
						wantU = append(wantU, r.uuid)
					}
				}
			}
			fpage, scanned, err := pageAll(s, inFailed, store.Search, func(j failed.Job) int64 { return j.ID })
			if err != nil {
				t.Fatalf("%s in failed_jobs: %v", what, err)
			}
			for _, j := range fpage {
				gotU = append(gotU, j.UUID)
			}
			if !slices.Equal(gotU, wantU) || scanned != inFailed {
				t.Fatalf("%s in failed_jobs: pages found %v, want %v; read %d rows of %d", what, gotU, wantU, scanned, inFailed)
			}
		}
	})
}

// pageAll runs search from the newest rows, each page from the last
// one's Oldest, until a page is Complete, and returns the matches of all
// pages and the rows they read, or what went wrong: a page over its
// limit or window, matches not newest first across pages, a page that
// stopped at Limit but does not end at its last match, or one that does
// not go on below the last.
func pageAll[T any](s dbqueue.Search, rows int, search func(context.Context, dbqueue.Search) (dbqueue.SearchResult[T], error),
	id func(T) int64) (all []T, scanned int, err error) {
	for page := 0; ; page++ {
		if page > rows+1 {
			return all, scanned, fmt.Errorf("still not Complete after %d pages", page)
		}
		res, err := search(ctx, s)
		if err != nil {
			return all, scanned, fmt.Errorf("page %d: %w", page, err)
		}
		for _, m := range res.Matches {
			if len(all) > 0 && id(m) >= id(all[len(all)-1]) {
				return all, scanned, fmt.Errorf("page %d: match %d after %d", page, id(m), id(all[len(all)-1]))
			}
			all = append(all, m)
		}
		scanned += res.Scanned
		switch {
		case len(res.Matches) > s.Limit:
			return all, scanned, fmt.Errorf("page %d: %d matches, over the limit", page, len(res.Matches))
		case res.Scanned > s.Scan:
			return all, scanned, fmt.Errorf("page %d: read %d rows, over the window", page, res.Scanned)
		case len(res.Matches) == s.Limit && res.Oldest != id(res.Matches[s.Limit-1]):
			return all, scanned, fmt.Errorf("page %d stopped at the limit, its last match %d, but says it read down to %d", page, id(res.Matches[s.Limit-1]), res.Oldest)
		}
		if res.Complete {
			return all, scanned, nil
		}
		if s.BeforeID != 0 && res.Oldest >= s.BeforeID || res.Oldest <= 0 {
			return all, scanned, fmt.Errorf("page %d: Oldest %d does not go on below %d", page, res.Oldest, s.BeforeID)
		}
		s.BeforeID = res.Oldest
	}
}

// A search that stops at its limit on a pool of one connection (SQLite
// in memory, or a pool the application capped) still measures what it
// read: its rows are closed before the next statement, which would
// otherwise wait for the connection they hold until the search times out.
func TestSearchLimitOnOneConnection(t *testing.T) {
	db, dialect, err := dbqueue.OpenSQL("sqlite:" + filepath.Join(t.TempDir(), "one.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := migrations.Up(ctx, db, dialect); err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1) // after migrating: goose's SQLite locker holds a connection of its own
	q, err := dbqueue.New(ctx, dbqsqlite.New(db))
	if err != nil {
		t.Fatal(err)
	}
	var last int64
	for range 3 {
		last = push(t, q, dbqueue.NewJob{Name: "X"})
	}
	res, err := q.SearchJobs(ctx, dbqueue.Search{Name: "X", Limit: 2})
	if err != nil || len(res.Matches) != 2 || res.Complete || res.Scanned != 2 || res.Oldest != last-1 {
		t.Fatalf("search stopped at its limit: %+v, %v; want 2 matches, 2 rows read, down to %d", res, err, last-1)
	}
}
