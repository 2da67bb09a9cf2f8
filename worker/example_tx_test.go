package worker_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/driver/dbqsqlite"
	"github.com/dbqueue/dbqueue/migrations"
	"github.com/dbqueue/dbqueue/worker"
)

// A transactional handler: its writes, the follow-up job it pushes and
// its job's end commit together, so a run that fails leaves nothing
// behind and the charge is made exactly once. On a pgx pool the handler
// takes a pgx.Tx instead, and pushes with dbqpgx.PushTx.
func ExampleHandleTx() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "dbqueue-tx-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	dsn := "sqlite:" + filepath.Join(dir, "queue.db")
	if err := migrations.UpDSN(ctx, dsn, migrations.WithLogger(slog.New(slog.DiscardHandler))); err != nil {
		log.Fatal(err)
	}
	db, _, err := dbqueue.OpenSQL(dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	q, err := dbqueue.New(ctx, dbqsqlite.New(db))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE charges (order_id BIGINT NOT NULL)"); err != nil {
		log.Fatal(err)
	}

	w, err := worker.New(q, worker.Options{Tries: 3, Backoff: []time.Duration{0}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	type charge struct {
		Order int64 `json:"order"`
	}
	worker.HandleTx(w, "charge", func(ctx context.Context, tx *sql.Tx, job *dbqueue.Job) error {
		var c charge
		if err := job.Decode(&c); err != nil {
			return worker.FailNow(err)
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO charges (order_id) VALUES (?)", c.Order); err != nil {
			return err
		}
		if _, err := q.PushTx(ctx, tx, dbqueue.NewJob{Name: "send-receipt", Data: c}); err != nil {
			return err
		}
		if job.Attempts == 1 {
			return errors.New("gateway timeout") // rolls back the charge and the receipt
		}
		return nil // the charge, the receipt and the job's end commit together
	})
	if _, err := q.Push(ctx, dbqueue.NewJob{Name: "charge", Data: charge{Order: 7}}); err != nil {
		log.Fatal(err)
	}

	for range 2 {
		results, err := w.RunOnce(ctx)
		if err != nil {
			log.Fatal(err)
		}
		for _, r := range results {
			fmt.Printf("attempt %d: %s %v\n", r.Job.Attempts, r.Outcome, r.Err)
		}
	}
	var charges, receipts int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM charges").Scan(&charges); err != nil {
		log.Fatal(err)
	}
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM jobs").Scan(&receipts); err != nil {
		log.Fatal(err)
	}
	fmt.Println("charges:", charges, "receipts queued:", receipts)
	// Output:
	// attempt 1: released gateway timeout
	// attempt 2: done <nil>
	// charges: 1 receipts queued: 1
}
