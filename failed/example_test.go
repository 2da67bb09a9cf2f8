package failed_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/failed"
	"github.com/dbqueue/dbqueue/migrations"
)

// A job that ran out of tries waits in failed_jobs until someone reads why,
// fixes the cause and retries it: it returns to its queue as a fresh job.
func ExampleStore_Retry() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "dbqueue-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	dsn := "sqlite:" + filepath.Join(dir, "queue.db")

	// Create the tables, as `migrate up` would.
	if err := migrations.UpDSN(ctx, dsn); err != nil {
		log.Fatal(err)
	}

	q, err := dbqueue.Open(ctx, dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close()

	// A worker takes a job and gives up on it.
	if _, err := q.Push(ctx, dbqueue.NewJob{Name: "send-invoice", Data: map[string]int{"invoice": 42}}); err != nil {
		log.Fatal(err)
	}
	jobs, err := q.Reserve(ctx, 1)
	if err != nil {
		log.Fatal(err)
	}
	if err := q.Fail(ctx, jobs[0], errors.New("smtp: connection refused")); err != nil {
		log.Fatal(err)
	}

	// An operator lists the failures, then retries them.
	store, err := failed.New(q)
	if err != nil {
		log.Fatal(err)
	}
	list, err := store.List(ctx, failed.Filter{})
	if err != nil {
		log.Fatal(err)
	}
	for _, j := range list {
		fmt.Printf("%s on %s failed: %s\n", j.Name(), j.Queue, j.Exception)
	}
	n, err := store.Retry(ctx, list[0].UUID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("retried:", n)

	// The job is back, on its first attempt again, with the same uuid.
	jobs, err = q.Reserve(ctx, 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(jobs[0].Name(), "attempt", jobs[0].Attempts, "same uuid:", jobs[0].Payload.UUID == list[0].UUID)
	// Output:
	// send-invoice on default failed: smtp: connection refused
	// retried: 1
	// send-invoice attempt 1 same uuid: true
}
