package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	"github.com/dbqueue/dbqueue/bench"
	"github.com/dbqueue/dbqueue/bench/dbqueueq"
)

// standaloneMeasures each run alone (one per invocation), on each of
// -dialects in turn, and print their own report instead of the table of
// the other measurements: they load the database in ways that would
// disturb those (an hour of churn, 10,000 queues, 16 processes, 1 MB
// payloads).
var standaloneMeasures = []string{"soak", "soak-plot", "width-queues", "procs", "payload", "limits"}

// standalone reports which standalone measurement -measure names, if any;
// it must then be the only one.
func standalone(measures string) (string, bool) {
	ms := strings.Split(measures, ",")
	for _, m := range ms {
		m = strings.TrimSpace(m)
		if slices.Contains(standaloneMeasures, m) {
			if len(ms) > 1 {
				log.Fatalf("-measure %s runs alone: give it without %s", m, measures)
			}
			return m, true
		}
	}
	return "", false
}

// runStandalone runs measurement m on every dialect of c and exits.
func runStandalone(c *config, m string) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if m == "procs" && *procsChild {
		if err := runProcsChild(ctx, c); err != nil {
			log.Fatal(err)
		}
		return
	}
	if m == "soak-plot" {
		if err := replot(flag.Args()); err != nil {
			log.Fatal(err)
		}
		return
	}
	var run func(context.Context, *config, string) error
	switch m {
	case "soak":
		sc, err := parseSoak()
		if err != nil {
			log.Fatal(err)
		}
		run = func(ctx context.Context, c *config, d string) error { return runSoak(ctx, c, d, sc) }
	case "width-queues":
		run = runWidthQueues
	case "procs":
		if _, err := procsFlags(); err != nil {
			log.Fatal(err)
		}
		run = runProcs
	case "payload":
		run = runPayload
	case "limits":
		run = runLimits
	}
	stopProfile, err := bench.CPUProfile(flag.Lookup("cpuprofile").Value.String())
	if err != nil {
		log.Fatal(err)
	}
	failed := false
	for _, d := range c.dialects {
		if err := run(ctx, c, d); err != nil {
			log.Printf("%s: %s: %v", m, d, err)
			failed = true
			if ctx.Err() != nil {
				break
			}
		}
	}
	stopProfile()
	if failed {
		os.Exit(1)
	}
}

// replot draws each soak CSV named again (soak-pg.csv → soak-pg.png) and
// prints its summary: for a run cut short, or a plot made elsewhere.
func replot(paths []string) error {
	if len(paths) == 0 {
		return fmt.Errorf("-measure soak-plot: name the soak CSV files after the flags")
	}
	for _, p := range paths {
		png := strings.TrimSuffix(p, ".csv") + ".png"
		if err := plotSoakFile(p, png); err != nil {
			return err
		}
		t, err := readSoakFile(p)
		if err != nil {
			return err
		}
		el := t.col("elapsed_s")
		if len(el) == 0 {
			return fmt.Errorf("%s: no samples", p)
		}
		s, err := summarizeSoakFile(p, soakWarmup(time.Duration(el[len(el)-1]*float64(time.Second))).Round(time.Second))
		if err != nil {
			return err
		}
		fmt.Printf("\n### %s\n\n%s\n\nplot: %s\n\n%s\n", p, t.header, png, s)
	}
	return nil
}

// openDialect opens dbqueue on dialect d ("pg", "mariadb", "sqlite") with
// worker options o; sqliteDSN is the file SQLite uses.
func openDialect(ctx context.Context, c *config, d string, o dbqueueq.Options, sqliteDSN string) (*dbqueueq.System, string, error) {
	switch d {
	case "pg":
		s, err := dbqueueq.NewPG(ctx, c.pgDSN, o)
		return s, "PostgreSQL", err
	case "mariadb":
		s, err := dbqueueq.NewMariaDB(ctx, c.myDSN, o)
		return s, "MariaDB", err
	case "sqlite":
		s, err := dbqueueq.NewSQLite(ctx, sqliteDSN, o)
		return s, "SQLite", err
	}
	return nil, "", fmt.Errorf("unknown dialect %q", d)
}

// reportHead is the lines above a standalone measurement's table: the
// command as run, the date, the machine, the server and the load.
func reportHead(title, version string, began time.Time, loadBefore string) string {
	return fmt.Sprintf("### %s\n\n- command: `%s`\n- %s UTC, took %s; load average (1 min) %s → %s\n- machine: %s\n- server: %s\n",
		title, bench.CommandLine(), began.UTC().Format("2006-01-02 15:04"), time.Since(began).Round(time.Second),
		loadBefore, bench.LoadAvg(), bench.Machine(), version)
}
