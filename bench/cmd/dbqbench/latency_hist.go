package main

import (
	"math"
	"sync/atomic"
	"time"
)

// latHist counts latencies in buckets growing by 2% from 10µs to about
// 20 minutes: constant memory however many jobs a soak runs (a slice of
// every latency would grow the very heap the soak watches), percentiles
// within 2%, and lock-free recording from every runner goroutine.
type latHist struct {
	counts [latBuckets]atomic.Uint64
}

const (
	latMin     = 10 * time.Microsecond
	latGrowth  = 1.02
	latBuckets = 1_000 // 10µs × 1.02^1000 ≈ 4×10^8 µs
)

var logGrowth = math.Log(latGrowth)

func latBucket(d time.Duration) int {
	if d <= latMin {
		return 0
	}
	return min(latBuckets-1, int(math.Log(float64(d)/float64(latMin))/logGrowth)+1)
}

// latUpper is the largest latency bucket i holds.
func latUpper(i int) time.Duration {
	return time.Duration(float64(latMin) * math.Pow(latGrowth, float64(i)))
}

func (h *latHist) record(d time.Duration) { h.counts[latBucket(d)].Add(1) }

// take returns the counts recorded since the last take and starts anew.
func (h *latHist) take() []uint64 {
	c := make([]uint64, latBuckets)
	for i := range h.counts {
		c[i] = h.counts[i].Swap(0)
	}
	return c
}

// quantile is the nearest-rank quantile q of counts (the bucket's upper
// bound), 0 for none.
func quantile(counts []uint64, q float64) time.Duration {
	var n uint64
	for _, c := range counts {
		n += c
	}
	if n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(n)))
	var seen uint64
	for i, c := range counts {
		seen += c
		if seen >= max(rank, 1) {
			return latUpper(i)
		}
	}
	return latUpper(latBuckets - 1)
}
