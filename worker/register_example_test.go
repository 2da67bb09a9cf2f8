package worker_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/worker"
)

// ResizeImage is a typed job: its Kind routes it, and its JobOptions are
// the defaults of every push.
type ResizeImage struct {
	File  string `json:"file"`
	Width int    `json:"width"`
}

// Kind is the name the job is pushed and handled under.
func (ResizeImage) Kind() string { return "resize-image" }

// JobOptions gives every ResizeImage three tries.
func (ResizeImage) JobOptions() dbqueue.JobOptions { return dbqueue.JobOptions{MaxTries: 3} }

// Register a handler by the args type: the kind comes from the type, so
// the push and the handler cannot name it differently, and the job's data
// arrives decoded. WithBackoff and WithTimeout set this kind's defaults,
// used when a push did not set its own. RunOnce works what is ready once
// and says what became of each job.
func ExampleRegister() {
	ctx := context.Background()
	q, done := exampleQueue()
	defer done()

	if _, err := dbqueue.PushArgsMany(ctx, q, []ResizeImage{{"a.png", 640}, {"huge.tiff", 9000}}); err != nil {
		log.Fatal(err)
	}

	w, err := worker.New(q, worker.Options{Concurrency: 1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	worker.Register(w, func(ctx context.Context, job *dbqueue.Job, img ResizeImage) error {
		if img.Width > 4096 {
			return errors.New("too wide, try later")
		}
		fmt.Printf("resized %s to %dpx\n", img.File, img.Width)
		return nil
	}, worker.WithBackoff(time.Minute), worker.WithTimeout(30*time.Second))

	results, err := w.RunOnce(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range results {
		fmt.Printf("job %d: %s (attempt %d)", r.Job.ID, r.Outcome, r.Job.Attempts)
		if r.Outcome == worker.OutcomeReleased {
			fmt.Printf(", again in %v: %v", r.Delay, r.Err)
		}
		fmt.Println()
	}
	// Output:
	// resized a.png to 640px
	// job 1: done (attempt 1)
	// job 2: released (attempt 1), again in 1m0s: too wide, try later
}
