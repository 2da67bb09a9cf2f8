package worker

import (
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/internal/hist"
)

// recorder counts what a Run did, per queue and job name, in memory until
// the reporter writes it (Options.MetricsInterval). Recording a job is
// two map reads of an immutable map and three atomic adds: no lock and
// no allocation, whatever the goroutine, once a (queue, kind) has been
// seen. The counts are spread over shards by job id, so runners finishing
// jobs of one kind at once mostly add to different cache lines.
type recorder struct {
	shards [recorderShards]shard

	// history, when on (Options.HistoryRetention), holds finished jobs
	// until the reporter writes them.
	history   bool
	historyMu sync.Mutex
	finished  []finishedJob
	dropped   int64 // finished jobs not kept: the buffer was full
}

// recorderShards is a power of two.
const recorderShards = 8

// shard is one share of the counts.
//
// Its series are a sync.Map, read without a lock, that only grows: a
// copy-on-write map copied every series on each new one, which a worker
// serving 10,000 queues paid for thousands of times (a quarter of its
// client CPU in a burn-down over 10,000 queues of 10 jobs).
type shard struct {
	series sync.Map   // seriesKey → *series
	mu     sync.Mutex // held to add a series
	count  int        // series added, under mu
}

type seriesKey struct{ queue, kind string }

// series is one (queue, kind)'s counts since the last drain.
type series struct {
	processed, failed, released atomic.Int64
	runtime, wait               [hist.Buckets]atomic.Int64
}

// finishedJob is a history entry waiting to be written; at is this
// process's clock, turned into the database's when written.
type finishedJob struct {
	row dialect.HistoryRow
	at  time.Time
}

// maxSeries bounds the (queue, kind) pairs one shard keeps: job names
// come from payloads any producer writes, so past this many a new name
// counts under otherKind (and past twice as many, a new queue under
// otherKind too).
const maxSeries = 1000

// otherKind is the kind, and queue, that names past maxSeries count
// under.
const otherKind = "(other)"

// maxFinished bounds the history entries waiting to be written while the
// database is unreachable.
const maxFinished = 100_000

// maxName is the width of the tables' name columns: varchar(255).
const maxName = 255

func newRecorder(history bool) *recorder {
	rc := &recorder{history: history}
	return rc
}

// get is the series of job's queue and kind in job's shard.
func (rc *recorder) get(job *dbqueue.Job) *series {
	sh := &rc.shards[uint64(job.ID)%recorderShards]
	k := seriesKey{job.Queue, job.Name()}
	if s, ok := sh.series.Load(k); ok {
		return s.(*series)
	}
	return sh.add(k)
}

func (sh *shard) add(k seriesKey) *series {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if s, ok := sh.series.Load(k); ok {
		return s.(*series)
	}
	if sh.count >= maxSeries {
		k.kind = otherKind
		if sh.count >= 2*maxSeries {
			k.queue = otherKind
		}
		if s, ok := sh.series.Load(k); ok {
			return s.(*series)
		}
	}
	s := &series{}
	sh.series.Store(k, s)
	sh.count++
	return s
}

// started counts a run's queue wait: from the job's available_at to now,
// both by the database clock.
func (rc *recorder) started(job *dbqueue.Job, dbNow time.Time) {
	s := rc.get(job)
	s.wait[hist.Index(dbNow.Sub(job.AvailableAt))].Add(1)
}

// The outcomes a recorder counts.
const (
	countProcessed = iota
	countFailed
	countReleased
)

// finish counts a job that ended its run here; ran says whether a handler
// ran (its runtime took is counted then).
func (rc *recorder) finish(job *dbqueue.Job, outcome int, took time.Duration, ran bool) {
	s := rc.get(job)
	switch outcome {
	case countProcessed:
		s.processed.Add(1)
	case countFailed:
		s.failed.Add(1)
	case countReleased:
		s.released.Add(1)
	}
	if ran {
		s.runtime[hist.Index(took)].Add(1)
	}
	if rc.history && outcome != countReleased {
		rc.keep(job, outcome, took)
	}
}

func (rc *recorder) keep(job *dbqueue.Job, outcome int, took time.Duration) {
	what := "done"
	if outcome == countFailed {
		what = "failed"
	}
	f := finishedJob{at: time.Now(), row: dialect.HistoryRow{
		ID: job.ID, UUID: columnText(job.Payload.UUID), Queue: columnText(job.Queue), Kind: columnText(job.Name()),
		Attempts: int64(job.Attempts), RuntimeUS: took.Microseconds(), Outcome: what,
	}}
	rc.historyMu.Lock()
	if len(rc.finished) < maxFinished {
		rc.finished = append(rc.finished, f)
	} else {
		rc.dropped++
	}
	rc.historyMu.Unlock()
}

// drain moves the counts recorded since the last drain into into, keyed
// by the names as the table stores them.
func (rc *recorder) drain(into map[seriesKey]*dialect.MetricRow) {
	for i := range rc.shards {
		rc.shards[i].drain(into)
	}
}

func (sh *shard) drain(into map[seriesKey]*dialect.MetricRow) {
	for key, val := range sh.series.Range {
		k, s := key.(seriesKey), val.(*series)
		var row dialect.MetricRow
		any := false
		take := func(dst *int64, src *atomic.Int64) {
			if v := src.Swap(0); v != 0 {
				*dst += v
				any = true
			}
		}
		take(&row.Processed, &s.processed)
		take(&row.Failed, &s.failed)
		take(&row.Released, &s.released)
		for i := range hist.Buckets {
			take(&row.Runtime[i], &s.runtime[i])
			take(&row.Wait[i], &s.wait[i])
		}
		if !any {
			continue
		}
		key := seriesKey{columnText(k.queue), columnText(k.kind)}
		dst := into[key]
		if dst == nil {
			dst = &dialect.MetricRow{Queue: key.queue, Kind: key.kind}
			into[key] = dst
		}
		dst.Processed += row.Processed
		dst.Failed += row.Failed
		dst.Released += row.Released
		for i := range hist.Buckets {
			dst.Runtime[i] += row.Runtime[i]
			dst.Wait[i] += row.Wait[i]
		}
	}
}

// takeFinished returns the history entries waiting, and how many were
// dropped since the last call.
func (rc *recorder) takeFinished() ([]finishedJob, int64) {
	rc.historyMu.Lock()
	defer rc.historyMu.Unlock()
	f, d := rc.finished, rc.dropped
	rc.finished, rc.dropped = nil, 0
	return f, d
}

// putBack returns entries a failed write did not store, ahead of those
// finished since, within maxFinished.
func (rc *recorder) putBack(f []finishedJob) {
	rc.historyMu.Lock()
	defer rc.historyMu.Unlock()
	if room := maxFinished - len(rc.finished); len(f) > room {
		rc.dropped += int64(len(f) - room)
		f = f[len(f)-room:]
	}
	rc.finished = append(f, rc.finished...)
}

// columnText is s as a name column stores it on every database: through
// dialect.StorableText, the rule for every text dbqueue writes (bytes that
// are not UTF-8 and NUL escaped: PostgreSQL refuses both, and a row it
// refuses would fail every write after it), cut to maxName characters on
// a character boundary.
func columnText(s string) string {
	s = dialect.StorableText(s, 4*len(s)) // escaped only: an escape is 4 bytes; the width is in characters, cut below
	if utf8.RuneCountInString(s) <= maxName {
		return s
	}
	n := 0
	for i := range s {
		if n == maxName {
			return s[:i]
		}
		n++
	}
	return s
}
