package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx" for the PostgreSQL statistics

	"github.com/dbqueue/dbqueue/bench"
	"github.com/dbqueue/dbqueue/bench/dbqueueq"
)

// The backlog-depth table (-measure depth): does a queue stay as fast with
// millions of jobs waiting as with thousands? One row per depth of ready
// jobs (-depths), and one row with -delayed jobs due in a day beside a
// stream of ready ones. Each round of a ready row:
//
//  1. empties the tables and pushes the backlog of B ready jobs to the
//     default queue with PushMany of 50,000; not timed;
//  2. trickle: with the backlog waiting, pushes -latency-rate jobs/s for
//     -latency-for to the queue "trickle", worked by a worker of its own,
//     and records push → handler start (the backlog's rows share the
//     table and its indexes, not the queue);
//  3. end to end: a worker on the default queue works while one goroutine
//     pushes -depth-jobs more in PushMany of 1,000; jobs/s from the first
//     push until all are pushed and -depth-jobs jobs are done (the backlog
//     in front keeps the worker busy, so this is work while pushing at
//     depth B; the worker goes on working until the pusher is done);
//  4. burn-down: the backlog is topped up to B (step 3 took more than it
//     pushed), and the worker works all of it; jobs/s until the last is
//     done.
//
// The delayed row pushes its delayed jobs once; each round then runs the
// trickle and end to end on the default queue, beside them, and burns down
// -depth-jobs ready jobs pushed in front of them. The ratio column divides
// by the row of depth -depth-ref.
const trickleQueue = "trickle"

// delayedRow marks the delayed row in depthRow.depth.
const delayedRow = -1

type depthRow struct {
	depth     int // ready backlog; delayedRow for the delayed row
	burn, e2e *row
	trickle   *row
	stats     []string // PostgreSQL statistics per burn-down, for the notes
}

// parseDepths reads -depths: comma-separated counts, with k and M suffixes.
func parseDepths(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		mult := 1
		switch {
		case strings.HasSuffix(f, "k"):
			mult, f = 1_000, strings.TrimSuffix(f, "k")
		case strings.HasSuffix(f, "M"):
			mult, f = 1_000_000, strings.TrimSuffix(f, "M")
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("-depths: %q is not a count of jobs (use 0, 200000, 200k, 2M)", f)
		}
		out = append(out, n*mult)
	}
	return out, nil
}

// runDepths measures the backlog-depth rows on sys and writes their table.
func runDepths(ctx context.Context, c *config, d string, sys *dbqueueq.System, w io.Writer, progress func(string, ...any)) error {
	var stats *pgStats
	if d == "pg" {
		var err error
		if stats, err = openPGStats(c.pgDSN); err != nil {
			return err
		}
		defer stats.Close()
	}
	limit := func(n int) (context.Context, context.CancelFunc) {
		return context.WithTimeout(ctx, c.timeout+time.Duration(n/1_000)*time.Second)
	}
	nLat := int(float64(c.latencyRate) * c.latencyFor.Seconds())
	rows := make([]*depthRow, 0, len(c.depths)+1)
	for _, b := range c.depths {
		rows = append(rows, &depthRow{depth: b, burn: &row{}, e2e: &row{}, trickle: &row{}})
	}
	if c.delayed > 0 {
		rows = append(rows, &depthRow{depth: delayedRow, burn: &row{}, e2e: &row{}, trickle: &row{}})
	}
	defer sys.SetQueues()
	// The end-to-end runs stop at -depth-jobs with more of the backlog
	// claimed; burn-downs empty the queue, where overshoot is an error.
	defer sys.SetOvershoot(false)

	// trickleAndE2E runs steps 2 and 3 on whatever the queue holds.
	trickleAndE2E := func(r *depthRow, round int, queue string) error {
		rctx, cancel := limit(nLat)
		if queue != "" {
			sys.SetQueues(queue)
		}
		p, err := latency(rctx, sys, c.latencyRate, nLat, queue)
		sys.SetQueues()
		cancel()
		if err != nil {
			return fmt.Errorf("trickle: %w", err)
		}
		for i := range p {
			r.trickle.lat[i] = append(r.trickle.lat[i], p[i])
		}
		rctx, cancel = limit(c.depthJobs)
		sys.SetOvershoot(true)
		m, err := bench.EndToEnd(rctx, sys, c.depthJobs, 1_000)
		sys.SetOvershoot(false)
		cancel()
		if err != nil {
			return err
		}
		rate := float64(c.depthJobs) / m.Elapsed.Seconds()
		r.e2e.add(rate, perJob(m.CPU.Server, c.depthJobs))
		progress("round %d  %s  trickle p50 %.1f ms p99 %.1f ms  end to end %8.0f jobs/s  %5.0f µs server CPU/job",
			round+1, r.name(c), p[0], p[2], rate, perJob(m.CPU.Server, c.depthJobs))
		return nil
	}
	// burn runs step 4: n jobs off the queue.
	burn := func(r *depthRow, round, n int) error {
		before, err := stats.take(ctx)
		if err != nil {
			return err
		}
		rctx, cancel := limit(n)
		m, err := bench.Work(rctx, sys, n)
		cancel()
		if err != nil {
			return err
		}
		after, err := stats.take(ctx)
		if err != nil {
			return err
		}
		rate := float64(n) / m.Elapsed.Seconds()
		r.burn.add(rate, perJob(m.CPU.Server, n))
		note := ""
		if stats != nil {
			note = after.since(before, n)
			r.stats = append(r.stats, note)
		}
		progress("round %d  %s  burn-down %d  %8.0f jobs/s  %5.0f µs server CPU/job  %s",
			round+1, r.name(c), n, rate, perJob(m.CPU.Server, n), note)
		return nil
	}
	fill := func(n int, queue string, delay time.Duration) error {
		rctx, cancel := limit(n)
		defer cancel()
		start := time.Now()
		if err := sys.Fill(rctx, n, queue, delay); err != nil {
			return fmt.Errorf("fill %d: %w", n, err)
		}
		progress("pushed %d jobs in %s (%.0f jobs/s)", n, time.Since(start).Round(time.Millisecond), float64(n)/time.Since(start).Seconds())
		return nil
	}

	for _, r := range rows {
		if r.depth == delayedRow {
			if err := sys.Reset(ctx); err != nil {
				return err
			}
			if err := fill(c.delayed, "", 24*time.Hour); err != nil {
				return err
			}
		}
		for round := range c.rounds {
			if r.depth != delayedRow {
				if err := sys.Reset(ctx); err != nil {
					return err
				}
				if err := fill(r.depth, "", 0); err != nil {
					return err
				}
				if err := trickleAndE2E(r, round, trickleQueue); err != nil {
					return fmt.Errorf("%s: %w", r.name(c), err)
				}
				if r.depth > 0 {
					// Step 3 ran past -depth-jobs while the pusher
					// finished: top the backlog up to B again.
					left, err := sys.Queue().Size(ctx, "")
					if err != nil {
						return err
					}
					if left.Reserved > 0 || left.Delayed > 0 {
						return fmt.Errorf("%s: %d reserved and %d delayed jobs after end to end, want none", r.name(c), left.Reserved, left.Delayed)
					}
					if missing := r.depth - int(left.Pending); missing > 0 {
						if err := fill(missing, "", 0); err != nil {
							return err
						}
					}
					if err := burn(r, round, r.depth+max(0, int(left.Pending)-r.depth)); err != nil {
						return fmt.Errorf("%s: burn-down: %w", r.name(c), err)
					}
				}
				continue
			}
			if err := trickleAndE2E(r, round, ""); err != nil {
				return fmt.Errorf("%s: %w", r.name(c), err)
			}
			if err := fill(c.depthJobs, "", 0); err != nil {
				return err
			}
			if err := burn(r, round, c.depthJobs); err != nil {
				return fmt.Errorf("%s: burn-down: %w", r.name(c), err)
			}
		}
	}
	if err := sys.Reset(ctx); err != nil {
		return err
	}

	var ref *depthRow
	for _, r := range rows {
		if r.depth == c.depthRef {
			ref = r
		}
	}
	ratio := func(x, of *row) string {
		if of == nil || len(x.rates) == 0 || len(of.rates) == 0 {
			return "–"
		}
		return fmt.Sprintf("%.2f", median(x.rates)/median(of.rates))
	}
	rateCell := func(x *row) string {
		if len(x.rates) == 0 {
			return "–"
		}
		return fmt.Sprintf("%.0f (%.0f–%.0f)", median(x.rates), slices.Min(x.rates), slices.Max(x.rates))
	}
	fmt.Fprintf(w, "#### Backlog depth\n\n")
	fmt.Fprintf(w, "| backlog | burn-down jobs/s (min–max) | end-to-end jobs/s (min–max) | ratio to %s: burn-down / end-to-end | server CPU µs/job: burn-down / end-to-end | trickle push → start p50 / p99 ms |\n", count(c.depthRef))
	fmt.Fprintf(w, "|---|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		var burnRef, e2eRef *row
		if ref != nil {
			burnRef, e2eRef = ref.burn, ref.e2e
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s / %s | %s / %s | %.1f / %.1f |\n", r.name(c), rateCell(r.burn), rateCell(r.e2e),
			ratio(r.burn, burnRef), ratio(r.e2e, e2eRef), cpuCell(r.burn), cpuCell(r.e2e), median(r.trickle.lat[0]), median(r.trickle.lat[2]))
	}
	fmt.Fprintf(w, "\nBurn-down: the whole backlog (delayed row: %s ready jobs pushed in front of the delayed ones); end to end: %s jobs pushed in PushMany of 1,000 while a worker works the backlog; trickle: %d jobs/s for %s to the queue %q, worked by a worker of its own, beside the backlog (delayed row: on the default queue, beside the delayed jobs). Server CPU counts every database process on the machine.\n",
		count(c.depthJobs), count(c.depthJobs), c.latencyRate, c.latencyFor, trickleQueue)
	if stats != nil {
		fmt.Fprintf(w, "\nPostgreSQL statistics over each burn-down (pg_stat_user_indexes, pg_statio_user_tables; per job):\n\n")
		for _, r := range rows {
			for i, s := range r.stats {
				fmt.Fprintf(w, "- %s, round %d: %s\n", r.name(c), i+1, s)
			}
		}
	}
	fmt.Fprintln(w)
	return nil
}

func cpuCell(r *row) string {
	if len(r.cpu) == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f", median(r.cpu))
}

func (r *depthRow) name(c *config) string {
	if r.depth == delayedRow {
		return count(c.delayed) + " delayed + ready stream"
	}
	return count(r.depth) + " ready"
}

// count writes n as 0, 200k, 2M, 10M.
func count(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1_000 && n%1_000 == 0:
		return fmt.Sprintf("%dk", n/1_000)
	}
	return strconv.Itoa(n)
}

// pgStats reads the bench jobs table's statistics on PostgreSQL: what a
// claim walks (index tuples read per index, heap and index blocks touched)
// and how vacuum kept up.
type pgStats struct{ db *sql.DB }

func openPGStats(dsn string) (*pgStats, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return &pgStats{db: db}, nil
}

func (s *pgStats) Close() error { return s.db.Close() }

type pgSnapshot struct {
	idxRead              map[string]int64 // index name → idx_tup_read
	heapBlks, idxBlks    int64
	dead, vacuums, ticks int64
	// Server-wide: checkpoints (timed and requested), buffers a backend
	// had to write itself to make room (shared_buffers too small for the
	// pages the work dirties), and the WAL position in bytes.
	checkpoints, backendWrites, wal int64
}

// take reads the statistics now (nil s: none, on other databases). The
// snapshot asks for a fresh read of the cumulative statistics; a backend
// flushes its own at most once a second, so a few of the last second's
// counts may land in the next snapshot.
func (s *pgStats) take(ctx context.Context) (*pgSnapshot, error) {
	if s == nil {
		return nil, nil
	}
	snap := &pgSnapshot{idxRead: map[string]int64{}}
	if _, err := s.db.ExecContext(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT indexrelname, idx_tup_read FROM pg_stat_user_indexes
WHERE schemaname = $1 AND relname = 'jobs'`, dbqueueq.Schema)
	if err != nil {
		return nil, fmt.Errorf("pg_stat_user_indexes: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			return nil, err
		}
		snap.idxRead[name] = n
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	err = s.db.QueryRowContext(ctx, `SELECT coalesce(io.heap_blks_read, 0) + coalesce(io.heap_blks_hit, 0),
  coalesce(io.idx_blks_read, 0) + coalesce(io.idx_blks_hit, 0), t.n_dead_tup, t.autovacuum_count + t.vacuum_count
FROM pg_stat_user_tables t JOIN pg_statio_user_tables io USING (relid)
WHERE t.schemaname = $1 AND t.relname = 'jobs'`, dbqueueq.Schema).Scan(&snap.heapBlks, &snap.idxBlks, &snap.dead, &snap.vacuums)
	if err != nil {
		return nil, fmt.Errorf("pg_stat_user_tables: %w", err)
	}
	err = s.db.QueryRowContext(ctx, `SELECT checkpoints_timed + checkpoints_req, buffers_backend,
  pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint FROM pg_stat_bgwriter`).Scan(&snap.checkpoints, &snap.backendWrites, &snap.wal)
	if err != nil {
		return nil, fmt.Errorf("pg_stat_bgwriter: %w", err)
	}
	return snap, nil
}

// since says what happened between before and s, per job of n.
func (s *pgSnapshot) since(before *pgSnapshot, n int) string {
	var parts []string
	names := make([]string, 0, len(s.idxRead))
	for name := range s.idxRead {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if d := s.idxRead[name] - before.idxRead[name]; d > 0 {
			parts = append(parts, fmt.Sprintf("%s %.2f", strings.TrimPrefix(name, "jobs_"), float64(d)/float64(n)))
		}
	}
	return fmt.Sprintf("index tuples read %s; heap blocks %.2f, index blocks %.2f; vacuums %d, dead tuples at the end %d; "+
		"server: checkpoints %d, buffers written by backends %.3f, WAL bytes %.0f",
		strings.Join(parts, ", "), float64(s.heapBlks-before.heapBlks)/float64(n), float64(s.idxBlks-before.idxBlks)/float64(n),
		s.vacuums-before.vacuums, s.dead,
		s.checkpoints-before.checkpoints, float64(s.backendWrites-before.backendWrites)/float64(n), float64(s.wal-before.wal)/float64(n))
}
