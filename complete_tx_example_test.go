package dbqueue_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"

	"github.com/dbqueue/dbqueue"
)

// A handler's writes and its job's end in one transaction: the effect is
// applied exactly once, however often the job runs. A run whose
// reservation was lost learns it before its commit (ErrNotHeld) and rolls
// back; a commit whose reply was lost is resolved from the database.
func Example_transactionalHandler() {
	ctx := context.Background()
	q, db, done := exampleQueue()
	defer done()
	if _, err := db.ExecContext(ctx, "CREATE TABLE charges (order_id BIGINT NOT NULL)"); err != nil {
		log.Fatal(err)
	}
	if _, err := q.Push(ctx, dbqueue.NewJob{Name: "charge", Data: map[string]int{"order": 42}}); err != nil {
		log.Fatal(err)
	}

	// handle runs one job: its write and its completion share tx.
	handle := func(ctx context.Context, tx *sql.Tx, job *dbqueue.Job) error {
		var data struct{ Order int64 }
		if err := job.Decode(&data); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "INSERT INTO charges (order_id) VALUES (?)", data.Order)
		return err
	}

	jobs, err := q.Reserve(ctx, 10)
	if err != nil {
		log.Fatal(err)
	}
	for _, job := range jobs {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			log.Fatal(err)
		}
		if err := handle(ctx, tx, job); err != nil {
			_ = tx.Rollback()
			_ = q.Release(ctx, job, 0) // retry it, as a worker would
			continue
		}
		if err := q.CompleteTx(ctx, tx, job); errors.Is(err, dbqueue.ErrNotHeld) {
			_ = tx.Rollback() // another worker has the job now: apply nothing
			continue
		} else if err != nil {
			log.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			// Committed or not? Ask the database, never guess.
			outcome, rerr := q.ResolveCommit(ctx, job)
			if rerr != nil {
				log.Fatal(rerr)
			}
			if outcome == dbqueue.CommitRolledBack {
				_ = q.Release(ctx, job, 0)
			}
			continue
		}
		fmt.Println("charged, job", job.Name(), "done")
	}

	var charges int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM charges").Scan(&charges); err != nil {
		log.Fatal(err)
	}
	sizes, err := q.Size(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("charges:", charges, "jobs left:", sizes.Total())
	// Output:
	// charged, job charge done
	// charges: 1 jobs left: 0
}
