package worker

import (
	"testing"
	"time"
)

// The default prefetch starts at Concurrency, follows the finish rate to
// about a second of work within its bounds, and measures once a window;
// a Prefetch the user set never moves.
func TestPrefetcherFollowsTheFinishRate(t *testing.T) {
	start := time.Unix(1_000_000, 0)
	o := Options{Concurrency: 10}.withDefaults()
	p := newPrefetcher(o, true, start)
	check := func(what string, wantSize int64) {
		t.Helper()
		capacity, minBatch := p.capacity()
		if p.size != wantSize || capacity != 10+wantSize || minBatch != max(1, (10+wantSize)/4) {
			t.Fatalf("%s: prefetch %d, capacity %d, minBatch %d; want prefetch %d", what, p.size, capacity, minBatch, wantSize)
		}
	}
	check("at start", 10)
	if p.update(5_000, start.Add(100*time.Millisecond)) {
		t.Fatal("resized within the first window")
	}
	check("within the window", 10)
	if !p.update(5_000, start.Add(250*time.Millisecond)) { // 20,000 jobs/s
		t.Fatal("did not resize after a fast window")
	}
	check("quick jobs", AdaptivePrefetchMax)
	p.update(5_500, start.Add(1250*time.Millisecond)) // 500 jobs/s: a second of work is 500 jobs
	check("500 jobs a second", 500)
	p.update(5_502, start.Add(2250*time.Millisecond)) // 2 jobs/s
	check("slow jobs", 10)
	p.update(5_502, start.Add(time.Hour)) // idle
	check("idle", 10)

	big := newPrefetcher(Options{Concurrency: 5000}.withDefaults(), true, start)
	big.update(1_000_000, start.Add(time.Second))
	if c, _ := big.capacity(); c != 10_000 {
		t.Fatalf("Concurrency 5000: capacity %d, want 10000 (prefetch bounded by the larger of Concurrency and %d)", c, AdaptivePrefetchMax)
	}

	fixed := newPrefetcher(Options{Concurrency: 10, Prefetch: 40}.withDefaults(), false, start)
	if fixed.update(1_000_000, start.Add(time.Second)) {
		t.Fatal("a fixed Prefetch was resized")
	}
	if c, _ := fixed.capacity(); c != 50 {
		t.Fatalf("fixed Prefetch 40: capacity %d, want 50", c)
	}
	none := newPrefetcher(Options{Concurrency: 10, Prefetch: -1}.withDefaults(), false, start)
	if c, _ := none.capacity(); c != 10 {
		t.Fatalf("Prefetch -1: capacity %d, want 10", c)
	}
}
