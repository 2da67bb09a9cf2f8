package dbqueue_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/dbqueue/dbqueue"
)

// Invoice is a typed job: its type names its kind and its default options
// once, so no push repeats them and no handler can name it differently
// (see worker.Register).
type Invoice struct {
	Customer string `json:"customer"`
	Cents    int    `json:"cents"`
}

// Kind names the handler; a Laravel string job name works too.
func (Invoice) Kind() string { return "invoice" }

// JobOptions are the defaults of every Invoice push.
func (Invoice) JobOptions() dbqueue.JobOptions {
	return dbqueue.JobOptions{Queue: "billing", MaxTries: 5, Backoff: []time.Duration{time.Minute}}
}

// Push a typed job: its kind routes it, its type's options apply, and a
// push overrides them field by field.
func ExamplePushArgs() {
	ctx := context.Background()
	q, _, done := exampleQueue()
	defer done()

	if _, err := dbqueue.PushArgs(ctx, q, Invoice{Customer: "ada", Cents: 1250}); err != nil {
		log.Fatal(err)
	}
	// This one is urgent: a queue of its own, which workers read first.
	if _, err := dbqueue.PushArgs(ctx, q, Invoice{Customer: "bob", Cents: 99},
		dbqueue.JobOptions{Queue: "billing-urgent"}); err != nil {
		log.Fatal(err)
	}

	jobs, err := q.Reserve(ctx, 10, "billing-urgent", "billing")
	if err != nil {
		log.Fatal(err)
	}
	for _, job := range jobs {
		var inv Invoice
		if err := job.Decode(&inv); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s on %s: %s, %d cents, %d tries\n", job.Name(), job.Queue, inv.Customer, inv.Cents, *job.Payload.MaxTries)
	}
	// Output:
	// invoice on billing-urgent: bob, 99 cents, 5 tries
	// invoice on billing: ada, 1250 cents, 5 tries
}

// Reindex is a typed job whose type makes every push of it unique: while
// one is queued for an account, pushing another returns the queued one.
type Reindex struct {
	Account int `json:"account"`
}

func (Reindex) Kind() string { return "reindex" }

// JobOptions declare the uniqueness once: by kind and args (the account),
// until the job finishes, for at most an hour.
func (Reindex) JobOptions() dbqueue.JobOptions {
	return dbqueue.JobOptions{Queue: "search", Unique: &dbqueue.Unique{For: time.Hour}}
}

// A type declares unique options once; every typed push applies them
// (PushArgs, PushArgsMany, PushArgsTx, dbqpgx.PushArgsTx), PushArgsUnique
// also says whether the job was a duplicate, and a push's own Unique
// replaces the type's.
func ExamplePushArgsUnique() {
	ctx := context.Background()
	q, _, done := exampleQueue()
	defer done()

	first, err := dbqueue.PushArgs(ctx, q, Reindex{Account: 42})
	if err != nil {
		log.Fatal(err)
	}
	again, dup, err := dbqueue.PushArgsUnique(ctx, q, Reindex{Account: 42})
	fmt.Println("first:", first, "again:", again, "duplicate:", dup, err)

	other, dup, err := dbqueue.PushArgsUnique(ctx, q, Reindex{Account: 7})
	fmt.Println("another account:", other, "duplicate:", dup, err)

	// This push's Unique replaces the type's: unique per queue, so a
	// queue of its own takes a second job for account 42.
	urgent, dup, err := dbqueue.PushArgsUnique(ctx, q, Reindex{Account: 42},
		dbqueue.JobOptions{Queue: "search-urgent", Unique: &dbqueue.Unique{PerQueue: true}})
	fmt.Println("urgent:", urgent, "duplicate:", dup, err)
	// Output:
	// first: 1 again: 1 duplicate: true <nil>
	// another account: 2 duplicate: false <nil>
	// urgent: 3 duplicate: false <nil>
}
