package dbqueue_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/dbqueue/dbqueue"
)

// Find jobs by id or by state, make a delayed one run now, and cancel one
// before it runs. A job a worker holds cannot be cancelled.
func ExampleQueue_Jobs() {
	ctx := context.Background()
	q, _, done := exampleQueue() // a migrated SQLite queue in a temporary directory
	defer done()

	report, _ := q.Push(ctx, dbqueue.NewJob{Name: "nightly-report", Delay: 8 * time.Hour})
	if _, err := q.Push(ctx, dbqueue.NewJob{Name: "send-mail"}); err != nil {
		log.Fatal(err)
	}
	resize, _ := q.Push(ctx, dbqueue.NewJob{Name: "resize-image"})

	delayed, err := q.Jobs(ctx, dbqueue.JobFilter{State: dbqueue.JobDelayed})
	if err != nil {
		log.Fatal(err)
	}
	for _, j := range delayed {
		fmt.Printf("delayed: %s, due in %v\n", j.Name(), j.AvailableAt.Sub(j.CreatedAt))
	}

	held, err := q.Reserve(ctx, 1) // a worker takes the oldest due job: the mail
	if err != nil {
		log.Fatal(err)
	}
	err = q.Cancel(ctx, held[0].ID)
	fmt.Println("cancel a running job:", errors.Is(err, dbqueue.ErrJobReserved))
	if err := q.Cancel(ctx, resize); err != nil { // never mind the image
		log.Fatal(err)
	}
	if err := q.RunNow(ctx, report); err != nil { // don't wait for the night
		log.Fatal(err)
	}

	// Page through every job, 100 at a time.
	for after := int64(0); ; {
		page, err := q.Jobs(ctx, dbqueue.JobFilter{AfterID: after, Limit: 100})
		if err != nil {
			log.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, j := range page {
			fmt.Printf("%s: %s\n", j.Name(), j.State)
		}
		after = page[len(page)-1].ID
	}
	// Output:
	// delayed: nightly-report, due in 8h0m0s
	// cancel a running job: true
	// nightly-report: pending
	// send-mail: reserved
}
