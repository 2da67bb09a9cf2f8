package dbqueue_test

import (
	"context"
	"fmt"
	"log"

	"github.com/dbqueue/dbqueue"
)

// Run at most one sync per customer at a time, and at most two in all,
// across every worker process: the claim takes only what fits, so the
// other jobs wait without using an attempt.
func ExampleConcurrency() {
	ctx := context.Background()
	q, _, done := exampleQueue() // a migrated SQLite queue in a temporary directory
	defer done()

	sync := func(customer string) dbqueue.NewJob {
		return dbqueue.NewJob{Name: "sync-customer", Data: customer,
			Concurrency: &dbqueue.Concurrency{Limit: "sync", Key: customer, PerKey: 1, Total: 2}}
	}
	for _, customer := range []string{"acme", "acme", "globex", "initech"} {
		if _, err := q.Push(ctx, sync(customer)); err != nil {
			log.Fatal(err)
		}
	}

	jobs, err := q.Reserve(ctx, 10)
	if err != nil {
		log.Fatal(err)
	}
	for _, j := range jobs {
		fmt.Println("started", string(j.Payload.Data), "limited:", j.Limited())
	}
	limits, err := q.Limits(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %d running, %d waiting\n", limits[0].Limit, limits[0].Running, limits[0].Waiting)

	// One ends: the next job whose key has room starts.
	if err := q.Delete(ctx, jobs[0]); err != nil {
		log.Fatal(err)
	}
	jobs, err = q.Reserve(ctx, 10)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("then started", string(jobs[0].Payload.Data))
	// Output:
	// started "acme" limited: true
	// started "globex" limited: true
	// sync: 2 running, 2 waiting
	// then started "initech"
}
