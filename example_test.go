package dbqueue_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/driver/dbqsqlite"
	"github.com/dbqueue/dbqueue/migrations"
)

// Open a queue on a SQLite file, install the tables, and run one job
// through its life: push, reserve, delete.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "dbqueue")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// postgres://… and mysql://… DSNs work the same way.
	dsn, err := dbqueue.ParseDSN("sqlite:" + filepath.Join(dir, "queue.db"))
	if err != nil {
		log.Fatal(err)
	}
	db, err := sql.Open(dsn.Driver, dsn.Conn)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if err := migrations.Up(ctx, db, dsn.Dialect); err != nil {
		log.Fatal(err)
	}
	q, err := dbqueue.New(ctx, dbqsqlite.New(db))
	if err != nil {
		log.Fatal(err)
	}

	type welcome struct {
		To string `json:"to"`
	}
	if _, err := q.Push(ctx, dbqueue.NewJob{
		Name:     `App\Jobs\SendWelcome@handle`, // a Laravel worker can run it too
		Data:     welcome{To: "ada@example.com"},
		MaxTries: 3,
	}); err != nil {
		log.Fatal(err)
	}

	jobs, err := q.Reserve(ctx, 10)
	if err != nil {
		log.Fatal(err)
	}
	for _, job := range jobs {
		var w welcome
		if err := job.Decode(&w); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s to %s (attempt %d)\n", job.Name(), w.To, job.Attempts)
		if err := q.Delete(ctx, job); err != nil { // it ran: remove it
			log.Fatal(err)
		}
	}
	sizes, err := q.Size(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("jobs left:", sizes.Total())
	// Output:
	// App\Jobs\SendWelcome@handle to ada@example.com (attempt 1)
	// jobs left: 0
}

// Push a job in the same transaction as the application's own writes: it
// exists only if the transaction commits.
func ExampleQueue_PushTx() {
	ctx := context.Background()
	q, db, done := exampleQueue()
	defer done()

	for _, commit := range []bool{false, true} {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			log.Fatal(err)
		}
		// … the application's own writes in tx …
		if _, err := q.PushTx(ctx, tx, dbqueue.NewJob{Name: "ship-order", Data: map[string]int{"order": 42}}); err != nil {
			log.Fatal(err)
		}
		if commit {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			log.Fatal(err)
		}
		sizes, err := q.Size(ctx, "")
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("commit=%v: %d pending\n", commit, sizes.Pending)
	}
	// Output:
	// commit=false: 0 pending
	// commit=true: 1 pending
}

// Reserve up to n jobs, taking from the queues in the order named; then
// release one to retry later and fail another into failed_jobs.
func ExampleQueue_Reserve() {
	ctx := context.Background()
	q, db, done := exampleQueue()
	defer done()

	for _, job := range []dbqueue.NewJob{
		{Name: "resize-image", Queue: "default"},
		{Name: "send-invoice", Queue: "default"},
		{Name: "reset-password", Queue: "high"},
	} {
		if _, err := q.Push(ctx, job); err != nil {
			log.Fatal(err)
		}
	}

	jobs, err := q.Reserve(ctx, 2, "high", "default") // "high" first
	if err != nil {
		log.Fatal(err)
	}
	for _, job := range jobs {
		fmt.Printf("reserved %s from %s\n", job.Name(), job.Queue)
	}

	// The first failed for good: it moves to failed_jobs with the error.
	if err := q.Fail(ctx, jobs[0], errors.New("smtp: 550 mailbox unavailable")); err != nil {
		log.Fatal(err)
	}
	// The second may succeed later: back to the queue, due in a minute.
	if err := q.Release(ctx, jobs[1], time.Minute); err != nil {
		log.Fatal(err)
	}

	sizes, err := q.Size(ctx, "default")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("default: %d pending, %d delayed, %d reserved\n", sizes.Pending, sizes.Delayed, sizes.Reserved)
	var failed string
	if err := db.QueryRowContext(ctx, "SELECT exception FROM failed_jobs").Scan(&failed); err != nil {
		log.Fatal(err)
	}
	fmt.Println("failed:", failed)
	// Output:
	// reserved reset-password from high
	// reserved resize-image from default
	// default: 1 pending, 1 delayed, 0 reserved
	// failed: smtp: 550 mailbox unavailable
}

// exampleQueue is Example's set-up: a queue on a migrated SQLite file that
// done removes.
func exampleQueue() (q *dbqueue.Queue, db *sql.DB, done func()) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "dbqueue")
	if err != nil {
		log.Fatal(err)
	}
	dsn, err := dbqueue.ParseDSN("sqlite:" + filepath.Join(dir, "queue.db"))
	if err != nil {
		log.Fatal(err)
	}
	if db, err = sql.Open(dsn.Driver, dsn.Conn); err != nil {
		log.Fatal(err)
	}
	if err := migrations.Up(ctx, db, dsn.Dialect); err != nil {
		log.Fatal(err)
	}
	if q, err = dbqueue.New(ctx, dbqsqlite.New(db)); err != nil {
		log.Fatal(err)
	}
	return q, db, func() {
		db.Close()
		os.RemoveAll(dir)
	}
}
