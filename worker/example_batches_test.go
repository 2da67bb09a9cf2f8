package worker_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/worker"
)

// A batch of jobs whose end runs Go code once, whichever worker finishes
// the last job (Laravel's Bus::batch()->then()->finally()).
func ExampleWorker_OnBatch() {
	ctx := context.Background()
	q, done := exampleQueue()
	defer done()

	var files []dbqueue.NewJob
	for _, f := range []string{"a.csv", "b.csv", "c.csv"} {
		files = append(files, dbqueue.NewJob{Name: "import-file", Data: f})
	}
	batch, err := q.Batch(ctx, dbqueue.BatchOptions{Name: "import"}, files...)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("batch of %d jobs, %d%% done\n", batch.TotalJobs, batch.Progress())

	w, err := worker.New(q, worker.Options{
		Concurrency: 4, StopWhenEmpty: true, Sleep: 10 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}
	worker.HandleJSON(w, "import-file", func(ctx context.Context, job *dbqueue.Job, file string) error {
		return nil // import file…
	})
	w.OnBatch("import", worker.BatchCallbacks{
		Then: func(ctx context.Context, b *dbqueue.Batch) {
			fmt.Printf("then: all %d imported\n", b.ProcessedJobs())
		},
		Catch: func(ctx context.Context, b *dbqueue.Batch, job *dbqueue.Job, cause error) {
			fmt.Println("catch: the first failure:", cause)
		},
		Finally: func(ctx context.Context, b *dbqueue.Batch) {
			fmt.Printf("finally: %d failed\n", b.FailedJobs)
		},
	})
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}

	batch, err = q.FindBatch(ctx, batch.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d%% done, finished: %v\n", batch.Progress(), batch.Finished())
	// Output:
	// batch of 3 jobs, 0% done
	// then: all 3 imported
	// finally: 0 failed
	// 100% done, finished: true
}

// Jobs that must run one after another: each link is pushed when the one
// before it succeeds, in the same transaction as that link's delete
// (Laravel's Bus::chain).
func ExampleWorker_chain() {
	ctx := context.Background()
	q, done := exampleQueue()
	defer done()

	if _, err := q.PushChain(ctx,
		dbqueue.NewJob{Name: "step", Data: "download"},
		dbqueue.NewJob{Name: "step", Data: "transcode", Queue: "cpu"},
		dbqueue.NewJob{Name: "step", Data: "publish"},
	); err != nil {
		log.Fatal(err)
	}

	w, err := worker.New(q, worker.Options{
		Queues:      []string{"default", "cpu"},
		Concurrency: 8, StopWhenEmpty: true, Sleep: 10 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}
	worker.HandleJSON(w, "step", func(ctx context.Context, job *dbqueue.Job, step string) error {
		fmt.Printf("%s on %s\n", step, job.Queue)
		return nil // an error would stop the chain here
	})
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// download on default
	// transcode on cpu
	// publish on default
}

// Weighted queues: of every 4 claims, "high" comes first in 3 and "low"
// in 1, so low-priority work keeps moving under a flood of high; when one
// is empty the other gets every claim.
func ExampleOptions_queueWeights() {
	ctx := context.Background()
	q, done := exampleQueue()
	defer done()

	for range 6 {
		if _, err := q.Push(ctx, dbqueue.NewJob{Name: "work", Queue: "high"}); err != nil {
			log.Fatal(err)
		}
		if _, err := q.Push(ctx, dbqueue.NewJob{Name: "work", Queue: "low"}); err != nil {
			log.Fatal(err)
		}
	}
	w, err := worker.New(q, worker.Options{
		QueueWeights: map[string]int{"high": 3, "low": 1},
		// One job per claim, one at a time, so the output shows the claims.
		Concurrency: 1, Prefetch: -1, Claims: 1,
		StopWhenEmpty: true, Sleep: 10 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}
	w.Handle("work", func(ctx context.Context, job *dbqueue.Job) error {
		fmt.Print(job.Queue, " ")
		return nil
	})
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println()
	// Output:
	// high high low high high high low high low low low low
}
