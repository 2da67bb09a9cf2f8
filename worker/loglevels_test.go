package worker_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/worker"
)

// levels is a slog handler that keeps each "job" record's level and
// outcome, at every level.
type levels struct {
	mu   sync.Mutex
	jobs []logged
}

type logged struct {
	level   slog.Level
	name    string
	outcome string
}

func (l *levels) Enabled(context.Context, slog.Level) bool { return true }
func (l *levels) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *levels) WithGroup(string) slog.Handler            { return l }
func (l *levels) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "job" {
		return nil
	}
	rec := logged{level: r.Level}
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "name":
			rec.name = a.Value.String()
		case "outcome":
			rec.outcome = a.Value.String()
		}
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.jobs = append(l.jobs, rec)
	return nil
}

func (l *levels) records() []logged {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]logged(nil), l.jobs...)
}

// The default log is for what an operator must look at: a busy worker
// writes no Info line per successful job (those are at Debug), and one
// line for each failure, release and give-back.
func TestDefaultLogIsQuietAboutSuccess(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		pushN(t, q, 20, dbqueue.NewJob{Name: "ok"})
		pushN(t, q, 1, dbqueue.NewJob{Name: "later"})
		pushN(t, q, 1, dbqueue.NewJob{Name: "broken"})
		rec := &levels{}
		w, _ := newWorker(t, q, worker.Options{StopWhenEmpty: true, Logger: slog.New(rec)})
		w.Handle("ok", func(context.Context, *dbqueue.Job) error { return nil })
		w.Handle("later", func(context.Context, *dbqueue.Job) error { return worker.ReleaseAfter(time.Hour) })
		w.Handle("broken", func(context.Context, *dbqueue.Job) error { return worker.FailNow(errors.New("bad input")) })
		if err := runUntil(t, w, 60*time.Second); err != nil {
			t.Fatal(err)
		}
		loud := map[string]int{}
		debug := 0
		for _, r := range rec.records() {
			if r.level >= slog.LevelInfo {
				loud[r.name]++
			} else if r.name == "ok" {
				debug++
			}
		}
		if loud["ok"] != 0 || debug != 20 {
			t.Errorf("successful jobs logged %d lines at Info or above and %d at Debug; want 0 and 20", loud["ok"], debug)
		}
		if loud["later"] != 1 || loud["broken"] != 1 {
			t.Errorf("the release logged %d lines and the failure %d at Info or above; want one each", loud["later"], loud["broken"])
		}
	})
}
