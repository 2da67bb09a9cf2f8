package middleware_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/middleware"
	"github.com/dbqueue/dbqueue/worker"
)

// reserveN pushes n jobs named name and reserves them.
func reserveN(t *testing.T, q *dbqueue.Queue, name string, n int) []*dbqueue.Job {
	t.Helper()
	jobs := make([]dbqueue.NewJob, n)
	for i := range jobs {
		jobs[i] = dbqueue.NewJob{Name: name, Data: i}
	}
	push(t, q, jobs...)
	got, err := q.Reserve(bg, n)
	if err != nil || len(got) != n {
		t.Fatalf("reserved %d of %d: %v", len(got), n, err)
	}
	return got
}

// 16 workers of two processes (8 goroutines on each of two Queues) start
// a job of one key at the same moment, against a service that is down,
// under ThrottlesExceptions(3 per hour). Exactly 3 reach the service; the
// 13 others are released without running, and so is the next one.
func TestThrottlesExceptionsBoundUnderConcurrency(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		const (
			limit   = 3
			workers = 8
		)
		qs := []*dbqueue.Queue{db.Queue(t), db.Queue(t)}
		jobs := reserveN(t, qs[0], "call", 2*workers+1)
		type event struct {
			ran bool
			err error
		}
		events := make(chan event, 2*workers)
		down := make(chan struct{})
		service := func(context.Context, *dbqueue.Job) error {
			events <- event{ran: true}
			<-down
			return errors.New("service unavailable")
		}
		handlers := []worker.HandlerFunc{
			middleware.ThrottlesExceptions(qs[0], nil, limit, time.Hour)(service),
			middleware.ThrottlesExceptions(qs[1], nil, limit, time.Hour)(service),
		}
		start := make(chan struct{})
		results := make(chan error, 2*workers)
		for i := range 2 * workers {
			go func() {
				<-start
				err := handlers[i%2](bg, jobs[i])
				if worker.IsOutcome(err) {
					events <- event{err: err}
				}
				results <- err
			}()
		}
		close(start)
		ran, refused := 0, 0
		for range 2 * workers {
			select {
			case e := <-events:
				if e.ran {
					ran++
				} else {
					refused++
				}
			case <-time.After(30 * time.Second):
				close(down)
				t.Fatalf("after 30s, %d jobs ran and %d were released; want all 16 decided", ran, refused)
			}
		}
		close(down)
		for range 2 * workers {
			<-results
		}
		if ran != limit || refused != 2*workers-limit {
			t.Fatalf("%d jobs reached the service and %d were released; want exactly %d and %d", ran, refused, limit, 2*workers-limit)
		}
		called := false
		err := handlers[0](bg, jobs[2*workers])
		if !worker.IsOutcome(err) {
			t.Fatalf("the job after the limit returned %v, want a release", err)
		}
		select {
		case <-events:
			called = true
		default:
		}
		if called {
			t.Fatal("the job after the limit reached the service")
		}
	})
}

// WithoutOverlapping(expire 1s) guards jobs that may run longer than 1s.
// While the first job of a key runs, past 1s within its timeout, and then
// past its timeout ignoring its context, a second job of the key, in
// another process, must not start.
func TestWithoutOverlappingOutlastsShortExpire(t *testing.T) {
	for _, c := range []struct {
		name    string
		timeout time.Duration // the first job's context deadline
		wait    int64         // database seconds to let pass while it runs
	}{
		{"within its timeout", 10 * time.Second, 3},
		{"past its timeout", time.Second, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
				qs := []*dbqueue.Queue{db.Queue(t), db.Queue(t)}
				jobs := reserveN(t, qs[0], "sync", 2)
				var started = make(chan struct{})
				hold := make(chan struct{})
				first := middleware.WithoutOverlapping(qs[0], nil, time.Second)(func(context.Context, *dbqueue.Job) error {
					close(started)
					<-hold // ignores its context, like a handler stuck in a call without one
					return nil
				})
				secondRan := make(chan struct{}, 1)
				second := middleware.WithoutOverlapping(qs[1], nil, time.Second)(func(context.Context, *dbqueue.Job) error {
					secondRan <- struct{}{}
					return nil
				})
				ctx, cancel := context.WithTimeout(bg, c.timeout)
				defer cancel()
				done := make(chan error, 1)
				var began int64
				go func() { done <- first(ctx, jobs[0]) }()
				select {
				case <-started:
				case <-time.After(20 * time.Second):
					t.Fatal("the first job did not start")
				}
				began = dbNow(t, db)
				dbtest.WaitFor(t, 20*time.Second, "the database clock moves", func() bool { return dbNow(t, db) >= began+c.wait })
				err := second(bg, jobs[1])
				close(hold)
				if ferr := <-done; ferr != nil {
					t.Fatalf("first job: %v", ferr)
				}
				select {
				case <-secondRan:
					t.Fatalf("a second job of the key ran %ds into the first, whose lock expire is 1s", c.wait)
				default:
				}
				if !worker.IsOutcome(err) {
					t.Fatalf("second job returned %v, want a release", err)
				}
				if n := db.Count(t, "SELECT COUNT(*) FROM jobs_locks"); n != 0 {
					t.Fatalf("%d locks left after the first job returned", n)
				}
			})
		})
	}
}

func dbNow(t *testing.T, db *dbtest.DB) int64 {
	t.Helper()
	var now int64
	if err := db.SQL.QueryRow("SELECT " + db.Now()).Scan(&now); err != nil {
		t.Fatal(fmt.Errorf("read the database clock: %w", err))
	}
	return now
}
