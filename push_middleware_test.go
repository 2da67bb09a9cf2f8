package dbqueue_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/driver/dbqpgx"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// traced is push middleware that stamps a trace id on every job and
// records what it saw and what came back.
type traced struct {
	seen [][]string // job names per push
	ids  [][]int64
}

func (tr *traced) middleware(ctx context.Context, jobs []dbqueue.NewJob, next dbqueue.PushFunc) ([]int64, error) {
	var names []string
	for i := range jobs {
		names = append(names, jobs[i].Name)
		jobs[i].SetHeader("trace", "t-1")
	}
	tr.seen = append(tr.seen, names)
	ids, err := next(ctx, jobs)
	tr.ids = append(tr.ids, ids)
	return ids, err
}

// Push middleware see every push (Push, PushMany, PushTx), first outermost,
// and what they change is what is stored; the caller's jobs and header
// maps are left as they were.
func TestPushMiddleware(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		tr := &traced{}
		var order []string
		outer := func(ctx context.Context, jobs []dbqueue.NewJob, next dbqueue.PushFunc) ([]int64, error) {
			order = append(order, "outer")
			if jobs[0].Name == "refused" {
				return nil, errors.New("refused by middleware")
			}
			for i := range jobs {
				if jobs[i].Headers["trace"] != "" {
					t.Error("the outer middleware sees the inner one's header: order reversed")
				}
				jobs[i].Queue = "traced"
			}
			return next(ctx, jobs)
		}
		q := db.Queue(t, dbqueue.WithPushMiddleware(outer, tr.middleware))
		shared := map[string]string{"tenant": "acme"}
		caller := []dbqueue.NewJob{{Name: "a", Headers: shared}, {Name: "b", Headers: shared}}
		ids, err := q.PushMany(ctx, caller)
		if err != nil || len(ids) != 2 {
			t.Fatalf("PushMany: %v, %v", ids, err)
		}
		if _, err := q.Push(ctx, dbqueue.NewJob{Name: "c"}); err != nil {
			t.Fatal(err)
		}
		tx, err := db.SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.PushTx(ctx, tx, dbqueue.NewJob{Name: "d"}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(order, []string{"outer", "outer", "outer"}) || len(tr.seen) != 3 ||
			!slices.Equal(tr.seen[0], []string{"a", "b"}) || !slices.Equal(tr.ids[0], ids) {
			t.Fatalf("middleware calls: outer %v, inner saw %v and got %v; want one call per push", order, tr.seen, tr.ids)
		}
		if len(shared) != 1 || caller[0].Queue != "" || caller[0].Headers["trace"] != "" {
			t.Fatalf("the caller's jobs were changed: %+v, headers %v", caller[0], shared)
		}
		jobs := reserve(t, q, 10, "traced")
		if len(jobs) != 4 {
			t.Fatalf("%d jobs on the middleware's queue, want 4", len(jobs))
		}
		for _, j := range jobs {
			if j.Payload.Headers["trace"] != "t-1" {
				t.Errorf("job %s headers %v, want trace t-1", j.Name(), j.Payload.Headers)
			}
			if (j.Name() == "a" || j.Name() == "b") && j.Payload.Headers["tenant"] != "acme" {
				t.Errorf("job %s lost the caller's header: %v", j.Name(), j.Payload.Headers)
			}
		}
		// A middleware that refuses stops the push; nothing is written.
		if _, err := q.Push(ctx, dbqueue.NewJob{Name: "refused"}); err == nil || !strings.Contains(err.Error(), "refused by middleware") {
			t.Fatalf("refused push: %v", err)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE reserved_at IS NULL"); n != 0 {
			t.Fatalf("%d unreserved jobs after a refused push, want 0", n)
		}
	})
}

// A middleware must return one id per job; nil middleware are refused.
func TestPushMiddlewareMisuse(t *testing.T) {
	db := dbtest.New(t, dbqueue.SQLite)
	drop := func(ctx context.Context, jobs []dbqueue.NewJob, next dbqueue.PushFunc) ([]int64, error) {
		return next(ctx, jobs[:1])
	}
	q := db.Queue(t, dbqueue.WithPushMiddleware(drop))
	if _, err := q.PushMany(ctx, []dbqueue.NewJob{{Name: "a"}, {Name: "b"}}); err == nil || !strings.Contains(err.Error(), "1 ids for 2 jobs") {
		t.Fatalf("middleware dropping a job: %v, want an error", err)
	}
	if _, err := dbqueue.Open(ctx, db.DSN, dbqueue.WithPushMiddleware(nil)); err == nil {
		t.Fatal("Open with a nil push middleware: no error")
	}
}

// dbqpgx.PushTx goes through the push middleware too.
func TestPushMiddlewarePgxTx(t *testing.T) {
	pool, plain := pgxQueue(t)
	tr := &traced{}
	q, err := dbqueue.New(ctx, dbqpgx.New(pool), dbqueue.WithPushMiddleware(tr.middleware))
	if err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dbqpgx.PushTx(ctx, q, tx, dbqueue.NewJob{Name: "in-tx"}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	jobs := reserve(t, plain, 1)
	if len(jobs) != 1 || jobs[0].Payload.Headers["trace"] != "t-1" || len(tr.seen) != 1 {
		t.Fatalf("pgx PushTx: %d jobs, headers %v, %d middleware calls", len(jobs), jobs[0].Payload.Headers, len(tr.seen))
	}
}

// Headers decode from the payload; a "headers" of another shape, from some
// other producer, reads as none and leaves the job runnable.
func TestPayloadHeaders(t *testing.T) {
	p, err := dbqueue.DecodePayload([]byte(`{"job":"x","data":null,"headers":{"trace":"t-1"}}`))
	if err != nil || p.Headers["trace"] != "t-1" {
		t.Fatalf("headers %v, %v; want trace t-1", p.Headers, err)
	}
	for _, raw := range []string{`{"job":"x","headers":[1,2]}`, `{"job":"x","headers":{"n":1}}`, `{"job":"x","headers":null}`} {
		p, err := dbqueue.DecodePayload([]byte(raw))
		if err != nil || p.Headers != nil || p.Job != "x" {
			t.Errorf("%s: headers %v, %v; want none and no error", raw, p.Headers, err)
		}
	}
}
