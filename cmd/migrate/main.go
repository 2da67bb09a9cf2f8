// Command migrate installs, rolls back and reports dbqueue's tables.
//
//	go run ./cmd/migrate up -dsn postgres://postgres@127.0.0.1:5432/app
//	DATABASE_URL=mysql://root@127.0.0.1:3306/app go run ./cmd/migrate status
//	go run ./cmd/migrate up -dsn sqlite:./queue.db
//
// Commands: up, down, status, version, export. The DSN comes from -dsn or
// DATABASE_URL; -jobs, -failed and -schema name tables other than jobs and
// failed_jobs. export writes the SQL for another migration tool:
//
//	go run ./cmd/migrate export -dialect mysql -format golang-migrate -dir db/migrations
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/dbqueue/dbqueue"
	_ "github.com/dbqueue/dbqueue/driver/dbqmysql" // migrate serves all three
	_ "github.com/dbqueue/dbqueue/driver/dbqpgx"
	_ "github.com/dbqueue/dbqueue/driver/dbqsqlite"
	"github.com/dbqueue/dbqueue/internal/sqldb"
	"github.com/dbqueue/dbqueue/migrations"
)

const usage = `usage: migrate [-dsn DSN] [-jobs T -failed T -schema S] up|down|status|version|export

  up       apply pending migrations (creates jobs and failed_jobs)
  down     roll back the last migration (drops the tables and their jobs)
  status   list migrations and whether each is applied
  version  print the newest applied migration
  export   write the migrations' SQL to -dir for goose, golang-migrate or Atlas:
           migrate export -dialect postgres|mysql|sqlite [-format goose|golang-migrate] -dir DIR

The DSN comes from -dsn or $DATABASE_URL:
  postgres://user:pass@host:5432/db   mysql://user:pass@host:3306/db
  user:pass@tcp(host:3306)/db         sqlite:./queue.db

Table names (default jobs and failed_jobs in the current schema):
  -jobs NAME  -failed NAME  -schema NAME (PostgreSQL only)
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		// One prefix: the library's errors carry their own "dbqueue: ".
		fmt.Fprintln(os.Stderr, "migrate:", strings.TrimPrefix(err.Error(), "dbqueue: "))
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	dsn := fs.String("dsn", os.Getenv("DATABASE_URL"), "database DSN (default $DATABASE_URL)")
	var tables migrations.Tables
	fs.StringVar(&tables.Jobs, "jobs", "", "jobs table (default jobs)")
	fs.StringVar(&tables.Failed, "failed", "", "failed jobs table (default failed_jobs)")
	fs.StringVar(&tables.Schema, "schema", "", "PostgreSQL schema of the tables (default: the current schema)")
	dialect := fs.String("dialect", "", "export: postgres, mysql or sqlite (default: the DSN's)")
	format := fs.String("format", "goose", "export: goose or golang-migrate")
	dir := fs.String("dir", "", "export: the directory to write the SQL files to")
	// No error shows a secret of the DSN, whatever quotes it.
	defer func() { err = sqldb.RedactError(*dsn, err) }()
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
	case "export":
		return export(*dialect, *dsn, *format, *dir, tables, stdout)
	case "":
		return errors.New("no command given\n" + usage)
	default:
		return fmt.Errorf("unknown command %q\n%s", cmd, usage)
	}
	if strings.TrimSpace(*dsn) == "" {
		return errors.New("no database named: pass -dsn DSN or set DATABASE_URL\n" + usage)
	}
	db, dbDialect, err := dbqueue.OpenSQL(*dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.PingContext(ctx); err != nil {
		return fmt.Errorf("cannot reach the %s database: %w", dbDialect, err)
	}
	// Widened columns are printed below, not logged.
	m, err := migrations.New(db, dbDialect, migrations.WithTables(tables), migrations.WithLogger(nil))
	if err != nil {
		return err
	}
	switch cmd {
	case "up":
		results, err := m.Up(ctx)
		for _, r := range results {
			fmt.Fprintf(stdout, "applied %s (%s)\n", r.Source.Path, r.Duration.Round(1e6))
		}
		for _, w := range m.Widened() {
			fmt.Fprintln(stdout, w)
		}
		for _, n := range m.Notes() {
			fmt.Fprintln(stdout, n)
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

// export writes the rendered migrations to dir.
func export(dialect, dsn, format, dir string, tables migrations.Tables, stdout io.Writer) error {
	if dir == "" {
		return errors.New("export: name the directory to write to with -dir DIR\n" + usage)
	}
	d := dbqueue.Dialect(dialect)
	if dialect == "" {
		if strings.TrimSpace(dsn) == "" {
			return errors.New("export: name the dialect with -dialect postgres|mysql|sqlite (or pass -dsn)\n" + usage)
		}
		parsed, err := dbqueue.ParseDSN(dsn)
		if err != nil {
			return err
		}
		d = parsed.Dialect
	}
	opts := []migrations.Option{migrations.WithTables(tables)}
	switch format {
	case "goose":
	case "golang-migrate":
		opts = append(opts, migrations.FormatGolangMigrate)
	default:
		return fmt.Errorf("export: unknown -format %q: use goose or golang-migrate", format)
	}
	fsys, err := migrations.FS(d, opts...)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if err := os.CopyFS(dir, fsys); err != nil {
		if errors.Is(err, iofs.ErrExist) {
			return fmt.Errorf("export: %w: remove the old files first, or choose another -dir", err)
		}
		return fmt.Errorf("export: %w", err)
	}
	names, _ := iofs.Glob(fsys, "*")
	for _, name := range names {
		fmt.Fprintln(stdout, "wrote", filepath.Join(dir, name))
	}
	return nil
}
