// Command worker is a complete worker process: it migrates, registers
// handlers, and works jobs until SIGINT or SIGTERM, then stops gracefully.
//
//	go run ./examples/worker -dsn sqlite:./queue.db -push 20
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/dbqueue/dbqueue"
	_ "github.com/dbqueue/dbqueue/driver/dbqmysql" // -dsn may name any of the three
	_ "github.com/dbqueue/dbqueue/driver/dbqpgx"
	_ "github.com/dbqueue/dbqueue/driver/dbqsqlite"
	"github.com/dbqueue/dbqueue/migrations"
	"github.com/dbqueue/dbqueue/worker"
)

// Welcome is the data of a "send-welcome" job.
type Welcome struct {
	Email string `json:"email"`
}

func main() {
	dsn := flag.String("dsn", "sqlite:./queue.db", "database DSN")
	push := flag.Int("push", 0, "push this many demo jobs first")
	flag.Parse()

	// SIGTERM (deploys) and Ctrl-C stop taking jobs and let running ones finish.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))

	if err := run(ctx, *dsn, *push, log); err != nil {
		log.Error("worker failed", "error", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dsn string, push int, log *slog.Logger) error {
	// Its notices (a table it widened, settings it changed) go to the
	// application's log, not slog.Default().
	if err := migrations.UpDSN(ctx, dsn, migrations.WithLogger(log)); err != nil {
		return err
	}
	q, err := dbqueue.Open(ctx, dsn, dbqueue.WithRetryAfter(90*time.Second))
	if err != nil {
		return err
	}
	defer q.Close()

	for i := range push {
		_, err := q.Push(ctx, dbqueue.NewJob{
			Name: "send-welcome", Data: Welcome{Email: fmt.Sprintf("user%d@example.com", i)},
			MaxTries: 3, Backoff: []time.Duration{5 * time.Second, 30 * time.Second},
		})
		if err != nil {
			return err
		}
	}

	w, err := worker.New(q, worker.Options{
		Queues:      []string{"high", "default"}, // --queue=high,default
		Concurrency: 16,
		Tries:       3,                // --tries=3
		Timeout:     30 * time.Second, // --timeout=30 (retry_after is 90s)
		GracePeriod: 20 * time.Second,
		Logger:      log,
	})
	if err != nil {
		return err
	}
	worker.HandleJSON(w, "send-welcome", func(ctx context.Context, job *dbqueue.Job, m Welcome) error {
		if m.Email == "" {
			return worker.FailNow(errors.New("no address")) // retrying cannot help
		}
		log.Info("welcome mail sent", "to", m.Email)
		return nil
	}, worker.OnFailure(func(ctx context.Context, job *dbqueue.Job, cause error) {
		log.Error("welcome mail given up", "id", job.ID, "cause", cause)
	}))
	return w.Run(ctx) // returns after a graceful stop
}
