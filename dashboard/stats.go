package dashboard

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/core"
	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// QueueStats is one queue's row of the counts: what the queues page shows
// and api/stats returns.
type QueueStats struct {
	Name     string `json:"name"`
	Pending  int64  `json:"pending"`
	Delayed  int64  `json:"delayed"`
	Reserved int64  `json:"reserved"`
	// Failed counts the queue's rows in failed_jobs, of every connection.
	Failed int64 `json:"failed"`
	// OldestPending is how long, in seconds, the oldest pending job has
	// been due.
	OldestPending float64 `json:"oldest_pending_seconds"`
	Paused        bool    `json:"paused"`
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
	// Pushed, Processed and FailedRate are jobs per minute since the
	// sample before; nil on a history's first sample.
	Pushed     *float64 `json:"pushed_per_min"`
	Processed  *float64 `json:"processed_per_min"`
	FailedRate *float64 `json:"failed_per_min"`
	// Gap is set when no sample was taken for a while before this one
	// (no page was open): the rates are averages over the gap, and a
	// chart should not draw a line across it.
	Gap bool `json:"gap,omitempty"`
}

// sample is one reading of the tables.
type sample struct {
	at     time.Time
	queues []QueueStats
	point  Point
	// Highest job and failed job ids seen so far (high-water marks: the
	// newest rows may be gone).
	jobHW, failedHW int64
}

// sampler takes samples, at most one per interval whoever asks, and keeps
// the last few in a ring.
type sampler struct {
	q        *dbqueue.Queue
	db       sqldb.DB
	jobs     string // qualified table names
	failed   string
	interval time.Duration
	named    map[string]bool // always listed: Options.Queues and the default queue

	// lock is held while sampling: a channel, so that a request whose
	// context ends stops waiting for a slow database.
	lock  chan struct{}
	ring  []sample // oldest first, at most size
	size  int
	stale bool // an action changed the tables: sample again
	// cost is how long the last sample took: on tables so large that a
	// sample is slow, samples are spaced out (see spacing).
	cost time.Duration
	// seen holds the queues listed besides the named ones, with when each
	// last held jobs or failed jobs or was paused. A drained queue stays
	// listed as long as the history lasts, then goes, so queues with
	// generated names do not pile up.
	seen map[string]time.Time
}

func newSampler(q *dbqueue.Queue, size int, interval time.Duration, named []string) *sampler {
	t := q.Tables()
	tables := dialect.Tables{Jobs: t.Jobs, Failed: t.Failed, Schema: t.Schema}
	s := &sampler{
		q: q, db: core.Of(q).DB, jobs: tables.JobsTable(), failed: tables.FailedTable(),
		interval: interval, size: size, named: map[string]bool{q.DefaultQueue(): true},
		lock: make(chan struct{}, 1), seen: map[string]time.Time{},
	}
	for _, n := range named {
		s.named[n] = true
	}
	return s
}

// invalidate makes the next request take a fresh sample, so that a page
// shown after an action shows its effect.
func (s *sampler) invalidate() {
	s.lock <- struct{}{}
	s.stale = true
	<-s.lock
}

// latest returns a sample no older than spacing, taking one if needed,
// and the history. Concurrent callers wait for one sample rather than each
// querying the database.
func (s *sampler) latest(ctx context.Context) (sample, []Point, error) {
	select {
	case s.lock <- struct{}{}:
		defer func() { <-s.lock }()
	case <-ctx.Done():
		return sample{}, nil, fmt.Errorf("dbqueue: dashboard: wait for the sample another request takes: %w", ctx.Err())
	}
	if n := len(s.ring); n > 0 && !s.stale && time.Since(s.ring[n-1].at) < s.spacing() {
		return s.ring[n-1], s.history(), nil
	}
	began := time.Now()
	cur, err := s.take(ctx)
	s.cost = time.Since(began)
	if err != nil {
		return sample{}, nil, err
	}
	s.stale = false
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
	return cur, s.history(), nil
}

// last is the newest sample whatever its age, taking one only when there
// is none: for pages that list queue names and need no fresh counts.
func (s *sampler) last(ctx context.Context) (sample, error) {
	select {
	case s.lock <- struct{}{}:
	case <-ctx.Done():
		return sample{}, ctx.Err()
	}
	if n := len(s.ring); n > 0 {
		defer func() { <-s.lock }()
		return s.ring[n-1], nil
	}
	<-s.lock
	cur, _, err := s.latest(ctx)
	return cur, err
}

// spacing is the least age of a sample before the next is taken: the
// interval (with a tenth of slack for timers that fire early), or ten
// times what the last sample took when that is longer, so that the
// dashboard keeps the database busy at most a tenth of the time however
// large the tables grow and however many pages are open.
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

// rates fills cur's throughput from the sample before it.
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
	depth := (cur.point.Pending + cur.point.Delayed + cur.point.Reserved) -
		(prev.point.Pending + prev.point.Delayed + prev.point.Reserved)
	cur.point.Pushed = perMin(pushed)
	cur.point.Processed = perMin(pushed - depth)
	cur.point.FailedRate = perMin(cur.failedHW - prev.failedHW)
	cur.point.Gap = dt > 3*interval
}

// take reads the tables: every queue's sizes in one grouped query, the
// failed jobs per queue in another, the pause state of the listed queues
// in a query per thousand, and the highest ids. Its cost does not grow
// with a query per queue.
func (s *sampler) take(ctx context.Context) (sample, error) {
	now := time.Now()
	cur := sample{at: now, point: Point{Time: now.UnixMilli()}}
	sizes, err := s.q.SizesByQueue(ctx)
	if err != nil {
		return cur, err
	}
	failedBy, err := s.failedPerQueue(ctx)
	if err != nil {
		return cur, err
	}
	list := map[string]bool{}
	for n := range s.named {
		list[n] = true
	}
	for n := range s.seen {
		list[n] = true
	}
	for n := range sizes {
		list[n] = true
	}
	for n := range failedBy {
		list[n] = true
	}
	names := slices.Sorted(maps.Keys(list))
	paused, err := s.paused(ctx, names)
	if err != nil {
		return cur, err
	}
	keep := now.Add(-s.interval * time.Duration(s.size))
	for _, name := range names {
		size := sizes[name]
		st := QueueStats{
			Name: name, Pending: size.Pending, Delayed: size.Delayed, Reserved: size.Reserved,
			Failed: failedBy[name], OldestPending: size.OldestPending.Seconds(), Paused: paused[name],
		}
		switch {
		case s.named[name]:
		case st.Pending+st.Delayed+st.Reserved+st.Failed > 0 || st.Paused:
			s.seen[name] = now
		case s.seen[name].Before(keep): // includes never seen: listed by Queues a moment ago
			delete(s.seen, name)
			continue
		}
		cur.queues = append(cur.queues, st)
		cur.point.Pending += st.Pending
		cur.point.Delayed += st.Delayed
		cur.point.Reserved += st.Reserved
	}
	for _, n := range failedBy {
		cur.point.Failed += n
	}
	if cur.jobHW, err = s.maxID(ctx, s.jobs); err != nil {
		return cur, err
	}
	if cur.failedHW, err = s.maxID(ctx, s.failed); err != nil {
		return cur, err
	}
	return cur, nil
}

// signaler reads pause signals: package dbqueue's worker side.
type signaler interface {
	Signals(ctx context.Context, queues []string) (restart int64, paused map[string]bool, err error)
}

// paused reads which of names are paused, a thousand names a query.
func (s *sampler) paused(ctx context.Context, names []string) (map[string]bool, error) {
	sig, ok := core.Of(s.q).Ext.(signaler)
	if !ok {
		return nil, fmt.Errorf("dbqueue: dashboard: the queue cannot read pause signals")
	}
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

// failedPerQueue counts failed_jobs by queue. It reads the whole table:
// prune old failures (failed.Store.Prune) to keep it quick.
func (s *sampler) failedPerQueue(ctx context.Context) (map[string]int64, error) {
	rows, err := s.db.Query(ctx, "SELECT queue, COUNT(*) FROM "+s.failed+" GROUP BY queue")
	if err != nil {
		return nil, fmt.Errorf("dbqueue: dashboard: count failed jobs: %w", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			return nil, fmt.Errorf("dbqueue: dashboard: count failed jobs: %w", err)
		}
		out[name] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("dbqueue: dashboard: count failed jobs: %w", err)
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
