package dashboard_test

import (
	"fmt"
	"html"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/dashboard"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

var (
	searchLink = regexp.MustCompile(`<p id="search-note">[^\n]*<a href="(search\?[^"]*)"`)
	jobLink    = regexp.MustCompile(`href="job\?id=(\d+)"`)
	failedLink = regexp.MustCompile(`<td class="n"><a href="failed-job\?uuid=[^"]*">(\d+)</a>`)
)

// followSearch opens a search page and follows its link to older rows
// until a page has none, and returns the ids each page listed, in order.
func followSearch(t *testing.T, s *site, path string, row *regexp.Regexp) []int64 {
	t.Helper()
	var ids []int64
	for pages := 0; path != ""; pages++ {
		if pages > 10 {
			t.Fatalf("search: still a link to older rows after %d pages", pages)
		}
		page := s.page(path)
		for _, m := range row.FindAllStringSubmatch(page, -1) {
			id, _ := strconv.ParseInt(m[1], 10, 64)
			ids = append(ids, id)
		}
		path = ""
		if m := searchLink.FindStringSubmatch(page); m != nil {
			path = html.UnescapeString(m[1])
		}
	}
	return ids
}

// The search page stops at its 100 matches and links on from its last
// match, not from the end of the window it would have read: following the
// links shows every match once, newest first, jobs and failed jobs.
func TestSearchPageLinksOnFromItsLastMatch(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		s := serve(t, q, dashboard.Options{})
		const rows = 230 // 115 matches: a page of 100, then 15
		var jobs []dbqueue.NewJob
		for i := range rows {
			jobs = append(jobs, dbqueue.NewJob{Name: []string{"Match", "Other"}[i%2]})
		}
		ids, err := q.PushMany(ctx, jobs)
		if err != nil {
			t.Fatal(err)
		}
		var want []int64
		for i := len(ids) - 1; i >= 0; i-- {
			if jobs[i].Name == "Match" {
				want = append(want, ids[i])
			}
		}
		got := followSearch(t, s, "search?name=Match", jobLink)
		if !slices.Equal(got, want) {
			t.Errorf("search pages listed jobs %v,\nwant %v", got, want)
		}
		read := 0
		for _, id := range ids {
			if id >= want[99] {
				read++
			}
		}
		note := fmt.Sprintf("Stopped at 100 matches, after reading the newest %d rows (ids from %d)", read, want[99])
		if page := s.page("search?name=Match"); !strings.Contains(page, note) {
			t.Errorf("the first page does not say %q:\n%s", note, searchLink.FindString(page))
		}

		// failed_jobs rows as another producer writes them, in one statement.
		insert := "INSERT INTO failed_jobs (uuid, connection, queue, payload, exception) VALUES "
		var args []any
		for i := range rows {
			if i > 0 {
				insert += ", "
			}
			insert += "(?, 'database', 'default', ?, 'boom')"
			name := []string{"Match", "Other"}[i%2]
			args = append(args, fmt.Sprintf("uuid-%03d", i), fmt.Sprintf(`{"uuid":"uuid-%03d","displayName":%q,"job":%q,"data":{}}`, i, name, name))
		}
		db.Exec(t, insert, args...)
		fids := db.IDs(t, "SELECT id FROM failed_jobs WHERE payload LIKE '%Match%' ORDER BY id DESC")
		got = followSearch(t, s, "search?in=failed&name=Match", failedLink)
		if len(fids) != rows/2 || !slices.Equal(got, fids) {
			t.Errorf("search pages listed failed jobs %v,\nwant %v", got, fids)
		}
	})
}
