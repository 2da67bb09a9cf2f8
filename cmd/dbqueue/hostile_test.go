package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// hostile is what another producer's row can hold in a queue name, a job
// name and an exception: a screen clear, an OSC 8 link, a window title, a
// CR that overwrites the line, a C1 CSI, a right-to-left override, a bidi
// isolate and DEL.
const hostile = "evil\x1b[2J\x1b]8;;https://evil.example/\x07link\x1b]8;;\x07\x1b]0;title\x07\rOVER\u009b31m\u202eRTL\u2066\x7f"

// The operator's terminal gets no control sequence from a job's text,
// whichever subcommand prints it, on stdout, stderr or an error line; the
// JSON stays JSON holding the text as stored; an exception's own line
// breaks stay.
func TestHostileTextReachesNoTerminal(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		now := time.Now().Unix()
		payload, _ := json.Marshal(map[string]any{
			"uuid": "u-1", "displayName": hostile, "job": hostile, "data": map[string]string{"x": hostile},
		})
		db.Exec(t, "INSERT INTO jobs (queue, payload, attempts, reserved_at, available_at, created_at) VALUES (?, ?, 0, NULL, ?, ?)",
			hostile, string(payload), now, now)
		db.Exec(t, "INSERT INTO jobs (queue, payload, attempts, reserved_at, available_at, created_at) VALUES (?, ?, 0, NULL, ?, ?)",
			hostile, "not json "+hostile, now+3600, now)
		db.Exec(t, "INSERT INTO failed_jobs (uuid, connection, queue, payload, exception) VALUES (?, ?, ?, ?, ?)",
			"f-1", hostile, hostile, string(payload), hostile+"\n\tat Handler()\n")
		ids := db.IDs(t, "SELECT id FROM jobs ORDER BY id")
		if len(ids) != 2 {
			t.Fatalf("jobs: %v", ids)
		}
		// Earlier errors, and the worker that wrote them, are anyone's text too.
		for _, key := range []struct{ col, value any }{{"job_id", ids[0]}, {"failed_uuid", "f-1"}} {
			db.Exec(t, fmt.Sprintf("INSERT INTO dbqueue_job_errors (%s, attempt, error, worker, created_at) VALUES (?, 1, ?, ?, ?)", key.col),
				key.value, hostile+"\n\tat Handler()", hostile, now)
		}

		runs := [][]string{
			{"queues"}, {"queues", "-json"}, {"monitor"}, {"monitor", "-json"},
			{"jobs", "list"}, {"jobs", "list", "-json"},
			{"failed", "list"}, {"failed", "list", "-json"},
			{"failed", "show", "f-1"}, {"failed", "show", "f-1", "-json"},
			{"failed", "retry", "f-1"}, // of another connection: the error names it
			{"pause", hostile}, {"resume", hostile},
			{"jobs", "search", "-text", "link"}, {"jobs", "search", "-text", "link", "-json"},
			{"jobs", "search", "-name", hostile}, {"failed", "search", "-queue", hostile},
			{"failed", "search", "-text", "link"}, {"failed", "search", "-text", "link", "-json"},
		}
		for _, id := range ids {
			runs = append(runs, []string{"jobs", "show", fmt.Sprint(id)}, []string{"jobs", "show", fmt.Sprint(id), "-json"})
		}
		outputs := map[string]string{}
		for _, args := range runs {
			r := dbq(t, db, args...)
			name := strings.Join(args, " ")
			outputs[name] = r.out
			streams := map[string]string{"stdout": r.out, "stderr": r.errOut}
			if r.err != nil {
				streams["error line"] = errorLine(r.err)
			}
			for stream, text := range streams {
				if !utf8.ValidString(text) {
					t.Errorf("dbqueue %s: %s is not UTF-8: %q", name, stream, text)
				}
				for _, c := range text {
					if terminalUnsafe(c, true) {
						t.Errorf("dbqueue %s: %s holds %U: %q", name, stream, c, text)
						break
					}
				}
			}
			if strings.Contains(name, "-json") {
				if !json.Valid([]byte(r.out)) || !strings.Contains(decodedStrings(t, r.out), hostile) {
					t.Errorf("dbqueue %s: JSON not valid or lost the stored text: %s", name, r.out)
				}
			}
		}
		if r := dbq(t, db, "failed", "retry", "f-1"); r.err == nil || !strings.Contains(errorLine(r.err), `evil\x1b[2J`) {
			t.Errorf("failed retry of another connection's job: %v", r.err)
		}
		for _, name := range []string{"failed show f-1", fmt.Sprintf("jobs show %d", ids[0])} {
			if !strings.Contains(outputs[name], "attempt 1 at") || !strings.Contains(outputs[name], `evil\x1b[2J`) {
				t.Errorf("%s: the earlier error is not shown escaped:\n%s", name, outputs[name])
			}
		}
		for _, name := range []string{"jobs search -name " + hostile, "failed search -queue " + hostile, "jobs search -text link"} {
			if !strings.Contains(outputs[name], `evil\x1b[2J`) {
				t.Errorf("%s found nothing:\n%s", name, outputs[name])
			}
		}
		show := outputs["failed show f-1"]
		if !strings.Contains(show, `evil\x1b[2J\x1b]8;;https://evil.example/\x07link`) || !strings.Contains(show, `\x0dOVER\u009b31m\u202eRTL\u2066\x7f`+"\n\tat Handler()") {
			t.Errorf("failed show: the exception is not shown escaped, its lines kept:\n%s", show)
		}
		// A JSON payload prints as JSON that means what was stored.
		_, shown, _ := strings.Cut(outputs[fmt.Sprintf("jobs show %d", ids[0])], "payload:\n")
		var p struct{ DisplayName string }
		if err := json.Unmarshal([]byte(shown), &p); err != nil || p.DisplayName != hostile {
			t.Errorf("jobs show: the payload does not read back as stored (%v):\n%s", err, shown)
		}
		if list := outputs["queues"]; !strings.Contains(list, `evil\x1b[2J`) {
			t.Errorf("queues: the queue's name is not shown escaped:\n%s", list)
		}
	})
}

// SQLite stores any bytes: a payload that is not UTF-8 still prints as
// UTF-8 without controls, and its JSON stays valid.
func TestInvalidUTF8PayloadPrintsSafely(t *testing.T) {
	db := dbtest.New(t, dbqueue.SQLite)
	now := time.Now().Unix()
	db.Exec(t, "INSERT INTO jobs (queue, payload, attempts, reserved_at, available_at, created_at) VALUES (?, ?, 0, NULL, ?, ?)",
		"q\xff\x9b", []byte("{\"job\":\"a\xff\x9b[2J\xc2\x9b31m\"}"), now, now)
	for _, args := range [][]string{{"jobs", "show", "1"}, {"jobs", "show", "1", "-json"}, {"jobs", "list"}, {"jobs", "list", "-json"}, {"queues", "-json"}} {
		r := dbq(t, db, args...)
		if r.err != nil {
			t.Fatalf("dbqueue %q: %v", args, r.err)
		}
		if !utf8.ValidString(r.out) || strings.ContainsAny(r.out, "\x1b\u009b") {
			t.Errorf("dbqueue %q printed %q", args, r.out)
		}
		if args[len(args)-1] == "-json" && !json.Valid([]byte(r.out)) {
			t.Errorf("dbqueue %q: not JSON: %q", args, r.out)
		}
	}
}

// decodedStrings is every string value of a JSON document, joined.
func decodedStrings(t *testing.T, doc string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatalf("decode %q: %v", doc, err)
	}
	var b strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			b.WriteString(v + "\n")
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(v)
	return b.String()
}
