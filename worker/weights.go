package worker

import (
	"slices"
	"sync"
)

// weights orders the queues of each claim when Options.QueueWeights is
// set, by smooth weighted round-robin (nginx's upstream balancing): of
// every W claims, where W is the sum of the active queues' weights, each
// queue comes first in exactly its weight of them, spread out rather than
// in runs, with no randomness, so the share is exact over any W claims
// and a test can check it without tolerance for luck. The other queues
// follow the first in the order they would come next, so a claim whose
// first queue is empty still fills from the rest.
type weights struct {
	mu      sync.Mutex
	weight  map[string]int
	current map[string]int
}

func newWeights(o Options) *weights {
	if len(o.QueueWeights) == 0 {
		return nil
	}
	w := &weights{weight: map[string]int{}, current: map[string]int{}}
	for _, q := range o.Queues {
		w.weight[q] = 1
		if n, ok := o.QueueWeights[q]; ok {
			w.weight[q] = n
		}
	}
	return w
}

// order returns active (a subset of Options.Queues, in their order) in the
// order the next claim reads them. Paused queues are left out of active,
// and so out of the round: the others share the claims in proportion to
// their own weights.
func (w *weights) order(active []string) []string {
	if w == nil || len(active) < 2 {
		return active
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	total := 0
	for _, q := range active {
		w.current[q] += w.weight[q]
		total += w.weight[q]
	}
	out := slices.Clone(active)
	// Highest current weight first; ties keep Options.Queues order.
	slices.SortStableFunc(out, func(a, b string) int { return w.current[b] - w.current[a] })
	w.current[out[0]] -= total
	return out
}

// validateWeights checks QueueWeights against Queues.
func validateWeights(o Options, bad func(string, ...any)) {
	listed := make(map[string]bool, len(o.Queues))
	for _, q := range o.Queues {
		listed[q] = true
	}
	for q, n := range o.QueueWeights {
		if n < 1 || n > maxWeight {
			bad("QueueWeights[%q] = %d: weights must be from 1 to %d", q, n, maxWeight)
		}
		if len(o.Queues) > 0 && !listed[q] {
			bad("QueueWeights names queue %q, which is not in Queues %v: add it to Queues, or leave Queues empty to serve the weighted queues", q, o.Queues)
		}
	}
}

// maxWeight bounds a weight so the round's sums cannot overflow.
const maxWeight = 1 << 20

// weightedQueues is the Queues a worker with QueueWeights and no Queues
// serves: the weighted ones, heaviest first (then by name), so that with
// ties or one empty the order is still fixed.
func weightedQueues(ws map[string]int) []string {
	qs := make([]string, 0, len(ws))
	for q := range ws {
		qs = append(qs, q)
	}
	slices.SortFunc(qs, func(a, b string) int {
		if ws[a] != ws[b] {
			return ws[b] - ws[a]
		}
		if a < b {
			return -1
		}
		return 1
	})
	return qs
}
