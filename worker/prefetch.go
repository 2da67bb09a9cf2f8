package worker

import "time"

// prefetcher sizes the worker's prefetch. A fixed Options.Prefetch stays
// fixed. The default adapts: it keeps about prefetchHorizon of work in
// memory, measured as the rate jobs finished at over the last
// prefetchWindow, between Concurrency and the bound in Options.Prefetch.
// Quick jobs (thousands a second) are then claimed up to 1,000 at a time,
// which a database does for little more than the cost of a claim of 20;
// slow jobs (a few a second) keep the prefetch at Concurrency, so nothing
// waits in memory while its reservation ages. It starts at Concurrency and
// follows the rate up at once and down within a window.
type prefetcher struct {
	concurrency, size, bound int64
	adaptive                 bool
	since                    time.Time
	processed                int64
}

// prefetchHorizon is how much work, in time, the adaptive prefetch keeps
// waiting; prefetchWindow is how often it measures.
const (
	prefetchHorizon = time.Second
	prefetchWindow  = 250 * time.Millisecond
)

func newPrefetcher(o Options, adaptive bool, now time.Time) *prefetcher {
	p := &prefetcher{concurrency: int64(o.Concurrency), bound: int64(o.Prefetch), adaptive: adaptive, since: now}
	p.size = p.bound
	if adaptive {
		p.size = min(p.concurrency, p.bound)
	}
	return p
}

// capacity is how many jobs the worker may hold (running and waiting),
// and the smallest batch worth a second claim in flight.
func (p *prefetcher) capacity() (capacity, minBatch int64) {
	capacity = p.concurrency + p.size
	return capacity, max(1, capacity/4)
}

// update measures the finish rate once a window has passed since the last
// measurement and resizes an adaptive prefetch; it reports whether the
// size changed.
func (p *prefetcher) update(processed int64, now time.Time) bool {
	elapsed := now.Sub(p.since)
	if !p.adaptive || elapsed < prefetchWindow {
		return false
	}
	rate := float64(processed-p.processed) / elapsed.Seconds()
	p.since, p.processed = now, processed
	size := min(max(int64(rate*prefetchHorizon.Seconds()), min(p.concurrency, p.bound)), p.bound)
	if size == p.size {
		return false
	}
	p.size = size
	return true
}
