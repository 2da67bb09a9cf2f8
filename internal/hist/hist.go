// Package hist is the fixed, log-spaced histogram that workers fill with
// job runtimes and queue waits and that the metrics table stores as one
// count column per bucket (migration 00009). Fixed buckets make the
// counts of any minutes and any processes add up, bucket by bucket, and
// percentiles are recomputed from the sums when read.
package hist

import (
	"math/bits"
	"time"
)

// Buckets is how many buckets a histogram has: the columns rt00..rt23 and
// wt00..wt23 of the metrics table.
const Buckets = 24

// base is the upper bound of bucket 0; bucket i holds durations below
// base << i, the last everything from base << (Buckets-2) up.
const base = 250 * time.Microsecond

// Index is the bucket of d: 0 below 250µs, i for [250µs << (i-1),
// 250µs << i), Buckets-1 from about 17.5 minutes up. Negative durations
// (a clock that stepped back) count as 0.
func Index(d time.Duration) int {
	if d < base {
		return 0
	}
	return min(bits.Len64(uint64(d/base)), Buckets-1)
}

// Lower and Upper are the bounds of bucket i; the last bucket has no
// upper bound and reports its lower one twice.
func Lower(i int) time.Duration {
	if i <= 0 {
		return 0
	}
	return base << (i - 1)
}

// Upper is bucket i's exclusive upper bound (Lower for the last bucket).
func Upper(i int) time.Duration {
	if i >= Buckets-1 {
		return Lower(Buckets - 1)
	}
	return base << i
}

// Quantile estimates the q-quantile (0 < q <= 1) of the durations counted,
// interpolating linearly inside the bucket it falls in, so its error is at
// most that bucket's width (a factor of two). It is 0 when nothing was
// counted, and the last bucket's lower bound when the quantile lies in it.
func Quantile(counts *[Buckets]int64, q float64) time.Duration {
	var total int64
	for _, c := range counts {
		total += c
	}
	if total == 0 {
		return 0
	}
	rank := q * float64(total)
	var seen int64
	for i, c := range counts {
		if c == 0 {
			continue
		}
		if float64(seen+c) >= rank {
			if i == Buckets-1 {
				return Lower(i)
			}
			lo, hi := Lower(i), Upper(i)
			frac := (rank - float64(seen)) / float64(c)
			return lo + time.Duration(frac*float64(hi-lo))
		}
		seen += c
	}
	return Lower(Buckets - 1)
}
