package main

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// `dbqueue limits` lists each concurrency limit with its caps and its
// jobs running and waiting; names escaped for the terminal, and as
// stored in JSON.
func TestLimitsCommand(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		if out := must(t, db, "limits"); !strings.Contains(out, "no concurrency limits declared") {
			t.Errorf("limits with none: %q", out)
		}
		q := db.Queue(t)
		ctx := context.Background()
		for _, key := range []string{"a", "a", "b"} {
			if _, err := q.Push(ctx, dbqueue.NewJob{Name: "sync", Concurrency: &dbqueue.Concurrency{Limit: "sync", Key: key, PerKey: 1, Total: 5}}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := q.Push(ctx, dbqueue.NewJob{Name: "x", Concurrency: &dbqueue.Concurrency{Limit: hostile, PerKey: 2}}); err != nil {
			t.Fatal(err)
		}
		if jobs, err := q.Reserve(ctx, 10); err != nil || len(jobs) != 3 {
			t.Fatalf("reserve: %d jobs, %v; want 3 (a, b and the other limit's)", len(jobs), err)
		}
		out := must(t, db, "limits")
		if !utf8.ValidString(out) {
			t.Fatalf("not UTF-8: %q", out)
		}
		for _, c := range out {
			if terminalUnsafe(c, true) {
				t.Fatalf("limits printed %U: %q", c, out)
			}
		}
		var syncLine string
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "sync ") {
				syncLine = l
			}
		}
		if f := strings.Fields(syncLine); len(f) != 6 || f[1] != "1" || f[2] != "5" || f[3] != "2" || f[4] != "1" || f[5] != "2" {
			t.Errorf("the sync limit's line %q, want per key 1, total 5, 2 running, 1 waiting, 2 keys\n%s", syncLine, out)
		}
		list := decode[[]limitRow](t, must(t, db, "limits", "-json"))
		byName := map[string]limitRow{}
		for _, r := range list {
			byName[r.Limit] = r
		}
		if len(list) != 2 || byName["sync"].Running != 2 || byName[hostile].PerKey != 2 || byName[hostile].Total != 0 || byName[hostile].Running != 1 {
			t.Errorf("limits -json: %+v", list)
		}
	})
}
