package worker

import "time"

// gather reads in until it is closed, collecting what arrives within delay
// of the first item, up to max, and hands each batch to flush. Completions
// and releases are written this way: one statement for many jobs, and
// none held back longer than delay.
func gather[T any](in <-chan T, max int, delay time.Duration, flush func([]T)) {
	batch := make([]T, 0, max)
	for item := range in {
		batch = append(batch[:0], item)
		timer := time.NewTimer(delay)
	collect:
		for len(batch) < max {
			select {
			case next, ok := <-in:
				if !ok {
					break collect
				}
				batch = append(batch, next)
			case <-timer.C:
				break collect
			}
		}
		timer.Stop()
		flush(batch)
	}
}
