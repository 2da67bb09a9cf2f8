package main

import (
	"context"
	"strings"
	"testing"

	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// An operator who runs `dbqueue clear ""` (an unset shell variable) and
// presses Enter at the prompt, or passes -force, must not clear the
// default queue: an empty name names no queue.
func TestClearRefusesAnEmptyQueueName(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		ctx := context.Background()
		q := db.Queue(t)
		push(t, q, "default", 0)
		push(t, q, "default", 0)
		for _, tc := range []struct {
			name string
			in   string
			tty  bool
			args []string
		}{
			{"enter at the prompt", "\n", true, []string{"clear", ""}},
			{"spaces at the prompt", "  \n", true, []string{"clear", "  "}},
			{"eof at the prompt", "", true, []string{"clear", ""}},
			{"force", "", false, []string{"clear", "", "-force"}},
			{"force, blank", "", false, []string{"clear", " ", "-force"}},
			{"pause", "", false, []string{"pause", ""}},
			{"resume", "", false, []string{"resume", " "}},
			{"failed retry -queue", "", false, []string{"failed", "retry", "-queue", ""}},
		} {
			r := dbqConsole(t, db, tc.in, tc.tty, tc.args...)
			if r.code() != exitUsage || !strings.Contains(r.err.Error(), "empty queue name") {
				t.Errorf("%s: dbqueue %q: exit %d, %v; want a usage error about the empty queue name", tc.name, tc.args, r.code(), r.err)
			}
			if strings.Contains(r.out, "deleted") {
				t.Errorf("%s: printed %q", tc.name, r.out)
			}
			if s, err := q.Size(ctx, "default"); err != nil || s.Total() != 2 {
				t.Fatalf("%s: the default queue after a refused clear: %+v, %v", tc.name, s, err)
			}
			if p, err := q.Paused(ctx, "default"); err != nil || p {
				t.Fatalf("%s: the default queue paused: %v, %v", tc.name, p, err)
			}
		}
		// Enter at the prompt of a named queue is no confirmation either.
		if r := dbqConsole(t, db, "\n", true, "clear", "default"); r.code() != exitError || !strings.Contains(r.err.Error(), "not confirmed") {
			t.Errorf("clear default, Enter typed: exit %d, %v", r.code(), r.err)
		}
		if s, _ := q.Size(ctx, "default"); s.Total() != 2 {
			t.Fatalf("an unconfirmed clear deleted jobs: %+v", s)
		}
	})
}
