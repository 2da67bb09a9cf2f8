package main

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// jobs show and failed show print a job's earlier errors in order and its
// place in a chain; -redact hides a payload field in every output that
// shows the payload, text and JSON; search says how much it read.
func TestJobDetailSearchAndRedact(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		ctx := context.Background()
		q := db.Queue(t)
		id, err := q.PushChain(ctx,
			dbqueue.NewJob{Name: "Login", Queue: "auth", Data: map[string]string{"user": "ann", "password": "hunter2"}},
			dbqueue.NewJob{Name: "Welcome", Queue: "auth"})
		if err != nil {
			t.Fatal(err)
		}
		for _, cause := range []string{"first failure", "second failure"} {
			jobs, err := q.Reserve(ctx, 1, "auth")
			if err != nil || len(jobs) != 1 {
				t.Fatal(jobs, err)
			}
			if err := q.ReleaseAfterError(ctx, jobs[0], 0, errors.New(cause)); err != nil {
				t.Fatal(err)
			}
		}
		show := must(t, db, "jobs", "show", itoa(id))
		first, second := strings.Index(show, "attempt 1 at"), strings.Index(show, "attempt 2 at")
		if first < 0 || second < first || !strings.Contains(show, "first failure") || !strings.Contains(show, "1 more after this: Welcome") {
			t.Fatalf("jobs show: errors not in order, or the chain not shown:\n%s", show)
		}
		if !strings.Contains(show, "hunter2") {
			t.Fatalf("jobs show without -redact hid the payload:\n%s", show)
		}
		detail := decode[jobDetailJSON](t, must(t, db, "jobs", "show", itoa(id), "-json"))
		if len(detail.Errors) != 2 || detail.Errors[1].Error != "second failure" || len(detail.ChainNext) != 1 || detail.UUID == "" {
			t.Fatalf("jobs show -json: %+v", detail)
		}
		for _, args := range [][]string{{"jobs", "show", itoa(id)}, {"jobs", "show", itoa(id), "-json"}} {
			out := must(t, db, append([]string{"-redact", "data.password"}, args...)...)
			if strings.Contains(out, "hunter2") || !strings.Contains(out, dbqueue.Redacted) {
				t.Errorf("dbqueue -redact data.password %s shows:\n%s", strings.Join(args, " "), out)
			}
		}

		r := dbq(t, db, "jobs", "search", "-name", "Login", "-scan", "1")
		if r.err != nil || !strings.Contains(r.out, "Login") || !strings.Contains(r.errOut, "read the newest 1 jobs, which is all of them") {
			t.Fatalf("jobs search: %v\n%s\n%s", r.err, r.out, r.errOut)
		}
		newer := push(t, q, "auth", 0)
		r = dbq(t, db, "jobs", "search", "-name", "Login", "-scan", "1")
		if strings.Contains(r.out, "Login") || !strings.Contains(r.errOut, "read only the newest 1 jobs (ids from "+itoa(newer)+"): search older ones with -before "+itoa(newer)) {
			t.Fatalf("jobs search beyond its window: %v\n%s\n%s", r.err, r.out, r.errOut)
		}
		if r := dbq(t, db, "-redact", "data.password", "jobs", "search", "-text", "hunter2"); r.err != nil || strings.Contains(r.out, "Login") {
			t.Fatalf("a search for a redacted value found the job: %v\n%s", r.err, r.out)
		}
		if r := dbq(t, db, "jobs", "search"); r.code() != exitUsage {
			t.Fatalf("jobs search with nothing to look for: %v", r.err)
		}

		jobs, err := q.Reserve(ctx, 1, "auth")
		if err != nil || len(jobs) != 1 || jobs[0].ID != id {
			t.Fatal(jobs, err)
		}
		if err := q.Fail(ctx, jobs[0], errors.New("third failure")); err != nil {
			t.Fatal(err)
		}
		uuid := jobs[0].Payload.UUID
		fshow := must(t, db, "failed", "show", uuid)
		if !strings.Contains(fshow, "third failure") || strings.Index(fshow, "second failure") < strings.Index(fshow, "first failure") || !strings.Contains(fshow, "first failure") {
			t.Fatalf("failed show:\n%s", fshow)
		}
		fdetail := decode[failedJSON](t, must(t, db, "failed", "show", uuid, "-json"))
		if len(fdetail.Errors) != 2 || fdetail.Errors[0].Attempt != 1 {
			t.Fatalf("failed show -json errors: %+v", fdetail.Errors)
		}
		for _, args := range [][]string{{"failed", "show", uuid}, {"failed", "show", uuid, "-json"}} {
			out := must(t, db, append([]string{"-redact", "data.password"}, args...)...)
			if strings.Contains(out, "hunter2") || !strings.Contains(out, dbqueue.Redacted) {
				t.Errorf("dbqueue -redact data.password %s shows:\n%s", strings.Join(args, " "), out)
			}
		}
		found := decode[searchResultJSON[failedJSON]](t, must(t, db, "failed", "search", "-text", "third", "-json"))
		if len(found.Matches) != 1 || found.Matches[0].UUID != uuid || !found.Complete {
			t.Fatalf("failed search -json: %+v", found)
		}
	})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
