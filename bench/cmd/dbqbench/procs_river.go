package main

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/dbqueue/dbqueue/bench/riverq"
)

// procsRiverSchema is the PostgreSQL schema River's tables live in for
// procs, apart from compare's (riverq's default) and from dbqueue's.
const procsRiverSchema = "river_procs"

// procsRiverStats is how many jobs the parent pushes and ANALYZEs once, so
// river_job has statistics (TRUNCATE keeps them) as dbqueue's jobs table
// gets in dbqueueq's Setup: the planner's choice then does not depend on
// when autovacuum last ran.
const procsRiverStats = 20_000

// procsRiverTarget sets River up on PostgreSQL at dsn (its schema,
// migrated with rivermigrate, as riverq does) and returns it as a procs
// target, and what closes it.
func procsRiverTarget(ctx context.Context, dsn string, admin *sql.DB, pc procsConfig) (procsTarget, func(), error) {
	rv, err := riverq.New(ctx, dsn, riverq.Options{Schema: procsRiverSchema, Fast: true})
	if err != nil {
		return procsTarget{}, nil, err
	}
	closeRiver := func() { _ = rv.Close() }
	table := pgx.Identifier{procsRiverSchema, "river_job"}.Sanitize()
	err = rv.Setup(ctx)
	if err == nil {
		err = rv.Reset(ctx)
	}
	if err == nil {
		err = rv.Enqueue(ctx, procsRiverStats)
	}
	if err == nil {
		_, err = admin.ExecContext(ctx, "ANALYZE "+table)
	}
	if err == nil {
		err = rv.Reset(ctx)
	}
	if err != nil {
		closeRiver()
		return procsTarget{}, nil, err
	}
	childDSN, err := procsChildDSN(dsn, "pg")
	if err != nil {
		closeRiver()
		return procsTarget{}, nil, err
	}
	return procsTarget{
		system: procsRiver,
		label:  "River",
		prefill: func(ctx context.Context, n int) error {
			if err := rv.Reset(ctx); err != nil { // TRUNCATE river_job: the last run's completed rows go
				return err
			}
			return rv.Enqueue(ctx, n)
		},
		args: []string{"-measure", "procs", "-procs-child", "-procs-system", procsRiver, "-procs-dsn", childDSN,
			"-procs-concurrency", strconv.Itoa(pc.concurrency), "-procs-jobs", strconv.Itoa(pc.jobs)},
		stops: true,
		check: func(ctx context.Context, n int) error {
			return procsCheck(ctx, admin, "SELECT count(*) FILTER (WHERE state = 'completed'), count(*) FROM "+table, int64(n), int64(n))
		},
	}, closeRiver, nil
}

// runProcsRiverChild is one River child: connect, say "ready", wait for
// "go" on stdin, start a River client with -procs-concurrency MaxWorkers
// on the default queue, write "n K" to stdout whenever its count of
// completed jobs has grown to K, and on "stop" (or the end of stdin) stop
// the client, print "done N" and exit. River has no StopWhenEmpty: the
// parent, which sums the counts, says when the backlog is done.
func runProcsRiverChild(ctx context.Context) error {
	logs := &countingHandler{}
	pool, err := pgxpool.New(ctx, *procsDSN) // pgx's default pool, as riverq and River's CLI use
	if err != nil {
		return fmt.Errorf("river: connect: %w", err)
	}
	defer pool.Close()
	if err := pool.Ping(ctx); err != nil {
		return fmt.Errorf("river: connect: %w", err)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &riverq.BenchmarkWorker{})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		FetchCooldown:     riverq.FetchCooldown,
		FetchPollInterval: riverq.FetchPollInterval,
		Logger:            slog.New(logs),
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: *procsConcurrency}},
		Schema:            procsRiverSchema,
		Workers:           workers,
	})
	if err != nil {
		return err
	}
	events, unsubscribe := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: *procsJobs + 1_000, // never drop an event: it is how we count
		Kinds:    []river.EventKind{river.EventKindJobCancelled, river.EventKindJobCompleted, river.EventKindJobFailed},
	})
	defer unsubscribe()
	stdin := bufio.NewReader(os.Stdin)
	fmt.Println("ready")
	if _, err := stdin.ReadString('\n'); err != nil {
		return fmt.Errorf("waiting for go: %w", err)
	}
	counted := make(chan struct{})
	var done int64
	var bad []string
	go func() {
		defer close(counted)
		for ev := range events {
			for ev != nil { // this event, then those already waiting, then one report
				switch {
				case ev.Kind == river.EventKindJobCompleted:
					done++
				case ev.Kind == river.EventKindJobFailed && ev.Job.State != rivertype.JobStateDiscarded:
					// will be retried
				default:
					bad = append(bad, fmt.Sprintf("job %d: %s", ev.Job.ID, ev.Kind))
				}
				select {
				case ev = <-events:
				default:
					ev = nil
				}
			}
			fmt.Printf("n %d\n", done)
		}
	}()
	if err := client.Start(ctx); err != nil {
		return err
	}
	_, _ = stdin.ReadString('\n') // "stop", or EOF: the parent is gone
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	stopErr := client.Stop(stopCtx)
	unsubscribe() // closes events
	<-counted
	if stopErr != nil {
		return fmt.Errorf("river: stop: %w", stopErr)
	}
	if len(bad) > 0 {
		return fmt.Errorf("river: %d jobs ended other than completed, first: %s", len(bad), bad[0])
	}
	if n := logs.n.Load(); n > 0 {
		return fmt.Errorf("river: %d warnings or errors logged, first: %s", n, logs.first())
	}
	fmt.Printf("done %d\n", done)
	return nil
}

// riverVersion is the River module this binary was built with.
func riverVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/riverqueue/river" {
				return strings.TrimSpace(d.Version)
			}
		}
	}
	return "(version unknown)"
}
