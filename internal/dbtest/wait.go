package dbtest

import (
	"testing"
	"time"
)

// pollEvery is how often Until asks again: often enough that a test
// waits a few milliseconds past the moment, rarely enough that the
// database barely notices.
const pollEvery = 10 * time.Millisecond

// Until asks cond until it is true or within has passed, and reports
// whether it became true. Tests wait on a state with it — a row written,
// a counter reached — rather than sleeping a time that is too short on a
// loaded machine and too long on an idle one. It may run on any goroutine.
func Until(within time.Duration, cond func() bool) bool {
	if cond() {
		return true
	}
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			if cond() {
				return true
			}
		case <-deadline.C:
			return cond()
		}
	}
}

// WaitFor is Until that fails t, saying what it waited for, when within
// passes first. Call it from the test's own goroutine.
func WaitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Until(within, cond) {
		t.Fatalf("%s: not within %v", what, within)
	}
}
