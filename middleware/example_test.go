package middleware_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/dbqueue/dbqueue"
	_ "github.com/dbqueue/dbqueue/driver/dbqsqlite" // makes sqlite: DSNs known to Open
	"github.com/dbqueue/dbqueue/middleware"
	"github.com/dbqueue/dbqueue/migrations"
	"github.com/dbqueue/dbqueue/worker"
)

type traceKey struct{}

// Account is the data of a "sync-account" job.
type Account struct {
	ID     int  `json:"id"`
	Closed bool `json:"closed"`
}

// Push middleware stamps every job with the trace id of the request that
// pushed it; worker middleware hands it to the handler in its context;
// the handler's own middleware skip closed accounts, allow 2 syncs a
// minute across every worker, and never sync one account twice at once.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "dbqueue-middleware-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	dsn := "sqlite:" + filepath.Join(dir, "queue.db")
	if err := migrations.UpDSN(ctx, dsn, migrations.WithLogger(slog.New(slog.DiscardHandler))); err != nil {
		log.Fatal(err)
	}

	stampTrace := func(ctx context.Context, jobs []dbqueue.NewJob, next dbqueue.PushFunc) ([]int64, error) {
		if id, ok := ctx.Value(traceKey{}).(string); ok {
			for i := range jobs {
				jobs[i].SetHeader("trace", id)
			}
		}
		return next(ctx, jobs)
	}
	q, err := dbqueue.Open(ctx, dsn, dbqueue.WithPushMiddleware(stampTrace))
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close()

	request := context.WithValue(ctx, traceKey{}, "req-42")
	for _, a := range []Account{{ID: 1}, {ID: 2}, {ID: 3, Closed: true}, {ID: 4}} {
		if _, err := q.Push(request, dbqueue.NewJob{Name: "sync-account", Data: a}); err != nil {
			log.Fatal(err)
		}
	}

	traceFromHeaders := func(next worker.HandlerFunc) worker.HandlerFunc {
		return func(ctx context.Context, job *dbqueue.Job) error {
			return next(context.WithValue(ctx, traceKey{}, job.Payload.Headers["trace"]), job)
		}
	}
	w, err := worker.New(q, worker.Options{
		Concurrency: 1, Claims: 1, Sleep: 10 * time.Millisecond, StopWhenEmpty: true,
		Tries:      worker.Unlimited, // a rate-limited release costs an attempt
		Logger:     slog.New(slog.DiscardHandler),
		Middleware: []worker.Middleware{traceFromHeaders},
	})
	if err != nil {
		log.Fatal(err)
	}
	closed := func(_ context.Context, job *dbqueue.Job) bool {
		var a Account
		return job.Decode(&a) == nil && a.Closed
	}
	account := func(job *dbqueue.Job) string {
		var a Account
		_ = job.Decode(&a)
		return fmt.Sprint("account:", a.ID)
	}
	worker.HandleJSON(w, "sync-account", func(ctx context.Context, job *dbqueue.Job, a Account) error {
		fmt.Printf("trace %s: synced account %d\n", ctx.Value(traceKey{}), a.ID)
		return nil
	}, worker.WithMiddleware(
		middleware.SkipIf(closed),                                    // first: a skipped job uses no limit
		middleware.RateLimited(q, middleware.ByName, 2, time.Minute), // then: 2 a minute, all workers together
		middleware.WithoutOverlapping(q, account, 2*time.Minute),     // last: one sync per account at a time
	))
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}

	sizes, err := q.Size(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("waiting for the next minute:", sizes.Delayed)
	// Output:
	// trace req-42: synced account 1
	// trace req-42: synced account 2
	// waiting for the next minute: 1
}
