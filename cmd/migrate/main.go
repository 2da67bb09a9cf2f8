// Command migrate installs, rolls back and reports dbqueue's tables.
//
//	go run ./cmd/migrate up -dsn postgres://postgres@127.0.0.1:5432/app
//	DATABASE_URL=mysql://root@127.0.0.1:3306/app go run ./cmd/migrate status
//	go run ./cmd/migrate up -dsn sqlite:./queue.db
//
// Commands: up, down, status, version. The DSN comes from -dsn or
// DATABASE_URL.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/dbqueue/dbqueue"
	_ "github.com/dbqueue/dbqueue/driver/dbqmysql" // migrate serves all three
	_ "github.com/dbqueue/dbqueue/driver/dbqpgx"
	_ "github.com/dbqueue/dbqueue/driver/dbqsqlite"
	"github.com/dbqueue/dbqueue/migrations"
)

const usage = `usage: migrate [-dsn DSN] up|down|status|version

  up       apply pending migrations (creates jobs and failed_jobs)
  down     roll back the last migration (drops the tables and their jobs)
  status   list migrations and whether each is applied
  version  print the newest applied migration

The DSN comes from -dsn or $DATABASE_URL:
  postgres://user:pass@host:5432/db   mysql://user:pass@host:3306/db
  user:pass@tcp(host:3306)/db         sqlite:./queue.db
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "migrate:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	dsn := fs.String("dsn", os.Getenv("DATABASE_URL"), "database DSN (default $DATABASE_URL)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil // -h: the usage is printed, and asking for it is no failure
		}
		return err
	}
	// Allow flags after the command too: migrate up -dsn …
	cmd := fs.Arg(0)
	if fs.NArg() > 1 {
		if err := fs.Parse(fs.Args()[1:]); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil
			}
			return err
		}
		if fs.NArg() > 0 {
			return fmt.Errorf("unexpected arguments %q\n%s", fs.Args(), usage)
		}
	}
	switch cmd {
	case "up", "down", "status", "version":
	case "":
		return errors.New("no command given\n" + usage)
	default:
		return fmt.Errorf("unknown command %q\n%s", cmd, usage)
	}
	if strings.TrimSpace(*dsn) == "" {
		return errors.New("no database named: pass -dsn DSN or set DATABASE_URL\n" + usage)
	}
	parsed, err := dbqueue.ParseDSN(*dsn)
	if err != nil {
		return err
	}
	db, err := sql.Open(parsed.Driver, parsed.Conn)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.PingContext(ctx); err != nil {
		return fmt.Errorf("cannot reach the %s database: %w", parsed.Dialect, err)
	}
	m, err := migrations.New(db, parsed.Dialect)
	if err != nil {
		return err
	}
	switch cmd {
	case "up":
		results, err := m.Up(ctx)
		for _, r := range results {
			fmt.Fprintf(stdout, "applied %s (%s)\n", r.Source.Path, r.Duration.Round(1e6))
		}
		if err == nil && len(results) == 0 {
			fmt.Fprintln(stdout, "no pending migrations")
		}
		return err
	case "down":
		r, err := m.Down(ctx)
		if r != nil && r.Source != nil {
			fmt.Fprintf(stdout, "rolled back %s\n", r.Source.Path)
		}
		return err
	case "status":
		st, err := m.Status(ctx)
		for _, s := range st {
			when := "pending"
			if s.State == "applied" {
				when = "applied " + s.AppliedAt.Format("2006-01-02 15:04:05")
			}
			fmt.Fprintf(stdout, "%-40s %s\n", s.Source.Path, when)
		}
		return err
	default:
		v, err := m.Version(ctx)
		if err == nil {
			fmt.Fprintln(stdout, v)
		}
		return err
	}
}
