package worker

import (
	"sync"
	"time"
)

// batcher collects items from many goroutines and hands them to one
// writer in batches: one statement for many jobs, none held back longer
// than delay. Completions and releases are written this way.
//
// Adding an item takes a mutex and wakes the writer only when the batch
// starts or fills; a channel send per item woke the writer goroutine for
// nearly every job. The writer waits delay after the first item of a batch
// (less if the batch fills) and takes everything pending; adders wait
// while limit items are pending, so a slow database holds the runners back
// instead of letting the backlog grow.
type batcher[T any] struct {
	max   int
	delay time.Duration
	flush func([]T)
	limit int // pending items at which add waits

	mu      sync.Mutex
	room    sync.Cond // signalled when the writer takes pending items
	pending []T
	closed  bool
	kick    chan struct{} // cap 1: a batch started or filled
	done    chan struct{}
	// held, when set (by tests), is called when an adder starts to wait
	// for room, with the number of items pending.
	held func(pending int)
}

func newBatcher[T any](max int, delay time.Duration, flush func([]T)) *batcher[T] {
	b := &batcher[T]{max: max, delay: delay, flush: flush, limit: 2 * max,
		kick: make(chan struct{}, 1), done: make(chan struct{})}
	b.room.L = &b.mu
	go b.loop()
	return b
}

// add queues item; after close it is written by the caller, alone.
func (b *batcher[T]) add(item T) {
	b.mu.Lock()
	for len(b.pending) >= b.limit && !b.closed {
		if b.held != nil {
			b.held(len(b.pending))
		}
		b.room.Wait()
	}
	if b.closed {
		b.mu.Unlock()
		b.flush([]T{item})
		return
	}
	b.pending = append(b.pending, item)
	n := len(b.pending)
	b.mu.Unlock()
	if n == 1 || n == b.max {
		select {
		case b.kick <- struct{}{}:
		default:
		}
	}
}

// close writes what is pending and waits for it.
func (b *batcher[T]) close() {
	b.mu.Lock()
	b.closed = true
	b.room.Broadcast()
	b.mu.Unlock()
	b.wake()
	<-b.done
}

func (b *batcher[T]) wake() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// take returns what is pending, and whether the batcher is closed.
func (b *batcher[T]) take(spare []T) ([]T, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	batch := b.pending
	b.pending = spare[:0]
	b.room.Broadcast()
	return batch, b.closed
}

func (b *batcher[T]) size() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pending)
}

func (b *batcher[T]) loop() {
	defer close(b.done)
	timer := time.NewTimer(b.delay)
	timer.Stop()
	var spare []T
	for {
		<-b.kick
		if n := b.size(); n > 0 && n < b.max {
			// A batch has started: give it delay to fill, or until it is
			// full or the batcher closes.
			timer.Reset(b.delay)
			select {
			case <-timer.C:
			case <-b.kick:
				timer.Stop()
			}
		}
		batch, closed := b.take(spare)
		for start := 0; start < len(batch); start += b.max {
			b.flush(batch[start:min(start+b.max, len(batch))])
		}
		clear(batch) // no references to finished jobs kept
		spare = batch
		if closed {
			// take saw closed under the lock that add checks it under:
			// nothing was added after this batch, and add writes alone
			// from now on.
			return
		}
	}
}
