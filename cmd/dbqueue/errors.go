package main

import (
	"regexp"
	"strings"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// cmdError is an error as the command shows it: the library's text with
// its Go advice turned into the command's, nested "dbqueue: " prefixes
// dropped and the DSN's secrets hidden. errors.Is and errors.As still
// see the error it wraps (exit codes rest on them).
type cmdError struct {
	err  error
	text string
}

func (e *cmdError) Error() string { return e.text }
func (e *cmdError) Unwrap() error { return e.err }

// commandError turns an error of a run with dsn into the command's.
func commandError(dsn string, err error) error {
	if err == nil {
		return nil
	}
	text := nestedPrefix.ReplaceAllString(err.Error(), "$1")
	text = goAdvice.Replace(text)
	return &cmdError{err: err, text: printableLines(sqldb.RedactText(dsn, text))}
}

// errorLine is the line main prints for err: one "dbqueue: " prefix.
func errorLine(err error) string {
	return "dbqueue: " + nestedPrefix.ReplaceAllString(err.Error(), "$1")
}

// nestedPrefix is a "dbqueue: " that starts a message or one wrapped in
// another (the library prefixes its errors, and wraps its own).
var nestedPrefix = regexp.MustCompile(`(^|: )(?:dbqueue: )+`)

// goAdvice rewrites what the library tells a Go program to do (an option,
// a function) into the flag or command that does it here.
var goAdvice = strings.NewReplacer(
	"WithConnectionName: empty name", "-connection: empty name: pass the queue connection name failed jobs and pause signals carry (Laravel's; default database)",
	"through a queue opened WithConnectionName of theirs", "with -connection set to theirs",
	"WithTables: jobs table name", "-jobs: table name",
	"WithTables: failed jobs table name", "-failed: table name",
	"WithTables: schema name", "-schema: schema name",
	"WithTables: the jobs and failed jobs tables are both named", "-jobs and -failed both name",
	"migrations: table name Jobs", "migrations: -jobs: table name",
	"migrations: table name Failed", "migrations: -failed: table name",
	"migrations: Jobs and Failed are both", "migrations: -jobs and -failed are both",
	"migrations: Schema ", "migrations: -schema ",
	sqldb.MigrateAdvice,
	"older than this command: run `dbqueue migrate up` with the same -dsn, -jobs, -failed and -schema",
)
