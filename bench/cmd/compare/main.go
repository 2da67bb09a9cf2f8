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
//
// The ceiling loops claim as many jobs per statement as dbqueue's worker
// does (min(1000, concurrency+prefetch)) unless -batch says otherwise;
// -batch-also adds a ceiling of another batch (100) beside each, and as
// many ceiling goroutines run as dbqueue keeps claims in flight (-workers). With -for
// (default 4s) each system's measurements are sized from its warm-up rate
// to take about that long, between -min-jobs and -jobs.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dbqueue/dbqueue/bench"
	"github.com/dbqueue/dbqueue/bench/asynqq"
	"github.com/dbqueue/dbqueue/bench/ceiling"
	"github.com/dbqueue/dbqueue/bench/dbqueueq"
	"github.com/dbqueue/dbqueue/bench/riverq"
)

// config is what a system constructor may read from the flags.
type config struct {
	pgDSN, myDSN string
	sqliteDSN    string
	ceiling      ceiling.Options
	ceilingAlso  int // a second ceiling per database with this batch; 0 = none
	dbqueue      dbqueueq.Options
	riverFast    bool
	riverConns   int
	otel         bool // also run each dbqueue system with OpenTelemetry on
	noMetrics    bool // also run each dbqueue system with worker metrics off
	history      bool // also run each dbqueue system with the job history on
	handler      string
	redisFsync   string // asynq's Redis: appendfsync policy, "" = no append-only file
}

// handlerInsert is -handler insert: every job's handler inserts one row
// (see insertSystems).
const handlerInsert = "insert"

// insertSystems are the systems -handler insert runs, and what each becomes:
// dbqueue-<db> runs twice, as dbqueue-<db>-insert-tx (a transactional
// handler, worker.HandleTx) and dbqueue-<db>-insert (a plain handler with
// its own INSERT, then the batched delete); ceiling-<db> runs the
// hand-written loop ceiling-<db>-tx (claim B, then per job begin, insert,
// delete with the ownership check, commit, as many at once as dbqueue's
// Concurrency), the reference of the "× ceiling" column.
var insertSystems = []string{dbqueueq.NamePG, dbqueueq.NameMariaDB, ceiling.CeilingPG, ceiling.CeilingMariaDB}

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
	{asynqq.Name, func(ctx context.Context, c *config) (bench.System, error) {
		return asynqq.New(ctx, asynqq.Options{Concurrency: c.dbqueue.Concurrency, AppendFsync: c.redisFsync})
	}},
	{ceiling.CeilingPG, func(ctx context.Context, c *config) (bench.System, error) {
		return ceiling.NewPG(ctx, c.pgDSN, c.ceiling)
	}},
	{ceiling.CeilingMariaDB, func(ctx context.Context, c *config) (bench.System, error) {
		return ceiling.NewMariaDB(ctx, c.myDSN, c.ceiling)
	}},
	{ceiling.CeilingSQLite, func(ctx context.Context, c *config) (bench.System, error) {
		return ceiling.NewSQLite(ctx, ceilingSQLitePath(c.ceiling), c.ceiling)
	}},
}

// ceilingSQLitePath is the SQLite ceiling's own database file, apart from
// dbqueue's (-sqlite).
func ceilingSQLitePath(o ceiling.Options) string {
	name := "ceiling_bench"
	if o.Variant != "" {
		name += "_b" + o.Variant
	}
	return filepath.Join(os.TempDir(), name+".db")
}

// defaultJobs makes one measurement hundreds of full claims (B=1000).
const defaultJobs = 200_000

// sized is how many jobs take about d at rate jobs/s, rounded up to a
// multiple of 1,000 and kept within [lo, hi].
func sized(rate float64, d time.Duration, lo, hi int) int {
	k := int(rate*d.Seconds()+999) / 1_000 * 1_000
	return max(min(lo, hi), min(hi, k))
}

// variant opens the -batch-also ceiling beside the reference ceiling name,
// or returns nil.
func variant(ctx context.Context, c *config, name string) bench.System {
	if c.ceilingAlso <= 0 || c.ceilingAlso == c.ceiling.Batch {
		return nil
	}
	o := c.ceiling
	o.Batch, o.Variant = c.ceilingAlso, strconv.Itoa(c.ceilingAlso)
	var (
		s   bench.System
		err error
	)
	switch name {
	case ceiling.CeilingPG:
		s, err = ceiling.NewPG(ctx, c.pgDSN, o)
	case ceiling.CeilingMariaDB:
		s, err = ceiling.NewMariaDB(ctx, c.myDSN, o)
	case ceiling.CeilingSQLite:
		s, err = ceiling.NewSQLite(ctx, ceilingSQLitePath(o), o)
	default:
		return nil
	}
	if err != nil {
		log.Fatalf("%s: %v", name, err)
	}
	return s
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
		jobs     = flag.Int("jobs", defaultJobs, "jobs per measurement; with -for, the most")
		forDur   = flag.Duration("for", 4*time.Second, "size each system's measurements to take about this long at its warm-up rate, between -min-jobs and -jobs (0: always -jobs)")
		minJobs  = flag.Int("min-jobs", 20_000, "with -for: the fewest jobs per measurement")
		rounds   = flag.Int("rounds", 5, "rounds; each runs every system in both modes")
		systems  = flag.String("systems", strings.Join(names(), ","), "comma-separated systems to run: "+strings.Join(names(), ", "))
		modes    = flag.String("modes", "burn-down,end-to-end", "comma-separated modes")
		batch    = flag.Int("enqueue-batch", 1_000, "end-to-end: jobs per Enqueue call")
		warmup   = flag.Bool("warmup", true, "two unmeasured burn-downs per system first, of min(jobs, 5000) and min(jobs, 50000) jobs; the second, warm, sizes the measurements")
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
	flag.IntVar(&c.ceiling.Workers, "workers", 0, "ceiling: worker goroutines (W); 0 = follow dbqueue's claims in flight, dbq-workers × claims (2)")
	flag.IntVar(&c.ceiling.Batch, "batch", 0, "ceiling: jobs per claim (B); 0 = follow dbqueue's claim size, min(1000, concurrency+prefetch)")
	flag.IntVar(&c.ceilingAlso, "batch-also", 100, "ceiling: also run ceiling-<db>-b<N> with this batch beside the reference ceiling (0 = none)")
	flag.DurationVar(&c.ceiling.Poll, "poll", 5*time.Millisecond, "ceiling: sleep after an empty claim")
	flag.BoolVar(&c.riverFast, "river-fast-insert", false, "river: InsertManyFast (COPY) instead of InsertMany, which River's bench uses")
	flag.IntVar(&c.riverConns, "river-conns", 0, "river: pgxpool MaxConns (0 = pgx default, as River's CLI)")
	flag.StringVar(&c.handler, "handler", "", "what each job's handler does: \"\" (nothing) or \"insert\" (insert one row: dbqueue with a transactional handler and with a plain one, against a hand-written transaction loop; systems "+strings.Join(insertSystems, ",")+")")
	flag.StringVar(&c.redisFsync, "redis-appendfsync", "", "asynq: run its private Redis with the append-only file on and this appendfsync policy (everysec, always); \"\" = Redis's defaults, no append-only file")
	flag.BoolVar(&c.noMetrics, "metrics-off", false, "dbqueue: also run each dbqueue system as dbqueue-<db>-nometrics, with the worker's metrics and heartbeat off (Options.MetricsInterval -1), beside it in every round")
	flag.BoolVar(&c.history, "history", false, "dbqueue: also run each dbqueue system as dbqueue-<db>-history, with the job history on (Options.HistoryRetention 1h), beside it in every round")
	flag.BoolVar(&c.otel, "otel", false, "dbqueue: also run each dbqueue system as dbqueue-<db>-otel, with OpenTelemetry metrics and traces on (an SDK exporting nowhere), beside it in every round")
	flag.Parse()
	systemsSet := false
	flag.Visit(func(f *flag.Flag) { systemsSet = systemsSet || f.Name == "systems" })
	switch c.handler {
	case "":
	case handlerInsert:
		if !systemsSet {
			*systems = strings.Join(insertSystems, ",")
		}
		c.ceiling.Insert, c.ceiling.TxConcurrency = true, c.dbqueue.Concurrency
		c.ceilingAlso = 0
	default:
		log.Fatalf("unknown -handler %q (have \"\" or %q)", c.handler, handlerInsert)
	}
	batchNote := "set"
	if c.ceiling.Batch <= 0 {
		c.ceiling.Batch = c.dbqueue.ClaimSize()
		batchNote = "following dbqueue's claim"
	}
	if c.ceiling.Workers <= 0 {
		c.ceiling.Workers = c.dbqueue.ClaimsInFlight()
		batchNote += ", W following dbqueue's claims in flight"
	}
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
		if c.handler == handlerInsert && !slices.Contains(insertSystems, want[i]) {
			log.Fatalf("-handler insert: system %q has no insert workload (have %s)", want[i], strings.Join(insertSystems, ", "))
		}
	}
	for _, r := range registry {
		if !slices.Contains(want, r.name) {
			continue
		}
		opens := []config{c}
		if c.handler == handlerInsert && strings.HasPrefix(r.name, "dbqueue-") {
			tx, plain := c, c
			tx.dbqueue.Handler, plain.dbqueue.Handler = dbqueueq.HandlerInsertTx, dbqueueq.HandlerInsert
			opens = []config{tx, plain}
		}
		for _, oc := range opens {
			s, err := r.open(ctx, &oc)
			if errors.Is(err, asynqq.ErrNoRedis) && !systemsSet {
				fmt.Fprintf(os.Stderr, "%s: left out: %v\n", r.name, err)
				continue
			}
			if err != nil {
				log.Fatalf("%s: %v", r.name, err)
			}
			defer s.Close()
			if err := s.Setup(ctx); err != nil {
				log.Fatalf("%s: setup: %v", r.name, err)
			}
			syss = append(syss, s)
		}
		// The dbqueue variants run beside their system in every round.
		for _, v := range []struct {
			on     bool
			suffix string
			set    func(*dbqueueq.Options)
		}{
			{c.otel, dbqueueq.OTelSuffix, func(o *dbqueueq.Options) { o.OTel = true }},
			{c.noMetrics, dbqueueq.NoMetricsSuffix, func(o *dbqueueq.Options) { o.NoMetrics = true }},
			{c.history, dbqueueq.HistorySuffix, func(o *dbqueueq.Options) { o.History = true }},
		} {
			if !v.on || !strings.HasPrefix(r.name, "dbqueue-") {
				continue
			}
			o := c
			v.set(&o.dbqueue)
			s, err := r.open(ctx, &o)
			if err != nil {
				log.Fatalf("%s%s: %v", r.name, v.suffix, err)
			}
			defer s.Close()
			if err := s.Setup(ctx); err != nil {
				log.Fatalf("%s: setup: %v", s.Name(), err)
			}
			syss = append(syss, s)
		}
		if v := variant(ctx, &c, r.name); v != nil {
			defer v.Close()
			if err := v.Setup(ctx); err != nil {
				log.Fatalf("%s: setup: %v", v.Name(), err)
			}
			syss = append(syss, v)
		}
	}

	measure := func(s bench.System, mode bench.Mode, n int) (bench.Measurement, error) {
		mctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		return bench.Measure(mctx, s, mode, n, *batch)
	}

	began := time.Now()
	loadBefore := bench.LoadAvg()
	// n is each system's jobs per measurement.
	n := make(map[string]int)
	for _, s := range syss {
		n[s.Name()] = *jobs
	}
	if *warmup || *forDur > 0 {
		for _, s := range syss {
			wctx, cancel := context.WithTimeout(ctx, 2**timeout)
			rate, err := bench.WarmRate(wctx, s, min(*jobs, 5_000), min(*jobs, 50_000))
			cancel()
			if err != nil {
				log.Fatalf("warm-up: %v", err)
			}
			if *forDur > 0 {
				n[s.Name()] = sized(rate, *forDur, *minJobs, *jobs)
			}
			if *verbose {
				fmt.Fprintf(os.Stderr, "warm-up %-22s %8.0f jobs/s -> %d jobs per measurement\n", s.Name(), rate, n[s.Name()])
			}
		}
	}

	var res bench.Results
	for round := range *rounds {
		for _, mode := range modeList {
			for i := range syss {
				s := syss[(i+round)%len(syss)]
				m, err := measure(s, mode, n[s.Name()])
				if err != nil {
					log.Fatalf("round %d: %v", round+1, err)
				}
				res.Add(s.Name(), s.Database(), mode, n[s.Name()], m)
				if *verbose {
					k := float64(n[s.Name()])
					fmt.Fprintf(os.Stderr, "round %d  %-10s  %-26s %8.0f jobs/s  cpu/job client %5.1f µs  server %5.1f µs  allocs/job %5.1f %6.0f B  load %s\n", round+1, mode, s.Name(),
						k/m.Elapsed.Seconds(), float64(m.CPU.Client.Microseconds())/k, float64(m.CPU.Server.Microseconds())/k,
						float64(m.CPU.Allocs)/k, float64(m.CPU.AllocBytes)/k, bench.LoadAvg())
				}
			}
		}
	}

	also := ""
	if c.ceilingAlso > 0 && c.ceilingAlso != c.ceiling.Batch {
		also = fmt.Sprintf(" (-b%d: B=%d)", c.ceilingAlso, c.ceilingAlso)
	}
	var sizes []string
	for _, s := range syss {
		sizes = append(sizes, fmt.Sprintf("%s %d", s.Name(), n[s.Name()]))
	}
	if c.handler != "" {
		fmt.Printf("\nhandler: %s (ceiling: %d job transactions at once)", c.handler, c.ceiling.TxConcurrency)
	}
	fmt.Printf("\njobs per measurement: %s; %d rounds, ceiling W=%d B=%d %s%s, dbqueue workers=%d concurrency=%d prefetch=%d sleep=%s, end-to-end enqueue batch %d, took %s, load average %s -> %s\n\n",
		strings.Join(sizes, ", "), *rounds, c.ceiling.Workers, c.ceiling.Batch, batchNote, also, c.dbqueue.Workers, c.dbqueue.Concurrency, c.dbqueue.Prefetch, c.dbqueue.Sleep,
		*batch, time.Since(began).Round(time.Second), loadBefore, bench.LoadAvg())
	res.WriteMarkdown(os.Stdout)
	fmt.Println()
	bench.Caption{Command: bench.CommandLine(), Began: began, Took: time.Since(began), LoadBefore: loadBefore, LoadAfter: bench.LoadAvg()}.WriteMarkdown(os.Stdout)
	if *outRates {
		fmt.Println()
		res.WriteRaw(os.Stdout)
	}
}
