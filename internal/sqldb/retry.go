package sqldb

import (
	"context"
	"math/rand/v2"
	"time"
)

// retryLimit bounds how long one operation keeps retrying conflicts before
// the error reaches the caller.
const retryLimit = 30 * time.Second

// Retry runs fn until it succeeds, fails with an error that is not
// Retryable, the context ends, or conflicts have been retried for 30s.
// Backoff grows from 2ms to 500ms with jitter.
func Retry(ctx context.Context, fn func() error) error {
	deadline := time.Now().Add(retryLimit)
	wait := 2 * time.Millisecond
	for {
		err := fn()
		if err == nil || !IsRetryable(err) || time.Now().After(deadline) {
			return err
		}
		jitter := time.Duration(rand.Int64N(int64(wait)))
		t := time.NewTimer(wait/2 + jitter)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait = min(wait*2, 500*time.Millisecond)
	}
}
