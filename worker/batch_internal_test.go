package worker

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Items from many goroutines are each written once, in batches no bigger
// than max; after close an item is written by its adder, at once.
func TestBatcherWritesEachItemOnce(t *testing.T) {
	var (
		mu      sync.Mutex
		written []int
		batches int
	)
	b := newBatcher(50, time.Millisecond, func(batch []int) {
		mu.Lock()
		defer mu.Unlock()
		if len(batch) > 50 {
			t.Errorf("batch of %d, max 50", len(batch))
		}
		written = append(written, batch...)
		batches++
	})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				b.add(g*500 + i)
			}
		})
	}
	wg.Wait()
	b.close()
	b.add(-1) // after close: written alone, before add returns
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(written)
	if len(written) != 4001 || written[0] != -1 || written[4000] != 3999 {
		t.Fatalf("wrote %d items (%v…), want the 4,000 added and the one after close", len(written), written[:min(5, len(written))])
	}
	for i := 1; i < len(written); i++ {
		if written[i] == written[i-1] {
			t.Fatalf("item %d written twice", written[i])
		}
	}
	if batches > 4000/10 {
		t.Fatalf("%d batches for 4,000 items: not batched", batches)
	}
}

// A writer that cannot keep up holds adders back once limit items wait:
// the backlog of finished jobs stays bounded (the batch being written, at
// most limit, plus limit waiting).
func TestBatcherHoldsAddersBack(t *testing.T) {
	release := make(chan struct{})
	b := newBatcher(10, time.Millisecond, func([]int) { <-release })
	held := make(chan int, 1)
	b.mu.Lock()
	b.held = func(pending int) {
		select {
		case held <- pending:
		default:
		}
	}
	b.mu.Unlock()
	var added atomic.Int64
	adder := make(chan struct{})
	go func() {
		defer close(adder)
		for i := range 100 {
			b.add(i)
			added.Add(1)
		}
	}()
	if pending := <-held; pending != b.limit {
		t.Fatalf("an adder waited with %d pending, want the limit %d", pending, b.limit)
	}
	if n := added.Load(); n > 2*int64(b.limit) {
		t.Fatalf("%d adds went through while the writer was blocked; want at most %d", n, 2*b.limit)
	}
	close(release)
	<-adder
	b.close()
}
