package dbqueuetest_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/dbqueuetest"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/worker"
)

// recorder is a testing.TB whose log is a buffer and whose cleanups run
// when end is called: a test that ends under the test's control.
type recorder struct {
	testing.TB
	mu       sync.Mutex
	log      bytes.Buffer
	cleanups []func()
}

func (r *recorder) Output() io.Writer { return writerFunc(r.write) }
func (r *recorder) Cleanup(f func())  { r.cleanups = append(r.cleanups, f) }

func (r *recorder) write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.log.Write(p)
}

func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.log.String()
}

func (r *recorder) end() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// defaultLog makes slog.Default record into a buffer until the test ends:
// what dbqueue would print on stderr.
func defaultLog(t *testing.T) *recorder {
	r := &recorder{TB: t}
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(writerFunc(r.write), &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(old) })
	return r
}

// What the queue's migrations and NewWorker's worker log goes to the
// test's log, nothing to slog.Default (stderr); a line logged after the
// test ended goes to stderr, named for the test, rather than panicking.
func TestLogsGoToTheTestLog(t *testing.T) {
	stderr := defaultLog(t)
	r := &recorder{TB: t}
	q := dbqueuetest.New(r)
	w := dbqueuetest.NewWorker(r, q, worker.Options{Concurrency: 1})
	w.Handle("flaky", func(ctx context.Context, job *dbqueue.Job) error { return errors.New("flaky said no") })
	if _, err := q.Push(context.Background(), dbqueue.NewJob{Name: "flaky"}); err != nil {
		t.Fatal(err)
	}
	if res := dbqueuetest.Work(r, w); len(res) != 1 || res[0].Outcome != worker.OutcomeFailed {
		t.Fatalf("Work: %+v", res)
	}
	log := dbqueuetest.Logger(r)
	log.Debug("from the test")
	r.end()
	if got := r.String(); !strings.Contains(got, "flaky said no") || !strings.Contains(got, "from the test") || strings.Contains(got, "time=") {
		t.Errorf("the test's log:\n%s", got)
	}
	if got := stderr.String(); got != "" {
		t.Errorf("slog.Default got:\n%s", got)
	}

	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stderr
	os.Stderr = f
	log.Info("too late") // the test has ended: t's log would panic
	os.Stderr = old
	late, _ := os.ReadFile(f.Name())
	if !strings.Contains(string(late), "after "+t.Name()+" ended") || !strings.Contains(string(late), "too late") || strings.Contains(r.String(), "too late") {
		t.Errorf("a line after the end: stderr %q, log %q", late, r.String())
	}
}

// NewDSN's migrations (PostgreSQL reports the autovacuum settings it
// sets) log to the test's log.
func TestMigrationNotesGoToTheTestLog(t *testing.T) {
	stderr := defaultLog(t)
	r := &recorder{TB: t}
	dbqueuetest.NewEnv(r, dbtest.EnvPostgres)
	r.end()
	if got := r.String(); !strings.Contains(got, "autovacuum") {
		t.Errorf("the test's log:\n%s", got)
	}
	if got := stderr.String(); got != "" {
		t.Errorf("slog.Default got:\n%s", got)
	}
}
