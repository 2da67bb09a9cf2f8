package main

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

var beforeHint = regexp.MustCompile(`search (?:on|older ones) with -before (\d+)\n`)

// pageSearch runs a search command, then again with the -before its note
// names, until a search reads all; it returns the ids listed (from
// -json), and checks the note names the id -json gives, which is the
// last match's when the search stopped at -limit.
func pageSearch(t *testing.T, db *dbtest.DB, limit int, args ...string) []int64 {
	t.Helper()
	args = append(args, "-limit", fmt.Sprint(limit))
	var got []int64
	for page, before := 0, ""; ; page++ {
		if page > 20 {
			t.Fatalf("%s: not complete after %d pages", strings.Join(args, " "), page)
		}
		run := args
		if before != "" {
			run = append(slices.Clip(args), "-before", before)
		}
		res := decode[searchResultJSON[struct {
			ID int64 `json:"id"`
		}]](t, must(t, db, append(slices.Clip(run), "-json")...))
		for _, m := range res.Matches {
			got = append(got, m.ID)
		}
		r := dbq(t, db, run...)
		if r.err != nil {
			t.Fatalf("dbqueue %s: %v", strings.Join(run, " "), r.err)
		}
		if res.Complete {
			if !strings.Contains(r.errOut, "which is all of them") {
				t.Fatalf("dbqueue %s: complete, but the note says %q", strings.Join(run, " "), r.errOut)
			}
			return got
		}
		m := beforeHint.FindStringSubmatch(r.errOut)
		full := len(res.Matches) == limit
		switch {
		case m == nil || m[1] != itoa(res.OldestID):
			t.Fatalf("dbqueue %s: the note %q does not name -before %d", strings.Join(run, " "), r.errOut, res.OldestID)
		case full && res.OldestID != res.Matches[limit-1].ID:
			t.Fatalf("dbqueue %s: stopped at -limit at job %d, but names -before %d", strings.Join(run, " "), res.Matches[limit-1].ID, res.OldestID)
		case full != strings.Contains(r.errOut, "stopped at -limit"):
			t.Fatalf("dbqueue %s: %d matches, note %q", strings.Join(run, " "), len(res.Matches), r.errOut)
		}
		before = m[1]
	}
}

// jobs search and failed search, paged with the -before their note
// names, list every match once, newest first: a search that stopped at
// -limit names its last match, not the end of the window it would have
// read.
func TestSearchPagesWithBefore(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		const rows = 23
		var jobs []dbqueue.NewJob
		for i := range rows {
			jobs = append(jobs, dbqueue.NewJob{Name: []string{"Match", "Other"}[i%2]})
		}
		ids, err := q.PushMany(context.Background(), jobs)
		if err != nil {
			t.Fatal(err)
		}
		var want []int64
		for i := len(ids) - 1; i >= 0; i-- {
			if jobs[i].Name == "Match" {
				want = append(want, ids[i])
			}
		}
		for _, args := range [][]string{{"jobs", "search", "-name", "Match"}, {"jobs", "search", "-name", "Match", "-scan", "4"}} {
			if got := pageSearch(t, db, 5, args...); !slices.Equal(got, want) {
				t.Errorf("%s: pages listed %v, want %v", strings.Join(args, " "), got, want)
			}
		}

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
		if got := pageSearch(t, db, 4, "failed", "search", "-name", "Match", "-scan", "9"); len(fids) != 12 || !slices.Equal(got, fids) {
			t.Errorf("failed search: pages listed %v, want %v", got, fids)
		}
	})
}
