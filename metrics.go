package dbqueue

import (
	"context"
	"fmt"
	"time"

	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/internal/hist"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// MaxMetricsPoints bounds the steps one Metrics call returns: a week of
// minutes is 10,080 of them, so a week wants a Step of 7 minutes or more.
const MaxMetricsPoints = 1500

// MetricsQuery selects the metrics workers recorded (worker.Options
// MetricsInterval) for Queue.Metrics. The zero value is the last hour of
// every queue and kind, minute by minute.
type MetricsQuery struct {
	// Since and Until bound the minutes read: those that overlap
	// [Since, Until). Zero Until is the database's now; zero Since is
	// Window before the start of Until's own (last) minute, so the read
	// is always the partial minute Until falls in and Window of whole
	// minutes before it (61 points by default), whatever second it is.
	Since, Until time.Time
	// Window is how far back a zero Since reaches (default an hour).
	Window time.Duration
	// Queue and Kind restrict the read to one queue and one job name
	// (the handler name a worker registered, the payload's displayName);
	// empty: all.
	Queue, Kind string
	// Step is the length of each point, rounded up to whole minutes
	// (default one minute). At most MaxMetricsPoints steps fit. A Step
	// of whole hours reads the hourly rows (migration 00011), 60 times
	// fewer than the minutes, and moves the range out to whole hours.
	Step time.Duration
	// NoGroups skips the per queue and kind sums (Metrics.Groups stays
	// empty; Total is summed from the points): for a chart, whose read
	// then does not grow with the number of queues and kinds.
	NoGroups bool
	// TopGroups, when positive, keeps only the TopGroups queue and kind
	// pairs that finished the most jobs (processed, failed and released)
	// in Metrics.Groups, busiest first; Metrics.Other sums the rest and
	// OtherGroups counts them. The database still groups every pair, but
	// returns at most TopGroups rows: a table of the busiest stays cheap
	// with 10,000 queues. Zero: every pair, sorted by queue and kind.
	TopGroups int
}

// MetricsPoint is what workers did in one step, summed over every worker
// process that wrote it.
type MetricsPoint struct {
	// Start is the step's first minute.
	Start time.Time
	// Processed jobs succeeded (or were discarded by their handler);
	// Failed went to failed_jobs; Released were put back to run again
	// (an error with tries left, a release, an unknown kind). Jobs given
	// back unstarted by a stopping worker are not counted.
	Processed, Failed, Released int64
	// RuntimeP50 and RuntimeP95 are the median and 95th percentile of
	// handler runtimes; WaitP50 and WaitP95 those of queue waits, from
	// the time a job became available to the start of its run. Both
	// come from log-spaced buckets (a factor of two apart, from 250µs to
	// about 17.5 minutes), interpolated: read them as estimates within
	// that factor. Waits count in whole seconds of the database clock.
	RuntimeP50, RuntimeP95 time.Duration
	WaitP50, WaitP95       time.Duration

	runtime, wait [hist.Buckets]int64
}

// Finished is every job that ended its run here: processed, failed or
// released.
func (p MetricsPoint) Finished() int64 { return p.Processed + p.Failed + p.Released }

// FailureRate is Failed over Processed plus Failed: the share of jobs that
// ended for good and ended in failed_jobs (0 when none ended).
func (p MetricsPoint) FailureRate() float64 {
	if n := p.Processed + p.Failed; n > 0 {
		return float64(p.Failed) / float64(n)
	}
	return 0
}

func (p *MetricsPoint) add(r *dialect.MetricRow) {
	p.Processed += r.Processed
	p.Failed += r.Failed
	p.Released += r.Released
	for i := range hist.Buckets {
		p.runtime[i] += r.Runtime[i]
		p.wait[i] += r.Wait[i]
	}
}

func (p *MetricsPoint) quantiles() {
	p.RuntimeP50, p.RuntimeP95 = hist.Quantile(&p.runtime, 0.5), hist.Quantile(&p.runtime, 0.95)
	p.WaitP50, p.WaitP95 = hist.Quantile(&p.wait, 0.5), hist.Quantile(&p.wait, 0.95)
}

// MetricsGroup is one queue and kind's total over the range.
type MetricsGroup struct {
	Queue, Kind string
	MetricsPoint
}

// Metrics is a range of recorded metrics.
type Metrics struct {
	// Since and Until are the range read, on whole minutes (whole hours
	// when Step is); Step the length of each point.
	Since, Until time.Time
	Step         time.Duration
	// Points has one entry per step from Since, empty steps included.
	Points []MetricsPoint
	// Total sums the range; Groups sums it per queue and kind, sorted
	// by them, or the busiest first with MetricsQuery.TopGroups.
	Total  MetricsPoint
	Groups []MetricsGroup
	// Other sums the OtherGroups pairs that MetricsQuery.TopGroups left
	// out of Groups (zero without TopGroups).
	Other       MetricsPoint
	OtherGroups int
}

// Metrics reads what workers recorded, summed over every worker process
// in SQL: two grouped reads of the metrics table's primary key range,
// however many processes and minutes. Workers record metrics by default
// (worker.Options.MetricsInterval); the table comes with migration 00009.
// A Step of whole hours reads the hourly table of migration 00011, whose
// rows are the sums of the minutes' (the minutes, where it is missing).
func (q *Queue) Metrics(ctx context.Context, mq MetricsQuery) (Metrics, error) {
	op := q.sql
	if mq.Step < 0 || mq.Window < 0 {
		return Metrics{}, fmt.Errorf("dbqueue: Metrics: negative Step (%v) or Window (%v)", mq.Step, mq.Window)
	}
	until := mq.Until
	if until.IsZero() {
		now, err := op.DBNow(ctx, q.db)
		if err != nil {
			return Metrics{}, sqldb.Wrap("metrics", err)
		}
		until = time.Unix(now+1, 0) // the current minute included
	}
	since := mq.Since
	if since.IsZero() {
		window := mq.Window
		if window == 0 {
			window = time.Hour
		}
		// From the start of the minute that holds Until's last second:
		// until.Add(-window) would overlap 61 minutes at most seconds and
		// 60 at the 59th, and a chart's width would flicker.
		since = time.Unix(floorTo(until.Unix()-1, 60), 0).Add(-window)
	}
	if !since.Before(until) {
		return Metrics{}, fmt.Errorf("dbqueue: Metrics: Since %v is not before Until %v", since, until)
	}
	step := int64(60)
	if mq.Step > 0 {
		step = (int64((mq.Step+time.Second-1)/time.Second) + 59) / 60 * 60
	}
	unit := int64(60)
	if step%3600 == 0 {
		unit = 3600
	}
	from := floorTo(since.Unix(), unit)
	to := floorTo(until.Unix()+unit-1, unit)
	n := (to - from + step - 1) / step
	if n > MaxMetricsPoints {
		return Metrics{}, fmt.Errorf("dbqueue: Metrics: %d steps of %v from %v to %v: at most %d fit; raise Step or narrow the range",
			n, time.Duration(step)*time.Second, since, until, MaxMetricsPoints)
	}
	r := dialect.MetricsRange{From: from, To: to, Step: step, Queue: mq.Queue, Kind: mq.Kind, Hourly: unit == 3600, Top: max(mq.TopGroups, 0)}
	steps, err := op.SumMetrics(ctx, q.db, r)
	if err != nil && r.Hourly && sqldb.MissingTable(err) {
		// Migration 00011 has not run: the minutes hold the same sums.
		r.Hourly = false
		steps, err = op.SumMetrics(ctx, q.db, r)
	}
	if err != nil {
		return Metrics{}, sqldb.Wrap("metrics", err)
	}
	var groups []dialect.MetricSum
	if !mq.NoGroups {
		groups, err = op.SumMetricGroups(ctx, q.db, r)
		if err != nil {
			return Metrics{}, sqldb.Wrap("metrics", err)
		}
	}
	// With TopGroups, the total comes from the points (they cover the
	// range), and what the groups read leave out is the rest.
	fromPoints := mq.NoGroups || r.Top > 0
	m := Metrics{
		Since: time.Unix(from, 0), Until: time.Unix(to, 0), Step: time.Duration(step) * time.Second,
		Points: make([]MetricsPoint, n),
	}
	for i := range m.Points {
		m.Points[i].Start = time.Unix(from+int64(i)*step, 0)
	}
	for i := range steps {
		if k := steps[i].Group; k >= 0 && k < n {
			m.Points[k].add(&steps[i].MetricRow)
			if fromPoints {
				m.Total.add(&steps[i].MetricRow)
			}
		}
	}
	for i := range m.Points {
		m.Points[i].quantiles()
	}
	m.Total.Start = m.Since
	var shown MetricsPoint
	for i := range groups {
		g := MetricsGroup{Queue: groups[i].Queue, Kind: groups[i].Kind}
		g.Start = m.Since
		g.add(&groups[i].MetricRow)
		g.quantiles()
		m.Groups = append(m.Groups, g)
		if fromPoints {
			shown.add(&groups[i].MetricRow)
		} else {
			m.Total.add(&groups[i].MetricRow)
		}
	}
	if r.Top > 0 && len(groups) > 0 {
		m.OtherGroups = int(groups[0].Group) - len(groups)
		m.Other = m.Total.minus(&shown)
		m.Other.Start = m.Since
		m.Other.quantiles()
	}
	m.Total.quantiles()
	return m, nil
}

// minus is p less o's counts, none below zero: the points and the groups
// are two reads, and a worker's write between them can add to the groups
// what the points did not see.
func (p MetricsPoint) minus(o *MetricsPoint) MetricsPoint {
	sub := func(a, b int64) int64 { return max(a-b, 0) }
	p.Processed = sub(p.Processed, o.Processed)
	p.Failed = sub(p.Failed, o.Failed)
	p.Released = sub(p.Released, o.Released)
	for i := range hist.Buckets {
		p.runtime[i] = sub(p.runtime[i], o.runtime[i])
		p.wait[i] = sub(p.wait[i], o.wait[i])
	}
	return p
}

// floorTo is t rounded down to a multiple of unit.
func floorTo(t, unit int64) int64 {
	if t < 0 {
		return (t - unit + 1) / unit * unit
	}
	return t / unit * unit
}
