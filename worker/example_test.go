package worker_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/dbqueue/dbqueue"
	_ "github.com/dbqueue/dbqueue/driver/dbqsqlite" // makes sqlite: DSNs known to Open
	"github.com/dbqueue/dbqueue/failed"
	"github.com/dbqueue/dbqueue/migrations"
	"github.com/dbqueue/dbqueue/worker"
)

// Register a handler for each job name, then Run. With StopWhenEmpty, Run
// returns once no job is ready, like `queue:work --stop-when-empty`;
// without it, Run works until its context ends.
func ExampleWorker() {
	ctx := context.Background()
	q, done := exampleQueue()
	defer done()

	for _, file := range []string{"a.png", "b.png", "c.png"} {
		if _, err := q.Push(ctx, dbqueue.NewJob{Name: "resize-image", Data: map[string]string{"file": file}}); err != nil {
			log.Fatal(err)
		}
	}

	w, err := worker.New(q, worker.Options{
		Concurrency:   1, // one job at a time, so the output's order is fixed
		Claims:        1,
		Sleep:         10 * time.Millisecond,
		StopWhenEmpty: true,
		Logger:        slog.New(slog.DiscardHandler), // one line per job otherwise
	})
	if err != nil {
		log.Fatal(err)
	}
	w.Handle("resize-image", func(ctx context.Context, job *dbqueue.Job) error {
		var data struct {
			File string `json:"file"`
		}
		if err := job.Decode(&data); err != nil {
			return err
		}
		fmt.Printf("resized %s (job %d, attempt %d)\n", data.File, job.ID, job.Attempts)
		return nil // success: the job is deleted
	})
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}

	sizes, err := q.Size(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("jobs left:", sizes.Total())
	// Output:
	// resized a.png (job 1, attempt 1)
	// resized b.png (job 2, attempt 1)
	// resized c.png (job 3, attempt 1)
	// jobs left: 0
}

// Welcome is the data of a "send-welcome" job.
type Welcome struct {
	Email string `json:"email"`
}

// HandleJSON decodes each job's data into a typed value before calling the
// handler. Data that does not decode fails the job at once, since retrying
// cannot fix it; OnFailure hears about it, and the job waits in failed_jobs.
func ExampleHandleJSON() {
	ctx := context.Background()
	q, done := exampleQueue()
	defer done()

	for _, data := range []any{
		Welcome{Email: "ada@example.com"},
		map[string]int{"email": 42}, // pushed by a buggy client
		Welcome{Email: "grace@example.com"},
	} {
		if _, err := q.Push(ctx, dbqueue.NewJob{Name: "send-welcome", Data: data, MaxTries: 3}); err != nil {
			log.Fatal(err)
		}
	}

	w, err := worker.New(q, worker.Options{
		Concurrency: 1, Claims: 1, Sleep: 10 * time.Millisecond, StopWhenEmpty: true,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}
	worker.HandleJSON(w, "send-welcome", func(ctx context.Context, job *dbqueue.Job, m Welcome) error {
		fmt.Println("welcome mail to", m.Email)
		return nil
	}, worker.OnFailure(func(ctx context.Context, job *dbqueue.Job, cause error) {
		fmt.Printf("job %d failed on attempt %d of 3: its data does not decode\n", job.ID, job.Attempts)
	}))
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}

	store, err := failed.New(q)
	if err != nil {
		log.Fatal(err)
	}
	list, err := store.List(ctx, failed.Filter{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("in failed_jobs:", len(list))
	// Output:
	// welcome mail to ada@example.com
	// job 2 failed on attempt 1 of 3: its data does not decode
	// welcome mail to grace@example.com
	// in failed_jobs: 1
}

// A service stops its worker by ending Run's context, here on SIGTERM (a
// deploy) or Ctrl-C. Run then takes no new job, lets running jobs finish
// (for up to GracePeriod, with their contexts still live), gives jobs it
// had reserved but not started back to the queue without counting the
// attempt, and returns nil.
//
// The example plays the signal from inside the first job, so its output is
// fixed; a real service only calls signal.NotifyContext.
func ExampleWorker_Run_gracefulShutdown() {
	q, done := exampleQueue()
	defer done()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, signalArrives := context.WithCancel(ctx) // for the example only
	defer signalArrives()

	for part := 1; part <= 3; part++ {
		if _, err := q.Push(ctx, dbqueue.NewJob{Name: "export", Data: map[string]int{"part": part}}); err != nil {
			log.Fatal(err)
		}
	}

	w, err := worker.New(q, worker.Options{
		Concurrency: 1, Claims: 1, Sleep: 10 * time.Millisecond,
		GracePeriod: 10 * time.Second, // how long running jobs may go on after a stop
		Logger:      slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}
	w.Handle("export", func(ctx context.Context, job *dbqueue.Job) error {
		var data struct {
			Part int `json:"part"`
		}
		if err := job.Decode(&data); err != nil {
			return err
		}
		fmt.Println("export part", data.Part, "started")
		signalArrives() // SIGTERM arrives while the job runs
		select {
		case <-time.After(100 * time.Millisecond): // the rest of the work
			fmt.Println("export part", data.Part, "finished after the signal")
			return nil
		case <-ctx.Done(): // only once GracePeriod is over
			return ctx.Err()
		}
	})

	err = w.Run(ctx) // returns once the running job has finished
	fmt.Println("Run returned:", err)

	sizes, err := q.Size(context.Background(), "")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("left for the next worker: %d pending, %d reserved\n", sizes.Pending, sizes.Reserved)
	// Output:
	// export part 1 started
	// export part 1 finished after the signal
	// Run returned: <nil>
	// left for the next worker: 2 pending, 0 reserved
}

// exampleQueue is the examples' set-up: a queue on a migrated SQLite file
// in a temporary directory, which done removes.
func exampleQueue() (q *dbqueue.Queue, done func()) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "dbqueue-worker-example")
	if err != nil {
		log.Fatal(err)
	}
	dsn := "sqlite:" + filepath.Join(dir, "queue.db")
	if err := migrations.UpDSN(ctx, dsn, migrations.WithLogger(slog.New(slog.DiscardHandler))); err != nil {
		log.Fatal(err)
	}
	if q, err = dbqueue.Open(ctx, dsn); err != nil {
		log.Fatal(err)
	}
	return q, func() {
		q.Close()
		os.RemoveAll(dir)
	}
}
