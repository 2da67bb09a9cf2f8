package main

import (
	"context"
	"fmt"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/migrations"
)

// migrate is cmd/migrate's up, down, status and version (export stays
// there).
func (c *cli) migrate(ctx context.Context, args []string) error {
	sub, args, err := subcommand("migrate", args, "up", "down", "status", "version")
	if err != nil {
		return err
	}
	rest, err := parse(newFlagSet(c, "migrate "+sub), args)
	if err != nil {
		return err
	}
	if err := noArgs("migrate "+sub, rest); err != nil {
		return err
	}
	if c.dsn == "" {
		return usagef("no database named: pass -dsn DSN or set DATABASE_URL")
	}
	db, d, err := dbqueue.OpenSQL(c.dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.PingContext(ctx); err != nil {
		return fmt.Errorf("cannot reach the %s database: %w", d, err)
	}
	// Widened columns are printed below, not logged.
	m, err := migrations.New(db, d, migrations.WithTables(migrations.Tables(c.tables)), migrations.WithLogger(nil))
	if err != nil {
		return err
	}
	switch sub {
	case "up":
		results, err := m.Up(ctx)
		for _, r := range results {
			fmt.Fprintf(c.out, "applied %s (%s)\n", r.Source.Path, r.Duration.Round(1e6))
		}
		for _, w := range m.Widened() {
			fmt.Fprintln(c.out, printable(w.String()))
		}
		for _, n := range m.Notes() {
			fmt.Fprintln(c.out, printable(n))
		}
		if err == nil && len(results) == 0 {
			fmt.Fprintln(c.out, "no pending migrations")
		}
		return err
	case "down":
		r, err := m.Down(ctx)
		if r != nil && r.Source != nil {
			fmt.Fprintf(c.out, "rolled back %s\n", r.Source.Path)
		}
		return err
	case "status":
		st, err := m.Status(ctx)
		w := c.table()
		for _, s := range st {
			when := "pending"
			if s.State == "applied" {
				when = "applied " + s.AppliedAt.Format("2006-01-02 15:04:05")
			}
			fmt.Fprintf(w, "%s\t%s\n", s.Source.Path, when)
		}
		w.Flush()
		return err
	default:
		v, err := m.Version(ctx)
		if err == nil {
			fmt.Fprintln(c.out, v)
		}
		return err
	}
}
