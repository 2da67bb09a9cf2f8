package dashboard

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/core"
	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/internal/queueside"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// QueueStats is one queue's row of the counts: what the queues page shows
// and api/stats returns. The counts are capped (see the package
// documentation): a count whose *_capped field is true stopped at the
// cap, and the queue holds at least that many; without it the count is
// exact.
type QueueStats struct {
	Name     string `json:"name"`
	Pending  int64  `json:"pending"`
	Delayed  int64  `json:"delayed"`
	Reserved int64  `json:"reserved"`
	// Failed counts the queue's rows among the newest FailedWindow rows
	// of failed_jobs, of every connection: all of them while the table
	// holds fewer (FailedCapped false).
	Failed int64 `json:"failed"`
	// OldestPending is how long, in seconds, the oldest pending job has
	// been due.
	OldestPending float64 `json:"oldest_pending_seconds"`
	Paused        bool    `json:"paused"`

	PendingCapped  bool `json:"pending_capped"`
	DelayedCapped  bool `json:"delayed_capped"`
	ReservedCapped bool `json:"reserved_capped"`
	FailedCapped   bool `json:"failed_capped"`
}

// Point is one sample of the history: the depth over all queues and, from
// the second sample on, the throughput since the sample before, in jobs
// per minute (see the package documentation for how it is measured).
type Point struct {
	// Time is the sample's time in Unix milliseconds.
	Time     int64 `json:"t"`
	Pending  int64 `json:"pending"`
	Delayed  int64 `json:"delayed"`
	Reserved int64 `json:"reserved"`
	Failed   int64 `json:"failed"`
	// The totals are capped like a queue's counts (at TotalsCap, Failed
	// at FailedWindow): a flag set means at least that many.
	PendingCapped  bool `json:"pending_capped"`
	DelayedCapped  bool `json:"delayed_capped"`
	ReservedCapped bool `json:"reserved_capped"`
	FailedCapped   bool `json:"failed_capped"`
	// Pushed, Processed and FailedRate are jobs per minute since the
	// sample before; nil on a history's first sample. Processed is nil
	// too when either sample's depth is capped: it is pushed less the
	// growth of the depth, which a lower bound cannot give.
	Pushed     *float64 `json:"pushed_per_min"`
	Processed  *float64 `json:"processed_per_min"`
	FailedRate *float64 `json:"failed_per_min"`
	// Gap is set when no sample was taken for a while before this one
	// (no page was open): the rates are averages over the gap, and a
	// chart should not draw a line across it.
	Gap bool `json:"gap,omitempty"`
}

// depthCapped reports whether any depth total is a lower bound.
func (p Point) depthCapped() bool { return p.PendingCapped || p.DelayedCapped || p.ReservedCapped }

// The bounds of a sample: what it reads does not grow with the tables or
// the number of queues.
const (
	// TotalsCap bounds each total of the tiles and the depth chart: the
	// totals read at most this many entries of each index.
	TotalsCap = 100_000
	// FailedWindow is how many of the newest failed jobs the failed
	// counts are read from.
	FailedWindow = 10_000
	// QueueCap is the most a queue's count reads, for a page of few
	// queues; pageBudget is what the counts of one state may read over a
	// page, so on a page of 100 queues each count stops at 1,000.
	QueueCap   = 10_000
	pageBudget = 100_000
	minCap     = 100
)

// queueCap is the cap of each count of a page of n queues.
func queueCap(n int) int64 {
	return int64(min(QueueCap, max(minCap, pageBudget/max(n, 1))))
}

// sample is one reading of the totals: a point of the history.
type sample struct {
	at    time.Time
	point Point
	// failed counts the newest FailedWindow failed jobs by queue.
	failed       map[string]int64
	failedCapped bool
	// Highest job and failed job ids seen so far (high-water marks: the
	// newest rows may be gone).
	jobHW, failedHW int64
}

// pageSample is one reading of a page of queues: those after after.
type pageSample struct {
	at     time.Time
	after  string
	queues []QueueStats
	next   string // the name the next page follows, "" on the last
	cap    int64
}

// snapshot is what a page shows: the newest totals and history, and the
// newest reading of its page of queues.
type snapshot struct {
	totals sample
	hist   []Point
	page   pageSample
	// pending is set when a newer sample was being taken and the page
	// did not wait for it.
	pending bool
}

// flight is a sample being taken.
type flight struct {
	done chan struct{}
	err  error
}

// sampler takes samples, at most one per interval whoever asks, and keeps
// the last few totals in a ring and the last pages of queues read.
type sampler struct {
	q        *dbqueue.Queue
	db       sqldb.DB
	bounded  dialect.Bounded
	jobs     string // qualified table names
	failed   string
	interval time.Duration
	named    map[string]bool // always listed: Options.Queues and the default queue
	// wait is the longest a request waits for a sample when an older one
	// exists: then it shows the older one, and says how old.
	wait time.Duration
	// The bounds (TotalsCap, FailedWindow, and when not 0 a fixed cap of
	// a queue's counts in place of queueCap): fields so tests can lower
	// them.
	totalsCap    int64
	failedWindow int
	pageCap      int64

	mu         sync.Mutex
	ring       []sample // oldest first, at most size
	size       int
	pages      map[string]pageSample // by after; at most maxPages
	flights    map[string]*flight    // by after
	totalsBusy bool
	stale      bool // an action changed the tables: sample again
	gen        int  // bumped by invalidate
	// cost is how long the last sample took: on tables so large that a
	// sample is slow, samples are spaced out (see spacing).
	cost time.Duration
	// seen holds the queues listed besides the named ones, with when each
	// last held jobs or failed jobs or was paused. A drained queue stays
	// listed as long as the history lasts, then goes, so queues with
	// generated names do not pile up.
	seen map[string]time.Time
}

// maxPages bounds the pages of queues kept.
const maxPages = 32

// sampleWait is how long a page waits for a sample when it could show an
// older one.
const sampleWait = 150 * time.Millisecond

func newSampler(q *dbqueue.Queue, size int, interval time.Duration, named []string) *sampler {
	t := q.Tables()
	tables := dialect.Tables{Jobs: t.Jobs, Failed: t.Failed, Schema: t.Schema}
	c := core.Of(q)
	var b dialect.Bounded = c.Dialect
	s := &sampler{
		q: q, db: c.DB, bounded: b, jobs: tables.JobsTable(), failed: tables.FailedTable(),
		interval: interval, size: size, named: map[string]bool{q.DefaultQueue(): true}, wait: sampleWait,
		totalsCap: TotalsCap, failedWindow: FailedWindow,
		pages: map[string]pageSample{}, flights: map[string]*flight{}, seen: map[string]time.Time{},
	}
	for _, n := range named {
		s.named[n] = true
	}
	return s
}

// invalidate makes the next request take a fresh sample, so that a page
// shown after an action shows its effect.
func (s *sampler) invalidate() {
	s.mu.Lock()
	s.stale = true
	s.gen++
	s.mu.Unlock()
}

// fresh reports whether the totals and the page after after are recent
// enough to show without sampling; s.mu is held.
func (s *sampler) fresh(after string) bool {
	n := len(s.ring)
	p, ok := s.pages[after]
	sp := s.spacing()
	return !s.stale && n > 0 && ok && time.Since(s.ring[n-1].at) < sp && time.Since(p.at) < sp
}

// snap is what is there for after; s.mu is held.
func (s *sampler) snap(after string) (snapshot, bool) {
	n := len(s.ring)
	p, ok := s.pages[after]
	if n == 0 || !ok {
		return snapshot{}, false
	}
	return snapshot{totals: s.ring[n-1], hist: s.history(), page: p}, true
}

// latest returns the totals, the history and the page of queues after
// after, taking a sample when the newest is older than spacing.
// Concurrent callers share one sample. A sample runs on its own, not
// under the request's context: when it takes longer than s.wait and an
// older sample exists, the older one is returned with pending set, and
// the next request gets the new one.
func (s *sampler) latest(ctx context.Context, after string) (snapshot, error) {
	s.mu.Lock()
	if s.fresh(after) {
		out, _ := s.snap(after)
		s.mu.Unlock()
		return out, nil
	}
	f := s.flights[after]
	if f == nil {
		f = &flight{done: make(chan struct{})}
		s.flights[after] = f
		go s.run(after, f)
	}
	old, haveOld := s.snap(after)
	s.mu.Unlock()

	var timeout <-chan time.Time
	if haveOld {
		t := time.NewTimer(s.wait)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-f.done:
	case <-timeout:
		old.pending = true
		return old, nil
	case <-ctx.Done():
		return snapshot{}, fmt.Errorf("dbqueue: dashboard: wait for the sample another request takes: %w", ctx.Err())
	}
	if f.err != nil {
		return snapshot{}, f.err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out, _ := s.snap(after)
	return out, nil
}

// sampleTimeout bounds one sample, which runs whoever waits for it.
const sampleTimeout = time.Minute

// run takes a sample for the page after after: the totals when they are
// due and no other flight takes them, then the page.
func (s *sampler) run(after string, f *flight) {
	ctx, cancel := context.WithTimeout(context.Background(), sampleTimeout)
	defer cancel()
	defer close(f.done)
	began := time.Now()
	s.mu.Lock()
	gen := s.gen
	n := len(s.ring)
	doTotals := !s.totalsBusy && (n == 0 || s.stale || time.Since(s.ring[n-1].at) >= s.spacing())
	if doTotals {
		s.totalsBusy = true
	}
	s.mu.Unlock()

	var cur sample
	var err error
	if doTotals {
		cur, err = s.takeTotals(ctx)
	}
	s.mu.Lock()
	if doTotals {
		s.totalsBusy = false
		if err == nil {
			if n := len(s.ring); n > 0 {
				prev := s.ring[n-1]
				cur.jobHW = max(cur.jobHW, prev.jobHW)
				cur.failedHW = max(cur.failedHW, prev.failedHW)
				rates(&cur, prev, s.spacing())
			}
			if len(s.ring) == s.size {
				s.ring = slices.Delete(s.ring, 0, 1)
			}
			s.ring = append(s.ring, cur)
		}
	}
	var failed map[string]int64
	var failedCapped bool
	if n := len(s.ring); n > 0 {
		failed, failedCapped = s.ring[n-1].failed, s.ring[n-1].failedCapped
	}
	s.mu.Unlock()
	var page pageSample
	if err == nil {
		page, err = s.takePage(ctx, after, failed, failedCapped)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.flights, after)
	s.cost = time.Since(began)
	if err != nil {
		f.err = err
		return
	}
	if s.gen == gen {
		s.stale = false
	}
	if _, ok := s.pages[after]; !ok && len(s.pages) >= maxPages {
		oldest := ""
		for k, p := range s.pages {
			if oldest == "" || p.at.Before(s.pages[oldest].at) {
				oldest = k
			}
		}
		delete(s.pages, oldest)
	}
	s.pages[after] = page
}

// spacing is the least age of a sample before the next is taken: the
// interval (with a tenth of slack for timers that fire early), or ten
// times what the last sample took when that is longer, so that the
// dashboard keeps the database busy at most a tenth of the time however
// many pages are open.
func (s *sampler) spacing() time.Duration {
	return max(s.interval*9/10, 10*s.cost)
}

func (s *sampler) history() []Point {
	out := make([]Point, len(s.ring))
	for i, x := range s.ring {
		out[i] = x.point
	}
	return out
}

// rates fills cur's throughput from the sample before it. Processed needs
// the exact growth of the depth: it stays nil when either sample's depth
// is capped.
func rates(cur *sample, prev sample, interval time.Duration) {
	dt := cur.at.Sub(prev.at)
	if dt <= 0 {
		return
	}
	perMin := func(n int64) *float64 {
		v := float64(max(n, 0)) * float64(time.Minute) / float64(dt)
		return &v
	}
	pushed := cur.jobHW - prev.jobHW
	cur.point.Pushed = perMin(pushed)
	if !cur.point.depthCapped() && !prev.point.depthCapped() {
		depth := (cur.point.Pending + cur.point.Delayed + cur.point.Reserved) -
			(prev.point.Pending + prev.point.Delayed + prev.point.Reserved)
		cur.point.Processed = perMin(pushed - depth)
	}
	cur.point.FailedRate = perMin(cur.failedHW - prev.failedHW)
	cur.point.Gap = dt > 3*interval
}

// takeTotals reads the capped totals, the newest failed jobs by queue and
// the highest ids: a fixed handful of statements, each with a bound.
func (s *sampler) takeTotals(ctx context.Context) (sample, error) {
	now := time.Now()
	cur := sample{at: now, point: Point{Time: now.UnixMilli()}}
	if s.bounded == nil {
		return cur, fmt.Errorf("dbqueue: dashboard: the queue's dialect has no bounded counts")
	}
	t, err := s.bounded.CappedTotals(ctx, s.db, s.totalsCap)
	if err != nil {
		return cur, fmt.Errorf("dbqueue: dashboard: count jobs: %w", err)
	}
	cur.point.Pending, cur.point.Delayed, cur.point.Reserved = t.Pending, t.Delayed, t.Reserved
	cur.point.PendingCapped, cur.point.DelayedCapped, cur.point.ReservedCapped = t.PendingCapped, t.DelayedCapped, t.ReservedCapped
	failed, read, err := s.bounded.NewestFailed(ctx, s.db, s.failedWindow)
	if err != nil {
		return cur, fmt.Errorf("dbqueue: dashboard: count failed jobs: %w", err)
	}
	cur.failed, cur.failedCapped = failed, read >= s.failedWindow
	cur.point.Failed, cur.point.FailedCapped = int64(read), cur.failedCapped
	if cur.jobHW, err = s.maxID(ctx, s.jobs); err != nil {
		return cur, err
	}
	if cur.failedHW, err = s.maxID(ctx, s.failed); err != nil {
		return cur, err
	}
	return cur, nil
}

// takePage reads a page of queues after after: the names from a skip scan
// of the jobs table's index, merged with the named and recently seen
// queues and those among the newest failed jobs; each listed queue's
// capped counts and pause state.
func (s *sampler) takePage(ctx context.Context, after string, failed map[string]int64, failedCapped bool) (pageSample, error) {
	now := time.Now()
	page := pageSample{at: now, after: after}
	fromDB, err := s.q.QueuesAfter(ctx, after, queuesPageSize+1)
	if err != nil {
		return page, err
	}
	list := map[string]bool{}
	for _, n := range fromDB {
		list[n] = true
	}
	s.mu.Lock()
	for n := range s.named {
		list[n] = true
	}
	for n := range s.seen {
		list[n] = true
	}
	s.mu.Unlock()
	for n := range failed {
		list[n] = true
	}
	var names []string
	for n := range list {
		// Names the database did not reach sort after its last one.
		if n > after && (len(fromDB) <= queuesPageSize || n <= fromDB[len(fromDB)-1]) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	more := len(names) > queuesPageSize
	names = names[:min(len(names), queuesPageSize)]
	page.cap = queueCap(len(names))
	if s.pageCap > 0 {
		page.cap = s.pageCap
	}
	sizes, err := s.q.SizesCapped(ctx, names, page.cap)
	if err != nil {
		return page, err
	}
	paused, err := s.paused(ctx, names)
	if err != nil {
		return page, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	keep := now.Add(-s.interval * time.Duration(s.size))
	for _, name := range names {
		size := sizes[name]
		st := QueueStats{
			Name: name, Pending: size.Pending, Delayed: size.Delayed, Reserved: size.Reserved,
			Failed: failed[name], OldestPending: size.OldestPending.Seconds(), Paused: paused[name],
			PendingCapped: size.PendingCapped, DelayedCapped: size.DelayedCapped, ReservedCapped: size.ReservedCapped,
			FailedCapped: failedCapped,
		}
		switch {
		case s.named[name]:
		case st.Pending+st.Delayed+st.Reserved+st.Failed > 0 || st.Paused:
			s.seen[name] = now
		case s.seen[name].Before(keep): // includes never seen: listed a moment ago
			delete(s.seen, name)
			continue
		}
		page.queues = append(page.queues, st)
	}
	if more && len(names) > 0 {
		page.next = names[len(names)-1]
	}
	return page, nil
}

// signaler reads pause signals: package dbqueue's worker side.
type signaler interface {
	Signals(ctx context.Context, queues []string) (restart int64, paused map[string]bool, err error)
}

// paused reads which of names are paused, a thousand names a query.
func (s *sampler) paused(ctx context.Context, names []string) (map[string]bool, error) {
	var sig signaler = queueside.Of(s.q)
	out := map[string]bool{}
	for chunk := range slices.Chunk(names, 1000) {
		_, p, err := sig.Signals(ctx, chunk)
		if err != nil {
			return nil, fmt.Errorf("dbqueue: dashboard: read pause signals: %w", err)
		}
		maps.Copy(out, p)
	}
	return out, nil
}

// maxID reads a table's highest id: one step down the primary key.
func (s *sampler) maxID(ctx context.Context, table string) (int64, error) {
	var id sql.NullInt64
	if err := s.db.QueryRow(ctx, "SELECT MAX(id) FROM "+table).Scan(&id); err != nil {
		return 0, fmt.Errorf("dbqueue: dashboard: read the highest id of %s: %w", table, err)
	}
	return id.Int64, nil
}
