package worker

import (
	"context"
	"slices"
	"sync"
	"time"
)

// manyQueues is the most active queues a claim reads without asking which
// are ready. A claim takes a queue's rows only after the queues before it
// in the weights' order, so with more queues than this, most of them
// empty, a claim would spend its time on empty queues (10 busy queues
// among 10,000: up to 9,990 probes a claim, or statements where the
// queues are few enough to be claimed one by one). Above it the worker
// claims only from its ready set; a claim of more than dbqueue's own
// manyQueues (the same 16) ready queues is then one statement for all of
// them (dialect.ClaimQueues).
const manyQueues = 16

// readyEvery is the floor of the interval at which the ready set is read
// again while it still holds queues; the interval is readyCostShare
// times the last read's duration when that is longer, so the reads take
// at most a twentieth of the claim loop's time.
const (
	readyEvery     = 500 * time.Millisecond
	readyCostShare = 20
)

// readySet is the queues, of a worker's many active ones, that a read of
// the database found holding a job a claim would take (due and unreserved,
// or reserved longer ago than retry_after: dialect.ReadyQueues). Claims
// read only these, in the order Options.Queues and the weights give, so
// with 10 busy queues among 10,000 a claim costs what it costs with 10
// queues listed, and an idle poll is one read instead of 10,000 claims.
//
// The set lives in the worker rather than in Queue.Reserve because
// keeping it costs state that a one-off Reserve has no place for: which
// queues were found ready, when, and the wake-ups that say a job came.
//
// A queue whose claim came back short leaves the set. The set is read
// again
//   - when it runs dry: a claim that finds the set empty, or that takes
//     nothing from it, reads it and claims again, so an empty claim still
//     means no listed queue held a claimable job;
//   - after a push wakes the worker (PostgreSQL's NOTIFY, or a push by
//     any Queue of this process on the same database), but no sooner
//     than one read's duration after the last read;
//   - when the paused queues change;
//   - and every max(readyEvery, readyCostShare × the last read's
//     duration) in any case.
//
// So a job pushed by another process (MySQL and SQLite workers hear no
// notification) to a queue outside the set, or a reservation that
// expires there, is claimed within that interval while the worker is
// busy with other queues, and at the next poll while it is idle.
type readySet struct {
	// readMu is held through a read, so claims in flight together read
	// once.
	readMu sync.Mutex

	mu     sync.Mutex
	active *[]string // the active queues the set was read for
	queues []string  // ready, in the active queues' order
	// dropped are the queues of queues that claims found short since it
	// was last compacted: a claim over 10,000 queues of 10 jobs drops a
	// hundred, and taking each out of the list at once cost a scan of it.
	dropped map[string]bool
	gen     uint64    // counts reads: a claim drops a queue only from the set it read
	readAt  time.Time // when the last read began
	cost    time.Duration
	woken   bool // a push woke the worker since the last read
	read    bool // the set has been read for active
}

// wake notes that a push woke the worker: the next claim reads the set.
func (s *readySet) wake() {
	s.mu.Lock()
	s.woken = true
	s.mu.Unlock()
}

// due reports whether the set must be read before a claim from active.
func (s *readySet) due(active *[]string, now time.Time) bool {
	s.compact()
	switch {
	case !s.read || s.active != active || len(s.queues) == 0:
		return true
	case s.woken && now.Sub(s.readAt) >= s.cost:
		return true
	}
	return now.Sub(s.readAt) >= max(readyEvery, readyCostShare*s.cost)
}

// take returns the queues of the set to claim from (a copy, in active's
// order) and the set's generation, reading it first with read when it is
// due or force is set; fresh reports whether it read.
func (s *readySet) take(ctx context.Context, active *[]string, force bool, read func(ctx context.Context, queues []string) ([]string, error)) (queues []string, gen uint64, fresh bool, err error) {
	s.mu.Lock()
	if !force && !s.due(active, time.Now()) {
		defer s.mu.Unlock()
		return slices.Clone(s.queues), s.gen, false, nil
	}
	gen = s.gen
	s.mu.Unlock()

	s.readMu.Lock()
	defer s.readMu.Unlock()
	s.mu.Lock()
	if s.gen != gen && s.active == active {
		// Another claim read the set while this one waited for readMu.
		defer s.mu.Unlock()
		s.compact()
		return slices.Clone(s.queues), s.gen, true, nil
	}
	s.mu.Unlock()

	began := time.Now()
	s.mu.Lock()
	s.woken = false // a wake-up from here on is after the read began
	s.mu.Unlock()
	found, err := read(ctx, *active)
	if err != nil {
		s.mu.Lock()
		s.woken = true // read again next time
		s.mu.Unlock()
		return nil, 0, false, err
	}
	ready := make(map[string]bool, len(found))
	for _, q := range found {
		ready[q] = true
	}
	list := make([]string, 0, len(found))
	for _, q := range *active {
		if ready[q] {
			list = append(list, q)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.active, s.queues, s.read = active, list, true
	clear(s.dropped)
	s.gen++
	s.readAt, s.cost = began, time.Since(began)
	return slices.Clone(list), s.gen, true, nil
}

// drop takes queue out of the set of generation gen: a claim found it
// short. A set read since then knows better and keeps it.
func (s *readySet) drop(gen uint64, queue string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen != gen {
		return
	}
	if s.dropped == nil {
		s.dropped = map[string]bool{}
	}
	s.dropped[queue] = true
}

// compact takes the dropped queues out of the set; s.mu is held.
func (s *readySet) compact() {
	if len(s.dropped) == 0 {
		return
	}
	s.queues = slices.DeleteFunc(s.queues, func(q string) bool { return s.dropped[q] })
	clear(s.dropped)
}
