package main

import (
	"strings"
	"testing"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// An error line has one "dbqueue: " prefix, and advice for a Go program
// (WithConnectionName, WithTables, migrations.Up) names the command's own
// flag or subcommand instead.
func TestErrorLinesSpeakTheCommandsFlags(t *testing.T) {
	db := dbtest.New(t, dbqueue.SQLite)
	q := db.Queue(t)
	push(t, q, "mail", 0)
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"-connection=", "queues"}, []string{"-connection: empty name"}},
		{[]string{"-jobs=Bad!", "queues"}, []string{`-jobs: table name "Bad!"`}},
		{[]string{"-failed=Bad!", "failed", "list"}, []string{`-failed: table name "Bad!"`}},
		{[]string{"-jobs=jobs", "-failed=jobs", "queues"}, []string{"-jobs and -failed both name"}},
		{[]string{"-jobs=nope", "queues"}, []string{"dbqueue migrate up", "-jobs"}},
		{[]string{"migrate", "status", "-jobs=Bad!"}, []string{`-jobs: table name "Bad!"`}},
		{[]string{"failed", "show", "nope"}, []string{"no failed job"}},
		{[]string{"failed", "forget", "nope"}, []string{"no failed job"}},
		{[]string{"jobs", "show", "99"}, []string{"no such job"}},
		{[]string{"jobs", "cancel", "99"}, []string{"no such job"}},
	} {
		r := dbq(t, db, c.args...)
		if r.err == nil {
			t.Errorf("dbqueue %q succeeded", c.args)
			continue
		}
		line := errorLine(r.err)
		if !strings.HasPrefix(line, "dbqueue: ") || strings.Count(line, "dbqueue: ") != 1 {
			t.Errorf("dbqueue %q printed %q: want one dbqueue: prefix", c.args, line)
		}
		for _, w := range c.want {
			if !strings.Contains(line, w) {
				t.Errorf("dbqueue %q printed %q: want %q", c.args, line, w)
			}
		}
		for _, goOnly := range []string{"WithConnectionName", "WithTables", "migrations.Up", "cmd/migrate@latest"} {
			if strings.Contains(line, goOnly) {
				t.Errorf("dbqueue %q printed %q: tells a shell user about %s", c.args, line, goOnly)
			}
		}
	}

	// A failed job of another connection: retry it with -connection.
	held, err := q.Reserve(t.Context(), 1, "mail")
	if err != nil || len(held) != 1 {
		t.Fatalf("reserve: %v", err)
	}
	if err := q.Fail(t.Context(), held[0], errFailed); err != nil {
		t.Fatal(err)
	}
	list := decode[[]failedJSON](t, must(t, db, "failed", "list", "-json"))
	r := dbq(t, db, "-connection", "other", "failed", "retry", list[0].UUID)
	if line := errorLine(r.err); !strings.Contains(line, "-connection") || strings.Contains(line, "WithConnectionName") || strings.Count(line, "dbqueue: ") != 1 {
		t.Errorf("retry of another connection's failed job printed %q", line)
	}
}

var errFailed = errorString("smtp down")

type errorString string

func (e errorString) Error() string { return string(e) }

// A bad flag is reported once, on the error line, not also bare by the
// flag package.
func TestBadFlagIsReportedOnce(t *testing.T) {
	for _, args := range [][]string{{"-bogus"}, {"queues", "-bogus"}, {"jobs", "list", "-limit", "x"}} {
		r := dbq(t, nil, args...)
		if r.code() != exitUsage {
			t.Errorf("dbqueue %q: exit %d, want 2", args, r.code())
		}
		line := errorLine(r.err)
		if r.errOut != "" || !strings.HasPrefix(line, "dbqueue: ") || strings.Count(line, "dbqueue: ") != 1 {
			t.Errorf("dbqueue %q printed %q and the error line %q: want the error once, with one prefix", args, r.errOut, line)
		}
	}
}
