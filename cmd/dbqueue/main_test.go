package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/failed"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// result is one run of the command.
type result struct {
	out, errOut string
	err         error
}

func (r result) code() int { return exitCode(r.err) }

// dbq runs the command as main would, stdin not a terminal.
func dbq(t *testing.T, db *dbtest.DB, args ...string) result {
	t.Helper()
	return dbqConsole(t, db, "", false, args...)
}

// dbqConsole runs the command with stdin holding in, a terminal or not.
func dbqConsole(t *testing.T, db *dbtest.DB, in string, tty bool, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errOut strings.Builder
	if db != nil {
		args = append([]string{"-dsn", db.DSN}, args...)
	}
	err := runConsole(ctx, args, console{in: strings.NewReader(in), out: &out, errOut: &errOut, inTTY: tty})
	return result{out.String(), errOut.String(), err}
}

// must is dbq that fails the test unless the command succeeds.
func must(t *testing.T, db *dbtest.DB, args ...string) string {
	t.Helper()
	r := dbq(t, db, args...)
	if r.err != nil {
		t.Fatalf("dbqueue %s: %v (stderr %q)", strings.Join(args, " "), r.err, r.errOut)
	}
	return r.out
}

func decode[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("decode %q: %v", s, err)
	}
	return v
}

func push(t *testing.T, q *dbqueue.Queue, queue string, delay time.Duration) int64 {
	t.Helper()
	id, err := q.Push(context.Background(), dbqueue.NewJob{Name: "send-mail", Queue: queue, Delay: delay, Data: map[string]int{"n": 1}})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestQueuesMonitorJobs(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		ctx := context.Background()
		q := db.Queue(t)
		push(t, q, "mail", 0)
		push(t, q, "mail", 0)
		delayed := push(t, q, "mail", time.Hour)
		other := push(t, q, "reports", 0)

		out := must(t, db, "queues")
		for _, want := range []string{"QUEUE", "default", "mail", "reports"} {
			if !strings.Contains(out, want) {
				t.Errorf("queues printed\n%s\nwant %q", out, want)
			}
		}
		sizes := decode[[]queueSize](t, must(t, db, "queues", "-json"))
		got := map[string]queueSize{}
		for _, s := range sizes {
			got[s.Queue] = s
		}
		if m := got["mail"]; m.Pending != 2 || m.Delayed != 1 || m.Reserved != 0 || got["reports"].Pending != 1 || len(got) != 3 {
			t.Errorf("queues -json = %+v", sizes)
		}

		// monitor: exit 3 over -max, 0 within it.
		r := dbq(t, db, "monitor", "--max", "1", "--json")
		if r.code() != exitThreshold {
			t.Fatalf("monitor -max 1: exit %d (%v), want 3", r.code(), r.err)
		}
		rep := decode[monitorReport](t, r.out)
		if !rep.Alert || rep.Max == nil || *rep.Max != 1 {
			t.Errorf("monitor report %+v", rep)
		}
		for _, s := range rep.Queues {
			want := "OK"
			if s.Queue == "mail" {
				want = "ALERT"
			}
			if s.Status != want {
				t.Errorf("monitor: queue %s status %q, want %q", s.Queue, s.Status, want)
			}
		}
		if r := dbq(t, db, "monitor", "-max", "2", "-queue", "mail,reports"); r.code() != exitOK || !strings.Contains(r.out, "OK") || strings.Contains(r.out, "default") {
			t.Errorf("monitor -max 2: exit %d, printed\n%s", r.code(), r.out)
		}

		// jobs list, filtered and paged.
		list := decode[[]jobJSON](t, must(t, db, "jobs", "list", "-queue", "mail", "-state", "delayed", "-json"))
		if len(list) != 1 || list[0].ID != delayed || list[0].Name != "send-mail" || list[0].State != "delayed" {
			t.Errorf("jobs list -state delayed = %+v", list)
		}
		r = dbq(t, db, "jobs", "list", "-limit", "2")
		if r.err != nil || strings.Count(r.out, "send-mail") != 2 || !strings.Contains(r.errOut, "-after") {
			t.Errorf("jobs list -limit 2: %v\n%s\n%s", r.err, r.out, r.errOut)
		}
		show := decode[jobJSON](t, must(t, db, "jobs", "show", fmt.Sprint(delayed), "-json"))
		if show.ID != delayed || show.Queue != "mail" || len(show.Payload) == 0 {
			t.Errorf("jobs show -json = %+v", show)
		}

		// run-now and cancel.
		must(t, db, "jobs", "run-now", fmt.Sprint(delayed))
		if j, err := q.Job(ctx, delayed); err != nil || j.State != dbqueue.JobPending {
			t.Errorf("after run-now: %+v, %v", j, err)
		}
		must(t, db, "jobs", "cancel", fmt.Sprint(other))
		if _, err := q.Job(ctx, other); !errors.Is(err, dbqueue.ErrJobNotFound) {
			t.Errorf("after cancel: %v", err)
		}
		if r := dbq(t, db, "jobs", "cancel", fmt.Sprint(other)); r.code() != exitError {
			t.Errorf("cancelling a cancelled job: exit %d", r.code())
		}
	})
}

func TestFailedPauseClear(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		ctx := context.Background()
		q := db.Queue(t)
		for range 3 {
			push(t, q, "mail", 0)
		}
		held, err := q.Reserve(ctx, 3, "mail")
		if err != nil || len(held) != 3 {
			t.Fatalf("reserve: %d, %v", len(held), err)
		}
		for _, j := range held {
			if err := q.Fail(ctx, j, errors.New("smtp down\nstack")); err != nil {
				t.Fatal(err)
			}
		}
		list := decode[[]failedJSON](t, must(t, db, "failed", "list", "-json"))
		if len(list) != 3 || list[0].Exception != "smtp down" || list[0].Queue != "mail" {
			t.Fatalf("failed list -json = %+v", list)
		}
		one := decode[failedJSON](t, must(t, db, "failed", "show", list[0].UUID, "-json"))
		if one.UUID != list[0].UUID || !strings.Contains(one.Exception, "stack") || len(one.Payload) == 0 {
			t.Errorf("failed show -json = %+v", one)
		}
		must(t, db, "failed", "forget", list[0].UUID)
		if r := dbq(t, db, "failed", "retry"); r.code() != exitUsage {
			t.Errorf("failed retry with nothing named: exit %d", r.code())
		}
		out := must(t, db, "failed", "retry", "-all")
		if !strings.Contains(out, "retrying every failed job") || !strings.Contains(out, "retried 2 failed jobs") {
			t.Errorf("failed retry -all printed %q", out)
		}
		if s, _ := q.Size(ctx, "mail"); s.Pending != 2 {
			t.Errorf("after retry: %+v", s)
		}
		if out := must(t, db, "failed", "flush"); !strings.Contains(out, "deleted 0 failed jobs") {
			t.Errorf("failed flush printed %q", out)
		}

		// pause and resume.
		must(t, db, "pause", "mail")
		if p, err := q.Paused(ctx, "mail"); !p || err != nil {
			t.Errorf("after pause: paused %v, %v", p, err)
		}
		if s := decode[[]queueSize](t, must(t, db, "queues", "-queue", "mail", "-json")); len(s) != 1 || !s[0].Paused {
			t.Errorf("queues of a paused queue: %+v", s)
		}
		must(t, db, "resume", "mail")
		if p, err := q.Paused(ctx, "mail"); p || err != nil {
			t.Errorf("after resume: paused %v, %v", p, err)
		}
		must(t, db, "restart")

		// clear: refused off a terminal without -force, confirmed on one.
		if r := dbq(t, db, "clear", "mail"); r.code() != exitUsage || !strings.Contains(r.err.Error(), "-force") {
			t.Errorf("clear without -force off a terminal: exit %d, %v", r.code(), r.err)
		}
		if r := dbqConsole(t, db, "default\n", true, "clear", "mail"); r.code() != exitError {
			t.Errorf("clear confirmed with the wrong name: exit %d", r.code())
		}
		if s, _ := q.Size(ctx, "mail"); s.Pending != 2 {
			t.Fatalf("a refused clear deleted jobs: %+v", s)
		}
		if r := dbqConsole(t, db, "mail\n", true, "clear", "mail"); r.err != nil || !strings.Contains(r.out, "Type the queue name") {
			t.Errorf("clear confirmed: %v\n%s", r.err, r.out)
		}
		push(t, q, "mail", 0)
		if out := must(t, db, "clear", "mail", "--force"); !strings.Contains(out, "deleted 1 jobs") {
			t.Errorf("clear --force printed %q", out)
		}
		if s, _ := q.Size(ctx, "mail"); s.Total() != 0 {
			t.Errorf("after clear: %+v", s)
		}
	})
}

func TestMigrateAndTables(t *testing.T) {
	db := dbtest.Empty(t, dbqueue.SQLite)
	args := []string{"-jobs", "my_jobs", "-failed", "my_failed"}
	if out := must(t, db, append([]string{"migrate", "up"}, args...)...); !strings.Contains(out, "applied 00001") {
		t.Fatalf("migrate up printed %q", out)
	}
	if out := must(t, db, append([]string{"migrate", "version"}, args...)...); strings.TrimSpace(out) == "0" {
		t.Errorf("migrate version after up: %q", out)
	}
	q, err := dbqueue.Open(context.Background(), db.DSN, dbqueue.WithTables(dbqueue.Tables{Jobs: "my_jobs", Failed: "my_failed"}))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	push(t, q, "other", 0)
	s := decode[[]queueSize](t, must(t, db, append([]string{"queues", "-json"}, args...)...))
	if len(s) != 2 || s[1].Queue != "other" || s[1].Pending != 1 {
		t.Errorf("queues on my_jobs: %+v", s)
	}
	if _, err := failed.New(q); err != nil {
		t.Fatal(err)
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"nope"},
		{"jobs"},
		{"jobs", "frob"},
		{"jobs", "show"},
		{"jobs", "show", "x"},
		{"jobs", "list", "-state", "lost"},
		{"monitor", "-bogus"},
		{"work"},
		{"queues"}, // no DSN
	} {
		t.Setenv("DATABASE_URL", "")
		if r := dbq(t, nil, args...); r.code() != exitUsage {
			t.Errorf("dbqueue %q: exit %d (%v), want 2", args, r.code(), r.err)
		}
	}
	r := dbq(t, nil, "-h")
	if r.err != nil || !strings.Contains(r.errOut, "no work command") || !strings.Contains(r.errOut, "Exit codes") {
		t.Errorf("-h: %v\n%s", r.err, r.errOut)
	}
	if out := must(t, nil, "version"); !strings.HasPrefix(out, "dbqueue ") {
		t.Errorf("version printed %q", out)
	}
}

func TestMonitorWatch(t *testing.T) {
	db := dbtest.New(t, dbqueue.SQLite)
	push(t, db.Queue(t), "mail", 0)
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	var out, errOut strings.Builder
	err := runConsole(ctx, []string{"monitor", "-dsn", db.DSN, "-watch", "-every", "100ms", "-json", "-max", "0"},
		console{in: strings.NewReader(""), out: &out, errOut: &errOut})
	if exitCode(err) != exitThreshold {
		t.Errorf("monitor -watch over -max, interrupted: exit %d (%v), want 3", exitCode(err), err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) < 2 {
		t.Fatalf("monitor -watch printed %d rounds in 400ms every 100ms:\n%s", len(lines), out.String())
	}
	for _, l := range lines {
		if r := decode[monitorReport](t, l); !r.Alert || len(r.Queues) != 2 {
			t.Errorf("round %+v", r)
		}
	}
}

// TestVersionLine checks what `dbqueue version` prints for a released
// module, for a build from a checkout, and without build information.
func TestVersionLine(t *testing.T) {
	for _, c := range []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"released", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.1.0"}}, "dbqueue v0.1.0 go1.26.8"},
		{"checkout", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}}, "dbqueue (devel) 0123456789ab+dirty go1.26.8"},
		{"checkout without vcs", &debug.BuildInfo{GoVersion: "go1.26.8"}, "dbqueue (devel) go1.26.8"},
		{"no build info", nil, "dbqueue (devel)"},
	} {
		if got := versionLine(c.bi); got != c.want {
			t.Errorf("%s: versionLine = %q, want %q", c.name, got, c.want)
		}
	}
}
