// Command dbqueue inspects and controls a dbqueue database from the shell:
// migrations, queue sizes and a monitor, jobs, failed jobs, and the pause,
// resume and restart signals. It is the Go side of Laravel's queue:*
// artisan commands, on PostgreSQL, MySQL/MariaDB and SQLite.
//
//	go run ./cmd/dbqueue queues -dsn postgres://postgres@127.0.0.1:5432/app
//	DATABASE_URL=sqlite:./queue.db dbqueue monitor -max 1000
//	dbqueue failed retry -all
//
// `dbqueue dashboard` serves the web dashboard of package dashboard.
//
// Workers are not run by this command: they stay embedded in the
// application's own binary, where their handlers are.
//
// Exit codes: 0 ok, 1 error, 2 usage, 3 a monitor threshold exceeded.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/dbqueue/dbqueue"
	_ "github.com/dbqueue/dbqueue/driver/dbqmysql" // the command serves all three
	_ "github.com/dbqueue/dbqueue/driver/dbqpgx"
	_ "github.com/dbqueue/dbqueue/driver/dbqsqlite"
)

const usage = `usage: dbqueue [-dsn DSN] [-jobs T -failed T -schema S] [-connection NAME] COMMAND [ARGS]

Migrations:
  migrate up|down|status|version     apply, roll back or report the tables

Queues:
  queues [-queue Q]... [-json]       per queue: pending, delayed, reserved, oldest pending, paused
  monitor [-queue Q]... [-max N] [-max-age 5m] [-max-failure-rate 0.1 [-window 5m]]
          [-json | -json-lines] [-watch [-every 5s]]
                                     sizes; exit 3 when a queue has more than N pending,
                                     a pending job older than -max-age, or more than that
                                     share of failures among jobs ended in -window
  workers [-json]                    running workers: host, pid, queues, running jobs
  stats [-window 1h|24h|7d] [-queue Q] [-kind K] [-json]
                                     per queue and kind, what workers recorded over the
                                     window: processed, failed, released, jobs per minute,
                                     runtime and wait p50/p95 (estimates from histograms
                                     whose buckets are a factor of two apart)
  schedules [-json]                  periodic schedules as their schedulers record them:
                                     name, spec, next tick, last tick pushed and its job,
                                     when a scheduler last wrote it, and ok, late or unseen
  limits [-json]                     concurrency limits: caps per key and in all, jobs
                                     running and waiting, keys
  pause QUEUE | resume QUEUE         stop or let workers take jobs from QUEUE
  restart                            ask every worker to stop after its current jobs
  clear QUEUE [-force]               delete every job of QUEUE (asks to type the name)

Dashboard:
  dashboard [-addr 127.0.0.1:8080] [-read-only] [-queue Q]... [-interval 5s]
            [-allow-host NAME]... [-allow-remote-actions]
                                     serve the web dashboard until interrupted (no login:
                                     keep it on localhost or behind your authentication;
                                     it answers only loopback names, -addr's host and
                                     -allow-host names)

Jobs:
  jobs list [-queue Q] [-state pending|delayed|reserved] [-limit N] [-after ID] [-json]
  jobs show ID [-json]               state, holder, batch, chain, earlier errors, payload
  jobs search [-id ID] [-uuid U] [-name N] [-queue Q] [-text T] [-scan N] [-before ID]
              [-limit N] [-json]     reads only the newest -scan jobs (default 10000)
  jobs cancel ID                     delete a waiting job so it never runs
  jobs run-now ID                    make a delayed job due at once

Failed jobs:
  failed list [-queue Q] [-limit N] [-before ID] [-json]
  failed show UUID [-json]
  failed search [-id ID] [-uuid U] [-name N] [-queue Q] [-text T] [-scan N] [-before ID]
                [-limit N] [-json]   -text also matches the exception
  failed retry UUID... | -queue Q | -all
  failed forget UUID
  failed flush [-hours H]            delete failed jobs older than H hours (0, the default: all)
  failed prune [-hours H]            delete failed jobs that failed over H hours ago (default 24),
                                     and error history whose job is gone

  version                            print this command's version

There is no work command: workers run inside your application's binary,
where their handlers are (package worker).

The DSN comes from -dsn or $DATABASE_URL:
  postgres://user:pass@host:5432/db   mysql://user:pass@host:3306/db
  user:pass@tcp(host:3306)/db         sqlite:./queue.db

Table names (default jobs and failed_jobs in the current schema):
  -jobs NAME  -failed NAME  -schema NAME (PostgreSQL only)
-connection is the queue connection name in failed_jobs and in the pause
signals (Laravel's config/queue.php name; default "database").
-redact data.password,data.card hides those payload fields wherever a
payload is shown, searched or printed as JSON (default $DBQUEUE_REDACT).

Flags may come before or after the command. Exit codes: 0 ok, 1 error,
2 usage, 3 monitor threshold exceeded.
`

// Exit codes.
const (
	exitOK        = 0
	exitError     = 1
	exitUsage     = 2
	exitThreshold = 3
)

// usageError is a command line that cannot run: exit code 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return usageError{fmt.Sprintf(format, args...) + "\n(dbqueue -h lists the commands)"}
}

// errThreshold is monitor's exit code 3: a queue is over one of its limits.
var errThreshold = errors.New("a queue is over a monitor limit (-max, -max-age or -max-failure-rate)")

// exitCode maps run's error to the process exit code.
func exitCode(err error) int {
	var u usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errThreshold):
		return exitThreshold
	case errors.As(err, &u):
		return exitUsage
	}
	return exitError
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	if err != nil && !errors.Is(err, errThreshold) { // monitor printed its alert
		fmt.Fprintln(os.Stderr, errorLine(err))
	}
	os.Exit(exitCode(err))
}

// console is where a command reads and writes, and whether they are
// terminals: a terminal gets a confirmation prompt and a progress line
// that is rewritten; a pipe gets plain lines.
type console struct {
	in            io.Reader
	out, errOut   io.Writer
	inTTY, outTTY bool
}

// isTerminal reports whether v is a terminal: a character device other
// than /dev/null (which cron and `< /dev/null` give, and which must not
// count as someone at the keyboard).
func isTerminal(v any) bool {
	f, ok := v.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	if err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	null, err := os.Stat(os.DevNull)
	return err != nil || !os.SameFile(st, null)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runConsole(ctx, args, console{
		in: os.Stdin, out: stdout, errOut: stderr,
		inTTY: isTerminal(os.Stdin), outTTY: isTerminal(stdout),
	})
}

// common are the flags every command takes.
type common struct {
	dsn        string
	tables     dbqueue.Tables
	connection string
	// redact lists the payload fields every shown payload hides
	// (dbqueue.RedactFields paths, comma-separated).
	redact string
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.dsn, "dsn", c.dsn, "database DSN (default $DATABASE_URL)")
	fs.StringVar(&c.tables.Jobs, "jobs", c.tables.Jobs, "jobs table (default jobs)")
	fs.StringVar(&c.tables.Failed, "failed", c.tables.Failed, "failed jobs table (default failed_jobs)")
	fs.StringVar(&c.tables.Schema, "schema", c.tables.Schema, "PostgreSQL schema of the tables (default: the current schema)")
	fs.StringVar(&c.connection, "connection", c.connection, "queue connection name (default database)")
	fs.StringVar(&c.redact, "redact", c.redact, "payload fields to hide wherever a payload is shown, comma-separated paths such as data.password (default $DBQUEUE_REDACT)")
}

// cli is one invocation: its console and common flags.
type cli struct {
	console
	common
}

func newFlagSet(c *cli, name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	// The flag package would print a bad flag's error bare, before main
	// prints it again as the error line: runConsole reports it, and prints
	// the usage on flag.ErrHelp.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	c.register(fs)
	return fs
}

// parse parses flags wherever they stand among the arguments and returns
// the rest. -h gives flag.ErrHelp.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usagef("%s: %v", fs.Name(), err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return rest, nil
		}
		rest = append(rest, args[0])
		args = args[1:]
	}
}

func runConsole(ctx context.Context, args []string, con console) error {
	c := &cli{console: con, common: common{dsn: os.Getenv("DATABASE_URL"), connection: dbqueue.DefaultConnection, redact: os.Getenv("DBQUEUE_REDACT")}}
	fs := newFlagSet(c, "dbqueue")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(c.errOut, usage)
			return nil // asking for the usage is no failure
		}
		return usagef("%v", err)
	}
	args = fs.Args()
	if len(args) == 0 {
		return usagef("no command given")
	}
	cmd, args := args[0], args[1:]
	var err error
	switch cmd {
	case "migrate":
		err = c.migrate(ctx, args)
	case "queues":
		err = c.queues(ctx, args)
	case "monitor":
		err = c.monitor(ctx, args)
	case "workers":
		err = c.workers(ctx, args)
	case "stats":
		err = c.stats(ctx, args)
	case "schedules":
		err = c.schedules(ctx, args)
	case "limits":
		err = c.limits(ctx, args)
	case "jobs":
		err = c.jobs(ctx, args)
	case "failed":
		err = c.failed(ctx, args)
	case "pause", "resume":
		err = c.pauseResume(ctx, cmd, args)
	case "restart":
		err = c.restart(ctx, args)
	case "clear":
		err = c.clear(ctx, args)
	case "dashboard":
		err = c.dashboard(ctx, args)
	case "version":
		err = c.version(args)
	case "work", "queue:work":
		return usagef("there is no work command: workers run inside your application's binary, where their handlers are (package worker)")
	case "help":
		fmt.Fprint(c.out, usage)
		return nil
	default:
		return usagef("unknown command %q", cmd)
	}
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(c.errOut, usage)
		return nil
	}
	return commandError(c.dsn, err)
}

// subcommand splits "jobs list …" into "list" and the rest; the
// subcommand comes first, its flags after it.
func subcommand(group string, args []string, known ...string) (string, []string, error) {
	if len(args) == 0 {
		return "", nil, usagef("%s: name a subcommand: %s", group, strings.Join(known, ", "))
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		return "", nil, flag.ErrHelp
	}
	for _, k := range known {
		if args[0] == k {
			return k, args[1:], nil
		}
	}
	return "", nil, usagef("%s: unknown subcommand %q: use %s", group, args[0], strings.Join(known, ", "))
}

// open opens the queue the common flags name.
func (c *cli) open(ctx context.Context) (*dbqueue.Queue, error) {
	if strings.TrimSpace(c.dsn) == "" {
		return nil, usagef("no database named: pass -dsn DSN or set DATABASE_URL")
	}
	if c.connection == "" {
		return nil, usagef("-connection: empty name: pass the queue connection name failed jobs and pause signals carry (Laravel's; default %s)", dbqueue.DefaultConnection)
	}
	opts := []dbqueue.Option{dbqueue.WithTables(c.tables), dbqueue.WithConnectionName(c.connection)}
	if strings.TrimSpace(c.redact) != "" {
		opts = append(opts, dbqueue.WithRedactor(dbqueue.RedactFields(strings.Split(c.redact, ",")...)))
	}
	return dbqueue.Open(ctx, c.dsn, opts...)
}

// noArgs refuses arguments a command does not take.
func noArgs(cmd string, rest []string) error {
	if len(rest) > 0 {
		return usagef("%s: unexpected arguments %q", cmd, rest)
	}
	return nil
}

// oneArg is the single argument a command takes.
func oneArg(cmd, what string, rest []string) (string, error) {
	if len(rest) != 1 {
		return "", usagef("%s: want one %s, got %d arguments", cmd, what, len(rest))
	}
	return rest[0], nil
}
