package worker

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/core"
	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// reporter writes a Run's metrics, history and heartbeat every
// Options.MetricsInterval, and once more as Run returns.
type reporter struct {
	r   *run
	op  dialect.Operator
	db  sqldb.DB
	rec *recorder
	// pending holds counts drained but not yet written: a write that
	// fails leaves them here, and the next adds to them.
	pending map[seriesKey]*dialect.MetricRow
	self    dialect.WorkerRow
	ttl     int64 // seconds a heartbeat row lives unrefreshed
	// nextPrune is when old minutes and history are deleted next.
	nextPrune time.Time
	failing   bool // the last write failed (logged once until it works)
}

// pruneEvery is how often a worker deletes expired metrics and history;
// pruneBatch bounds one delete.
const (
	pruneEvery = 5 * time.Minute
	pruneBatch = 5000
)

// reportTimeout bounds one round of writes; lastReportTimeout the round
// Run waits for as it returns, so a database that is down holds a
// stopping worker only a moment (its counts are then lost).
const (
	reportTimeout     = 30 * time.Second
	lastReportTimeout = 5 * time.Second
)

// heartbeatLives is how many intervals a heartbeat row outlives its last
// write before another worker deletes it as a dead worker's.
const heartbeatLives = 3

func newReporter(r *run) (*reporter, error) {
	c := core.Of(r.w.q)
	var op dialect.Operator = c.Dialect
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	host, _ := os.Hostname()
	queues, _ := json.Marshal(r.w.opts.Queues)
	interval := r.w.opts.MetricsInterval
	ttl := int64((heartbeatLives*interval + time.Second - 1) / time.Second)
	return &reporter{
		r: r, op: op, db: c.DB, rec: r.stats, pending: map[seriesKey]*dialect.MetricRow{},
		ttl: max(ttl, 3),
		self: dialect.WorkerRow{
			ID: hex.EncodeToString(id), Name: columnText(r.w.opts.Name), Host: columnText(host), PID: int64(os.Getpid()),
			Version: columnText(moduleVersion()), Queues: string(queues), Concurrency: int64(r.w.opts.Concurrency),
		},
	}, nil
}

// moduleVersion is dbqueue's version in this binary's build information.
var moduleVersion = sync.OnceValue(func() string {
	const path = "github.com/dbqueue/dbqueue"
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	if bi.Main.Path == path {
		return bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == path {
			if d.Replace != nil && d.Replace.Version != "" {
				return d.Replace.Version
			}
			return d.Version
		}
	}
	return "(unknown)"
})

// loop reports every interval until stop is closed. A round under way
// when it is closed finishes the statement it is running (within
// reportTimeout): cutting it short would only fail a write the last round
// makes again. Its retries stop (ctx's sqldb.RetryHooks).
func (rp *reporter) loop(ctx context.Context, stop <-chan struct{}) {
	rp.round(ctx, false)
	t := time.NewTicker(rp.r.w.opts.MetricsInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		rp.round(ctx, false)
	}
}

// round writes what was recorded and the heartbeat, and prunes when due;
// last: the worker is stopping, so its heartbeat row goes instead.
func (rp *reporter) round(ctx context.Context, last bool) {
	if beforeReport != nil {
		beforeReport(last)
	}
	timeout := reportTimeout
	if last {
		// Bounded as the stopping worker's other writes are: no retries
		// past the grace period, cut lastWrite after it.
		timeout = lastReportTimeout
		wctx, cancel := rp.r.writeCtx(ctx)
		defer cancel()
		ctx = wctx
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	errs := []error{rp.flush(ctx), rp.flushHistory(ctx)}
	if last {
		errs = append(errs, rp.op.RemoveWorker(ctx, rp.db, rp.self.ID))
	} else {
		errs = append(errs, rp.beat(ctx))
		if now := time.Now(); !now.Before(rp.nextPrune) {
			more, err := rp.prune(ctx)
			errs = append(errs, err)
			rp.nextPrune = now.Add(pruneEvery)
			if more || err != nil {
				// The next round goes on, or tries again: a failed prune
				// skipped until its next turn would let a round with
				// nothing else to write report the writes recovered.
				rp.nextPrune = now
			}
		}
	}
	rp.report(errs, last)
}

// Test hooks: beforeReport is called as each round starts,
// reportStopped once the loop has been told to stop.
var (
	beforeReport  func(last bool)
	reportStopped func()
)

// report logs the first failure of a run of failures, the recovery, and
// a failure of the last round, whose counts are lost.
func (rp *reporter) report(errs []error, last bool) {
	var first error
	for _, err := range errs {
		if err != nil {
			first = err
			break
		}
	}
	log := rp.r.w.log
	switch {
	case first != nil && last:
		log.Warn("cannot write the last metrics and remove the heartbeat row as the worker stops: this worker's last counts are lost, and its row goes when it expires", "error", first)
	case first != nil && !rp.failing:
		rp.failing = true
		if sqldb.MissingTable(first) {
			log.Warn("cannot write metrics and heartbeat: a table of migration 00009 or 00011 (<jobs>_metrics, _metrics_hourly, _workers) is missing; run migrate up, or set Options.MetricsInterval negative; counts are kept and written once it ran", "error", first)
		} else {
			log.Warn("cannot write metrics and heartbeat; counts are kept and written later", "error", first)
		}
	case first == nil && rp.failing:
		rp.failing = false
		log.Info("metrics and heartbeat written again")
	}
}

// flush writes the counts drained since the last write that succeeded:
// to the minute's rows and the hour's, in one transaction (AddMetrics),
// so a crash or a missing hourly table leaves both or neither.
func (rp *reporter) flush(ctx context.Context) error {
	rp.rec.drain(rp.pending)
	if len(rp.pending) == 0 {
		return nil
	}
	rows := make([]dialect.MetricRow, 0, len(rp.pending))
	for _, m := range rp.pending {
		rows = append(rows, *m)
	}
	// One order for every process, so two writing the same minute take
	// its rows' locks in the same order and never deadlock.
	slices.SortFunc(rows, func(a, b dialect.MetricRow) int {
		return cmp.Or(cmp.Compare(a.Queue, b.Queue), cmp.Compare(a.Kind, b.Kind))
	})
	err := sqldb.Retry(ctx, func() error { return rp.op.AddMetrics(ctx, rp.db, rows) })
	if err != nil {
		return err
	}
	clear(rp.pending)
	return nil
}

// flushHistory writes the finished jobs recorded since the last write.
func (rp *reporter) flushHistory(ctx context.Context) error {
	if !rp.rec.history {
		return nil
	}
	f, dropped := rp.rec.takeFinished()
	if dropped > 0 {
		rp.r.w.log.Warn("job history entries dropped: the database was unreachable for too long", "dropped", dropped)
	}
	if len(f) == 0 {
		return nil
	}
	now, err := rp.op.DBNow(ctx, rp.db)
	if err == nil {
		local := time.Now()
		rows := make([]dialect.HistoryRow, len(f))
		for i, j := range f {
			rows[i] = j.row
			rows[i].FinishedAt = now - int64(local.Sub(j.at)/time.Second)
		}
		err = sqldb.Retry(ctx, func() error {
			return sqldb.InTx(ctx, rp.db, sqldb.TxOptions{}, func(tx sqldb.Tx) error { return rp.op.AddHistory(ctx, tx, rows) })
		})
	}
	if err != nil {
		rp.rec.putBack(f)
	}
	return err
}

// beat writes the heartbeat row and deletes dead workers' rows.
func (rp *reporter) beat(ctx context.Context) error {
	w := rp.self
	w.Running = max(rp.r.inFlight.Load()-int64(len(rp.r.ready)), 0)
	w.Processed = rp.r.processed.Load()
	if err := rp.op.Beat(ctx, rp.db, w, rp.ttl); err != nil {
		return err
	}
	_, err := rp.op.PruneWorkers(ctx, rp.db)
	return err
}

// prune deletes a batch of expired minutes (and history), and reports
// whether more remain.
func (rp *reporter) prune(ctx context.Context) (more bool, err error) {
	o := rp.r.w.opts
	n, err := rp.op.PruneMetrics(ctx, rp.db, int64(o.MetricsRetention/time.Second), pruneBatch)
	if err != nil {
		return false, err
	}
	more = n == pruneBatch
	if o.HistoryRetention > 0 {
		n, err := rp.op.PruneHistory(ctx, rp.db, int64(o.HistoryRetention/time.Second), pruneBatch)
		if err != nil {
			return more, err
		}
		more = more || n == pruneBatch
	}
	return more, nil
}

// startReporting starts the reporter when Options.MetricsInterval is
// positive; the function it returns stops it and writes the last round
// (what the stopping worker finished, and its heartbeat row's removal).
func (r *run) startReporting(ctx context.Context) (stop func(), err error) {
	if r.w.opts.MetricsInterval <= 0 {
		return func() {}, nil
	}
	r.stats = newRecorder(r.w.opts.HistoryRetention > 0)
	rp, err := newReporter(r)
	if err != nil {
		return nil, err
	}
	// The rounds outlive ctx: a worker stopping because ctx ended still
	// writes what it did during its grace period, and then its last round.
	bg := context.WithoutCancel(ctx)
	stopLoop, done := make(chan struct{}), make(chan struct{})
	// A round retrying a database that is down stops retrying as the
	// worker stops, instead of holding Run for up to 30s.
	loopCtx := sqldb.WithRetryHooks(bg, &sqldb.RetryHooks{Stop: stopLoop})
	go func() {
		defer close(done)
		rp.loop(loopCtx, stopLoop)
	}()
	return func() {
		close(stopLoop)
		if reportStopped != nil {
			reportStopped()
		}
		<-done
		rp.round(bg, true)
	}, nil
}

// count records a job that ended its run here (see recorder.finish).
func (r *run) count(job *dbqueue.Job, outcome int, took time.Duration, ran bool) {
	if r.stats != nil {
		r.stats.finish(job, outcome, took, ran)
	}
}
