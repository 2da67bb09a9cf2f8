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
// Backoff grows from 2ms to 500ms with jitter. RetryHooks in ctx hear
// each failure it retries and can stop the retries early.
func Retry(ctx context.Context, fn func() error) error {
	deadline := time.Now().Add(retryLimit)
	wait := 2 * time.Millisecond
	for {
		err := fn()
		if err == nil || !IsRetryable(err) || time.Now().After(deadline) {
			return err
		}
		var stop <-chan struct{}
		if h, _ := ctx.Value(hooksKey{}).(*RetryHooks); h != nil {
			if h.Failed != nil {
				h.Failed(err)
			}
			stop = h.Stop
			select {
			case <-stop:
				return err
			default:
			}
		}
		jitter := time.Duration(rand.Int64N(int64(wait)))
		t := time.NewTimer(wait/2 + jitter)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-stop:
			t.Stop()
			return err
		case <-t.C:
		}
		wait = min(wait*2, 500*time.Millisecond)
	}
}

// RetryHooks let the caller of an operation that retries inside (a claim
// retries a refused connection for up to 30s) see the failures as they
// happen and stop the retries without cancelling a statement under way:
// the worker logs an outage when it starts, not when the 30s are over,
// and stops retrying when it stops.
type RetryHooks struct {
	// Failed, when set, hears each failure Retry is about to retry. It
	// may be called from several goroutines at once.
	Failed func(err error)
	// Stop, when closed, makes Retry return the last failure instead of
	// waiting to retry it.
	Stop <-chan struct{}
}

type hooksKey struct{}

// WithRetryHooks returns ctx carrying h for the Retry calls made with it.
func WithRetryHooks(ctx context.Context, h *RetryHooks) context.Context {
	return context.WithValue(ctx, hooksKey{}, h)
}
