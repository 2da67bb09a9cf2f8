// Command compare measures job throughput of dbqueue (PostgreSQL, MariaDB,
// SQLite), River and the minimal "ceiling" loops on PostgreSQL and MariaDB
// and prints a markdown table of medians.
//
//	cd bench && go run ./cmd/compare -rounds 3
//
// Each round runs every system's burn-down (prefill N jobs, time the drain),
// then every system's end-to-end (enqueue N in batches from one goroutine
// while workers drain; time to the last job done). The order of systems
// rotates from round to round so no system always runs first or last.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/dbqueue/dbqueue/bench"
	"github.com/dbqueue/dbqueue/bench/ceiling"
	"github.com/dbqueue/dbqueue/bench/dbqueueq"
	"github.com/dbqueue/dbqueue/bench/riverq"
)

// config is what a system constructor may read from the flags.
type config struct {
	pgDSN, myDSN string
	sqliteDSN    string
	ceiling      ceiling.Options
	dbqueue      dbqueueq.Options
	riverFast    bool
	riverConns   int
}

// registry lists the systems -systems can name, in report order.
var registry = []struct {
	name string
	open func(ctx context.Context, c *config) (bench.System, error)
}{
	{dbqueueq.NamePG, func(ctx context.Context, c *config) (bench.System, error) {
		return dbqueueq.NewPG(ctx, c.pgDSN, c.dbqueue)
	}},
	{dbqueueq.NameMariaDB, func(ctx context.Context, c *config) (bench.System, error) {
		return dbqueueq.NewMariaDB(ctx, c.myDSN, c.dbqueue)
	}},
	{dbqueueq.NameSQLite, func(ctx context.Context, c *config) (bench.System, error) {
		return dbqueueq.NewSQLite(ctx, c.sqliteDSN, c.dbqueue)
	}},
	{bench.RiverName, func(ctx context.Context, c *config) (bench.System, error) {
		return riverq.New(ctx, c.pgDSN, riverq.Options{Fast: c.riverFast, MaxConns: int32(c.riverConns)})
	}},
	{ceiling.CeilingPG, func(ctx context.Context, c *config) (bench.System, error) {
		return ceiling.NewPG(ctx, c.pgDSN, c.ceiling)
	}},
	{ceiling.CeilingMariaDB, func(ctx context.Context, c *config) (bench.System, error) {
		return ceiling.NewMariaDB(ctx, c.myDSN, c.ceiling)
	}},
}

func names() []string {
	var n []string
	for _, r := range registry {
		n = append(n, r.name)
	}
	return n
}

func main() {
	var (
		c        config
		jobs     = flag.Int("jobs", 20_000, "jobs per measurement")
		rounds   = flag.Int("rounds", 5, "rounds; each runs every system in both modes")
		systems  = flag.String("systems", strings.Join(names(), ","), "comma-separated systems to run: "+strings.Join(names(), ", "))
		modes    = flag.String("modes", "burn-down,end-to-end", "comma-separated modes")
		batch    = flag.Int("enqueue-batch", 1_000, "end-to-end: jobs per Enqueue call")
		warmup   = flag.Bool("warmup", true, "one unmeasured burn-down of min(jobs, 5000) per system first")
		timeout  = flag.Duration("timeout", 2*time.Minute, "limit for one measurement")
		verbose  = flag.Bool("v", true, "print every measurement to stderr")
		outRates = flag.Bool("raw", false, "also print every measured rate")
		cpuProf  = flag.String("cpuprofile", "", "write a CPU profile of the whole run (prefills included) to this file")
	)
	flag.StringVar(&c.pgDSN, "pg", "postgres://postgres@127.0.0.1:5432/test", "PostgreSQL DSN")
	flag.StringVar(&c.myDSN, "mysql", "root@tcp(127.0.0.1:3306)/test", "MariaDB/MySQL DSN (go-sql-driver format)")
	flag.StringVar(&c.sqliteDSN, "sqlite", "sqlite:"+filepath.Join(os.TempDir(), "dbqueue_bench.db"), "SQLite DSN (dbqueue-sqlite)")
	flag.IntVar(&c.dbqueue.Concurrency, "concurrency", dbqueueq.DefaultConcurrency, "dbqueue: worker Concurrency")
	flag.IntVar(&c.dbqueue.Prefetch, "prefetch", dbqueueq.DefaultPrefetch, "dbqueue: worker Prefetch (claim batch = concurrency+prefetch)")
	flag.IntVar(&c.dbqueue.Claims, "claims", 0, "dbqueue: worker Claims (claims in flight per worker; 0 = the library's default)")
	flag.IntVar(&c.dbqueue.Workers, "dbq-workers", dbqueueq.DefaultWorkers, "dbqueue: worker.Worker instances, each with its own pool")
	flag.DurationVar(&c.dbqueue.Sleep, "sleep", dbqueueq.DefaultSleep, "dbqueue: worker Sleep (longest poll interval when idle)")
	flag.IntVar(&c.ceiling.Workers, "workers", 8, "ceiling: worker goroutines (W)")
	flag.IntVar(&c.ceiling.Batch, "batch", 100, "ceiling: jobs per claim (B)")
	flag.DurationVar(&c.ceiling.Poll, "poll", 5*time.Millisecond, "ceiling: sleep after an empty claim")
	flag.BoolVar(&c.riverFast, "river-fast-insert", false, "river: InsertManyFast (COPY) instead of InsertMany, which River's bench uses")
	flag.IntVar(&c.riverConns, "river-conns", 0, "river: pgxpool MaxConns (0 = pgx default, as River's CLI)")
	flag.Parse()
	stopProfile, err := bench.CPUProfile(*cpuProf)
	if err != nil {
		log.Fatal(err)
	}
	defer stopProfile()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	log.SetFlags(0)

	var modeList []bench.Mode
	for _, m := range strings.Split(*modes, ",") {
		switch bench.Mode(strings.TrimSpace(m)) {
		case bench.ModeBurnDown, bench.ModeEndToEnd:
			modeList = append(modeList, bench.Mode(strings.TrimSpace(m)))
		default:
			log.Fatalf("unknown mode %q", m)
		}
	}

	var syss []bench.System
	want := strings.Split(*systems, ",")
	for i := range want {
		want[i] = strings.TrimSpace(want[i])
		if !slices.Contains(names(), want[i]) {
			log.Fatalf("unknown system %q (have %s)", want[i], strings.Join(names(), ", "))
		}
	}
	for _, r := range registry {
		if !slices.Contains(want, r.name) {
			continue
		}
		s, err := r.open(ctx, &c)
		if err != nil {
			log.Fatalf("%s: %v", r.name, err)
		}
		defer s.Close()
		if err := s.Setup(ctx); err != nil {
			log.Fatalf("%s: setup: %v", r.name, err)
		}
		syss = append(syss, s)
	}

	measure := func(s bench.System, mode bench.Mode, n int) (float64, error) {
		mctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		d, err := bench.Measure(mctx, s, mode, n, *batch)
		if err != nil {
			return 0, err
		}
		return float64(n) / d.Seconds(), nil
	}

	began := time.Now()
	loadBefore := bench.LoadAvg()
	if *warmup {
		for _, s := range syss {
			if _, err := measure(s, bench.ModeBurnDown, min(*jobs, 5_000)); err != nil {
				log.Fatalf("warm-up: %v", err)
			}
		}
	}

	var res bench.Results
	for round := range *rounds {
		for _, mode := range modeList {
			for i := range syss {
				s := syss[(i+round)%len(syss)]
				rate, err := measure(s, mode, *jobs)
				if err != nil {
					log.Fatalf("round %d: %v", round+1, err)
				}
				res.Add(s.Name(), s.Database(), mode, rate)
				if *verbose {
					fmt.Fprintf(os.Stderr, "round %d  %-10s  %-16s %8.0f jobs/s\n", round+1, mode, s.Name(), rate)
				}
			}
		}
	}

	fmt.Printf("\n%d jobs per measurement, %d rounds, ceiling W=%d B=%d, dbqueue workers=%d concurrency=%d prefetch=%d sleep=%s, end-to-end enqueue batch %d, took %s, load average %s -> %s\n\n",
		*jobs, *rounds, c.ceiling.Workers, c.ceiling.Batch, c.dbqueue.Workers, c.dbqueue.Concurrency, c.dbqueue.Prefetch, c.dbqueue.Sleep,
		*batch, time.Since(began).Round(time.Second), loadBefore, bench.LoadAvg())
	res.WriteMarkdown(os.Stdout)
	if *outRates {
		fmt.Println()
		res.WriteRaw(os.Stdout)
	}
}
