package worker_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/worker"
)

// Workers record what they do; Queue.Metrics reads it back, summed over
// every worker process, and Queue.Workers lists those running.
func ExampleWorker_Run_metrics() {
	ctx := context.Background()
	q, done := exampleQueue()
	defer done()
	for i := range 10 {
		name := "send-mail"
		if i%5 == 4 {
			name = "charge-card"
		}
		if _, err := q.Push(ctx, dbqueue.NewJob{Name: name, Queue: "billing"}); err != nil {
			log.Fatal(err)
		}
	}
	w, err := worker.New(q, worker.Options{Queues: []string{"billing"}, StopWhenEmpty: true}) // MetricsInterval: 10s
	if err != nil {
		log.Fatal(err)
	}
	w.Handle("send-mail", func(ctx context.Context, job *dbqueue.Job) error { return nil })
	w.Handle("charge-card", func(ctx context.Context, job *dbqueue.Job) error { return errors.New("card declined") })
	if err := w.Run(ctx); err != nil { // writes its counts once more as it returns
		log.Fatal(err)
	}

	m, err := q.Metrics(ctx, dbqueue.MetricsQuery{Queue: "billing"}) // the last hour, minute by minute
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("processed %d, failed %d, failure rate %.1f\n", m.Total.Processed, m.Total.Failed, m.Total.FailureRate())
	for _, g := range m.Groups {
		fmt.Printf("%s: %d processed, %d failed\n", g.Kind, g.Processed, g.Failed)
	}
	running, err := q.Workers(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("workers running:", len(running)) // a stopped worker removes its row
	// Output:
	// processed 8, failed 2, failure rate 0.2
	// charge-card: 0 processed, 2 failed
	// send-mail: 8 processed, 0 failed
	// workers running: 0
}
