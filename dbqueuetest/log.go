package dbqueuetest

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/worker"
)

// Logger returns a logger that writes to t's log (t.Output: shown with
// the test's name, under -v or when the test fails), at Debug, so a
// failing test shows every job a worker ran beside its own lines, and a
// passing one prints nothing. New, NewDSN, NewDefaultTables and
// NewWorker log through it; pass it wherever else the code under test
// takes a *slog.Logger (periodic.Options.Logger, …).
//
// A line logged after the test ended (a goroutine the test left running)
// cannot go to its log, which testing forbids with a panic: it goes to
// stderr, named for the test.
func Logger(t testing.TB) *slog.Logger {
	w := &testWriter{out: t.Output(), name: t.Name()}
	t.Cleanup(w.end)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{} // the test's log needs no clock
			}
			return a
		},
	}))
}

// testWriter passes each record (the text handler writes one per Write)
// to a test's output until the test ends.
type testWriter struct {
	mu    sync.Mutex
	out   io.Writer
	name  string
	ended bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended {
		fmt.Fprintf(os.Stderr, "dbqueuetest: after %s ended: %s", w.name, p)
		return len(p), nil
	}
	return w.out.Write(p)
}

// end runs as the test's cleanup, while its log still takes lines: a
// Write that holds mu finishes first, and every later one sees ended.
func (w *testWriter) end() {
	w.mu.Lock()
	w.ended = true
	w.mu.Unlock()
}

// NewWorker is worker.New for a test: its Logger, when opts leaves it
// nil, is Logger(t), and an option New refuses fails the test. Run it
// with Work, or with Run in a goroutine that ends before the test does.
func NewWorker(t testing.TB, q *dbqueue.Queue, opts worker.Options) *worker.Worker {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = Logger(t)
	}
	w, err := worker.New(q, opts)
	if err != nil {
		t.Fatalf("dbqueuetest: %v", err)
	}
	return w
}
