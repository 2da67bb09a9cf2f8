package worker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
)

// levelCount is a slog handler that counts records by level and message.
type levelCount struct {
	mu sync.Mutex
	n  map[string]int // "LEVEL message"
}

func (l *levelCount) Enabled(context.Context, slog.Level) bool { return true }
func (l *levelCount) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *levelCount) WithGroup(string) slog.Handler            { return l }
func (l *levelCount) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n[r.Level.String()+" "+r.Message]++
	return nil
}

// A conflict retried inside a claim (a deadlock, retried in milliseconds)
// is not an outage: nothing is told at Info or above. Retries that go on
// for outageAfter are one, told once; a claim that comes back failed is
// told at once; and the end of a told outage is told once.
func TestOutageTellsOnlyWhatLasts(t *testing.T) {
	h := &levelCount{n: map[string]int{}}
	o := &outage{log: slog.New(h), stopped: "stopped", resumed: "resumed"}
	deadlock := errors.New("deadlock")

	o.retried(deadlock)
	o.retried(deadlock)
	o.ok()
	if h.n["WARN stopped"]+h.n["INFO resumed"] != 0 {
		t.Fatalf("a conflict retried at once was told as an outage: %v", h.n)
	}

	o.retried(deadlock)
	o.mu.Lock()
	o.since = o.since.Add(-outageAfter) // the retries have gone on that long
	o.mu.Unlock()
	o.retried(deadlock)
	o.retried(deadlock)
	o.ok()
	o.ok()
	if h.n["WARN stopped"] != 1 || h.n["INFO resumed"] != 1 {
		t.Fatalf("retries lasting %v: want one start and one end told, got %v", outageAfter, h.n)
	}

	o.failed(deadlock)
	o.failed(deadlock)
	o.ok()
	if h.n["WARN stopped"] != 2 || h.n["INFO resumed"] != 2 {
		t.Fatalf("a failed claim: want its outage told at once and its end once, got %v", h.n)
	}
}
