package dbqueue_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/driver/dbqsqlite"
)

// A job whose attempts fail keeps their errors beside it; an operator
// finds it by name and reads why it keeps coming back, its secret field
// hidden by the queue's Redactor.
func ExampleQueue_SearchJobs() {
	ctx := context.Background()
	q, db, done := exampleQueue() // a migrated SQLite queue in a temporary directory
	defer done()
	if _, err := q.Push(ctx, dbqueue.NewJob{Name: "charge", Data: map[string]string{"card": "4242 4242 4242 4242", "order": "A-17"}}); err != nil {
		log.Fatal(err)
	}
	for _, cause := range []string{"gateway timeout", "card declined"} {
		held, err := q.Reserve(ctx, 1)
		if err != nil {
			log.Fatal(err)
		}
		if err := q.ReleaseAfterError(ctx, held[0], 0, errors.New(cause)); err != nil {
			log.Fatal(err)
		}
	}

	// The operator's view: the same database, payloads redacted.
	view, err := dbqueue.New(ctx, dbqsqlite.New(db), dbqueue.WithRedactor(dbqueue.RedactFields("data.card")))
	if err != nil {
		log.Fatal(err)
	}
	res, err := view.SearchJobs(ctx, dbqueue.Search{Name: "charge", Text: "A-17"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("found %d, read %d rows, complete: %v\n", len(res.Matches), res.Scanned, res.Complete)
	job, err := view.Job(ctx, res.Matches[0].ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("data:", string(job.Payload.Data))
	for _, e := range job.Errors {
		fmt.Printf("attempt %d: %s\n", e.Attempt, e.Error)
	}
	// Output:
	// found 1, read 1 rows, complete: true
	// data: {"card":"[redacted]","order":"A-17"}
	// attempt 1: gateway timeout
	// attempt 2: card declined
}
