package periodic_test

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/periodic"
)

// turning is a Schedule that ticks every second until it is broken, and
// then answers as broken tells it: the zero time (what robfig/cron gives
// for February 30th), a time ten thousand years on, the time it was given,
// or an earlier one.
type turning struct {
	broken atomic.Bool
	answer func(t time.Time) time.Time
}

func (s *turning) Next(t time.Time) time.Time {
	if !s.broken.Load() {
		return periodic.Every(time.Second).Next(t)
	}
	return s.answer(t)
}

func (s *turning) String() string { return "turning" }

// signalling is a slog handler that closes seen at the first record whose
// message contains want.
type signalling struct {
	want string
	once atomic.Bool
	seen chan struct{}
}

func (h *signalling) Enabled(context.Context, slog.Level) bool { return true }
func (h *signalling) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.want) && h.once.CompareAndSwap(false, true) {
		close(h.seen)
	}
	return nil
}
func (h *signalling) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *signalling) WithGroup(string) slog.Handler      { return h }

// A schedule that stops yielding a sane next tick while the scheduler runs
// (the zero time, as February 30th gives, one past any horizon, or no
// progress) pushes nothing more, says so, and does not spin: cancelling
// the context ends Run promptly.
func TestSchedulerWithoutNextTickStopsOnCancel(t *testing.T) {
	t.Parallel()
	answers := map[string]func(time.Time) time.Time{
		"zero":    func(time.Time) time.Time { return time.Time{} },
		"far":     func(t time.Time) time.Time { return t.AddDate(10000, 0, 0) },
		"same":    func(t time.Time) time.Time { return t },
		"earlier": func(t time.Time) time.Time { return t.Add(-time.Hour) },
	}
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		for name, answer := range answers {
			t.Run(name, func(t *testing.T) {
				q := db.Queue(t)
				s := &turning{answer: answer}
				queue := "spin-" + name
				log := &signalling{want: "no next tick", seen: make(chan struct{})}
				start := time.Now()
				sched, err := periodic.New(q, []periodic.Job{{
					Name:     "spin-" + name,
					Schedule: s,
					New: func(tick time.Time) dbqueue.NewJob {
						s.broken.Store(true) // from the first tick pushed on
						return dbqueue.NewJob{Name: "spin", Queue: queue, Data: tick.Unix()}
					},
				}}, periodic.Options{Logger: slog.New(log)})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				done := make(chan error, 1)
				go func() { done <- sched.Run(ctx) }()
				select {
				case <-log.seen:
				case <-time.After(15 * time.Second):
					t.Error("no error logged for a schedule without a next tick")
				}
				cancel()
				select {
				case err := <-done:
					if err != nil {
						t.Errorf("Run: %v", err)
					}
				case <-time.After(5 * time.Second):
					t.Fatal("Run still running 5s after its context was cancelled: it spins")
				}
				rows, err := db.SQL.Query(db.Dialect.Rebind("SELECT payload FROM jobs WHERE queue = ?"), queue)
				if err != nil {
					t.Fatal(err)
				}
				defer rows.Close()
				n := 0
				for rows.Next() {
					var raw []byte
					if err := rows.Scan(&raw); err != nil {
						t.Fatal(err)
					}
					p, err := dbqueue.DecodePayload(raw)
					if err != nil {
						t.Fatal(err)
					}
					tick, err := strconv.ParseInt(string(p.Data), 10, 64)
					if err != nil {
						t.Fatal(err)
					}
					if tick < start.Unix()-5 || tick > time.Now().Unix()+5 {
						t.Errorf("a job pushed for tick %v, not a tick of the schedule while it ran", time.Unix(tick, 0).UTC())
					}
					n++
				}
				if n == 0 || n > 2 {
					t.Errorf("%d jobs pushed, want the one or two sane ticks before the schedule broke", n)
				}
			})
		}
	})
}

// A schedule that has no tick at all when the scheduler is made is
// refused then, with the job's name in the error.
func TestNewRefusesScheduleWithoutTick(t *testing.T) {
	q := dbtest.New(t, dbqueue.SQLite).Queue(t)
	s := &turning{answer: func(time.Time) time.Time { return time.Time{} }}
	s.broken.Store(true)
	_, err := periodic.New(q, []periodic.Job{{
		Name:     "never",
		Schedule: s,
		New:      func(time.Time) dbqueue.NewJob { return dbqueue.NewJob{Name: "x"} },
	}}, periodic.Options{})
	if err == nil || !strings.Contains(err.Error(), `"never"`) {
		t.Errorf("New with a schedule that never ticks: %v, want an error naming the job", err)
	}
}
