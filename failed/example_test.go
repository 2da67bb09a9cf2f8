package failed_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/dbqueue/dbqueue"
	_ "github.com/dbqueue/dbqueue/driver/dbqsqlite" // makes sqlite: DSNs known to Open
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

	// An operator lists the failures, then retries them. The store shares
	// q's connection; New fails only without a queue (a nil q).
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

	// It is no longer in failed_jobs: a second retry of the same uuid is
	// refused, all or nothing.
	if _, err := store.Retry(ctx, list[0].UUID); errors.Is(err, failed.ErrNotFound) {
		fmt.Println("retry again: not found")
	}

	// The job is back, on its first attempt again, with the same uuid.
	jobs, err = q.Reserve(ctx, 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(jobs[0].Name(), "attempt", jobs[0].Attempts, "same uuid:", jobs[0].Payload.UUID == list[0].UUID)
	// Output:
	// send-invoice on default failed: smtp: connection refused
	// retried: 1
	// retry again: not found
	// send-invoice attempt 1 same uuid: true
}

// RetryQueue puts back every failure of one queue, as
// `queue:retry --queue=mail` does; failures of other queues stay.
func ExampleStore_RetryQueue() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "dbqueue-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	dsn := "sqlite:" + filepath.Join(dir, "queue.db")
	if err := migrations.UpDSN(ctx, dsn); err != nil {
		log.Fatal(err)
	}
	q, err := dbqueue.Open(ctx, dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close()

	// Two mails and a report fail: the mail server was down.
	for _, job := range []dbqueue.NewJob{
		{Name: "send-invoice", Queue: "mail"},
		{Name: "send-reminder", Queue: "mail"},
		{Name: "build-report", Queue: "reports"},
	} {
		if _, err := q.Push(ctx, job); err != nil {
			log.Fatal(err)
		}
		jobs, err := q.Reserve(ctx, 1, job.Queue)
		if err != nil {
			log.Fatal(err)
		}
		if err := q.Fail(ctx, jobs[0], errors.New("smtp: connection refused")); err != nil {
			log.Fatal(err)
		}
	}

	store, err := failed.New(q)
	if err != nil {
		log.Fatal(err)
	}
	// The mail server is back: retry the mail queue only.
	n, err := store.RetryQueue(ctx, "mail")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("retried:", n)

	mail, err := q.Size(ctx, "mail")
	if err != nil {
		log.Fatal(err)
	}
	left, err := store.List(ctx, failed.Filter{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("mail jobs pending:", mail.Pending)
	for _, j := range left {
		fmt.Println("still failed:", j.Name(), "on", j.Queue)
	}
	// Output:
	// retried: 2
	// mail jobs pending: 2
	// still failed: build-report on reports
}
