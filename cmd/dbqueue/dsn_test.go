package main

import (
	"strings"
	"testing"

	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// A bad DSN given to the command, with -dsn or $DATABASE_URL, gets an
// error line that says what is wrong without the password it carries,
// from a command that opens a queue and from migrate.
func TestBadDSNErrorLinesHideThePassword(t *testing.T) {
	for _, c := range dbtest.BadDSNs {
		for _, args := range [][]string{
			{"-dsn", c.DSN, "queues"},
			{"-dsn", c.DSN, "failed", "list"},
			{"migrate", "status", "-dsn", c.DSN},
			{"env", "jobs", "list"},
		} {
			t.Setenv("DATABASE_URL", "")
			if args[0] == "env" {
				t.Setenv("DATABASE_URL", c.DSN)
				args = args[1:]
			}
			r := dbq(t, nil, args...)
			if r.err == nil {
				t.Errorf("dbqueue %q succeeded", args)
				continue
			}
			line := errorLine(r.err)
			if p := dbtest.LeakedSecret(line + r.out + r.errOut); p != "" {
				t.Errorf("dbqueue %q shows %q of the password: %s", args, p, line)
			}
			if !strings.Contains(line, c.Want) || strings.Count(line, "dbqueue: ") != 1 || !strings.HasPrefix(line, "dbqueue: ") {
				t.Errorf("dbqueue %q printed %q: want one dbqueue: prefix and %q", args, line, c.Want)
			}
		}
	}
}
