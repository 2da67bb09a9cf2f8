package dbqueue_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/dbqueue/dbqueue"
	_ "github.com/dbqueue/dbqueue/driver/dbqsqlite"
)

// Push a job at most once while it is queued: the second push finds the
// first and returns its id; once the job finished, its key is free again.
func ExampleQueue_PushUnique() {
	ctx := context.Background()
	q, _, done := exampleQueue() // a migrated SQLite queue in a temporary directory
	defer done()

	type rebuild struct {
		Account int `json:"account"`
	}
	job := dbqueue.NewJob{Name: "rebuild-search-index", Data: rebuild{Account: 42}}
	// Unique by name and data, until the job finishes, for at most an hour.
	unique := dbqueue.Unique{For: time.Hour}

	first, dup, err := q.PushUnique(ctx, job, unique)
	fmt.Println("first push:", first, "duplicate:", dup, err)
	again, dup, err := q.PushUnique(ctx, job, unique)
	fmt.Println("second push:", again, "duplicate:", dup, err)

	jobs, err := q.Reserve(ctx, 1)
	if err != nil {
		log.Fatal(err)
	}
	if err := q.Delete(ctx, jobs[0]); err != nil { // the job succeeded
		log.Fatal(err)
	}
	after, dup, err := q.PushUnique(ctx, job, unique)
	fmt.Println("after it finished:", after, "duplicate:", dup, err)
	// Output:
	// first push: 1 duplicate: false <nil>
	// second push: 1 duplicate: true <nil>
	// after it finished: 2 duplicate: false <nil>
}
