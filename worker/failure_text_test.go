package worker_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/failed"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/worker"
)

// A handler's error, or Cancel reason, that the database would refuse as
// it is — bytes that are not UTF-8, a NUL, 20 MB — fails the job once,
// with the text escaped and cut in failed_jobs and in the error history,
// and the worker stops at once: before, the fail was retried until the
// reservation ran out, the job came back past its tries as abandoned and
// its own error was lost, and a stopping worker waited out its grace.
func TestHostileFailureTextsFailOnce(t *testing.T) {
	texts := map[string]string{
		"utf8":   "upstream said \xff\xfe",
		"nul":    "c string\x00tail",
		"huge":   strings.Repeat("0123456789", 2<<20),
		"cancel": "\x00\xff " + strings.Repeat("why ", 5<<20),
	}
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		for name := range texts {
			if _, err := q.Push(bg, dbqueue.NewJob{Name: name}); err != nil {
				t.Fatal(err)
			}
		}
		var mu sync.Mutex
		failures := map[string]int{}
		w, _ := newWorker(t, q, worker.Options{Tries: 2, Backoff: []time.Duration{0}, StopWhenEmpty: true,
			Events: worker.Events{JobFailed: func(_ context.Context, job *dbqueue.Job, _ error) {
				mu.Lock()
				failures[job.Name()]++
				mu.Unlock()
			}}})
		for name, text := range texts {
			w.Handle(name, func(_ context.Context, job *dbqueue.Job) error {
				if name == "cancel" {
					return worker.Cancel(text)
				}
				return errors.New(text)
			})
		}
		start := time.Now()
		if err := runUntil(t, w, time.Minute); err != nil {
			t.Fatal(err)
		}
		// Each failure is one round trip or three (the fallbacks); a
		// retried refusal would have held Run for the reservation's 90 s.
		if took := time.Since(start); took > 30*time.Second {
			t.Fatalf("Run took %v", took)
		}
		store, err := failed.New(q)
		if err != nil {
			t.Fatal(err)
		}
		list, err := store.List(bg, failed.Filter{})
		if err != nil || len(list) != len(texts) {
			t.Fatalf("%d failed jobs, want %d (%v)", len(list), len(texts), err)
		}
		for _, j := range list {
			name, text := j.Name(), texts[j.Name()]
			if failures[name] != 1 {
				t.Errorf("%s: failed %d times, want once", name, failures[name])
			}
			want := text
			if name == "cancel" {
				want = dbqueue.Cancelled(text).Error()
			}
			if want = dialect.StorableText(want, dbqueue.FailureTextBytes); j.Exception != want {
				t.Errorf("%s: exception %d bytes %.60q, want %d bytes %.60q", name, len(j.Exception), j.Exception, len(want), want)
			}
			fj, err := store.Find(bg, j.UUID)
			if err != nil {
				t.Fatal(err)
			}
			// Two tries: the first attempt's error is in the history
			// (Cancel fails at once, with none).
			if name == "cancel" {
				if len(fj.Errors) != 0 {
					t.Errorf("cancelled job's history %q", fj.Errors[0].Error)
				}
			} else if len(fj.Errors) != 1 || fj.Errors[0].Error != dialect.StorableText(text, dbqueue.ErrorHistoryBytes) {
				t.Errorf("%s: history %+v", name, fj.Errors)
			}
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 0 {
			t.Fatalf("%d jobs left", n)
		}
	})
}
