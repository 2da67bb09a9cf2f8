// Package dbqueue is a job queue kept in the SQL database an application
// already has: PostgreSQL, MySQL 8 / MariaDB 10.6+, or SQLite (pure Go, no
// server). It uses Laravel's database-queue tables (jobs, failed_jobs) and
// payload envelope, so a Laravel app and a Go service can share one queue.
// Jobs can be pushed inside the application's own transactions (PushTx),
// are claimed without waiting on other workers' locks (SKIP LOCKED on
// PostgreSQL and MySQL), and are worked by a pool of goroutines that does
// what `php artisan queue:work` does. There is no
// broker and no sweeper: a job's whole life is one row.
//
// # Import
//
// This package links no database driver. Import it with the driver package
// of your database; importing a driver package, even blank, makes its DSNs
// known to Open and to migrations.UpDSN:
//
//	import (
//		"github.com/dbqueue/dbqueue"
//		_ "github.com/dbqueue/dbqueue/driver/dbqpgx" // or driver/dbqmysql, driver/dbqsqlite
//	)
//
// # Start
//
// A complete program: it creates the tables, pushes a job and works the
// queue until Ctrl-C or SIGTERM, then stops gracefully.
//
//	package main
//
//	import (
//		"context"
//		"log"
//		"os"
//		"os/signal"
//		"syscall"
//
//		"github.com/dbqueue/dbqueue"
//		_ "github.com/dbqueue/dbqueue/driver/dbqsqlite"
//		"github.com/dbqueue/dbqueue/migrations"
//		"github.com/dbqueue/dbqueue/worker"
//	)
//
//	type Welcome struct {
//		Email string `json:"email"`
//	}
//
//	func main() {
//		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
//		defer stop()
//
//		dsn := "sqlite:./queue.db" // or postgres://…, mysql://… with their driver package
//		if err := migrations.UpDSN(ctx, dsn); err != nil { // `migrate up`, idempotent
//			log.Fatal(err)
//		}
//		q, err := dbqueue.Open(ctx, dsn)
//		if err != nil {
//			log.Fatal(err)
//		}
//		defer q.Close()
//
//		if _, err := q.Push(ctx, dbqueue.NewJob{
//			Name: "send-welcome", Data: Welcome{Email: "ada@example.com"}, MaxTries: 3,
//		}); err != nil {
//			log.Fatal(err)
//		}
//
//		w, err := worker.New(q, worker.Options{Concurrency: 16})
//		if err != nil {
//			log.Fatal(err)
//		}
//		worker.HandleJSON(w, "send-welcome", func(ctx context.Context, job *dbqueue.Job, m Welcome) error {
//			log.Printf("welcome mail to %s (attempt %d)", m.Email, job.Attempts)
//			return nil // nil deletes the job; an error retries it, then fails it
//		})
//		if err := w.Run(ctx); err != nil { // nil after a graceful stop
//			log.Fatal(err)
//		}
//	}
//
// The examples of this package and of worker and failed run as tests on
// SQLite, and show their output.
//
// # Where things are
//
//   - This package: Open (from a DSN, see ParseDSN) and New (on a pool
//     handed over by a driver package); Push, PushMany and PushTx, and
//     for typed jobs (JobArgs) PushArgs, PushArgsMany and PushArgsTx; the
//     lower-level Reserve, Delete, Release and Fail a worker is built on;
//     Size and Clear; Pause, Resume, Paused and Restart, the signals
//     workers obey; PushUnique, PushUniqueTx and PushArgsUnique for jobs
//     queued once per key (or NewJob.Unique on any push, JobOptions.Unique
//     on a typed job's type); Job, Jobs,
//     SearchJobs, Cancel and RunNow to find and steer waiting jobs, with
//     the errors of a job's earlier attempts (JobInfo.Errors, kept by
//     ReleaseAfterError) and WithRedactor to hide payload fields from
//     whatever shows them; PushChain and
//     Batch (Laravel's Bus::chain and Bus::batch, job_batches included);
//     WithPushMiddleware; WithTables and the other Options.
//   - [github.com/dbqueue/dbqueue/worker]: the worker. worker.New, Handle,
//     HandleJSON and Register (typed jobs), Run and RunOnce; tries,
//     backoff, timeouts, concurrency, graceful stops, and Laravel's queue
//     events as hooks.
//   - [github.com/dbqueue/dbqueue/middleware]: handler middleware backed
//     by the database: RateLimited, WithoutOverlapping,
//     ThrottlesExceptions, SkipIf and SkipUnless.
//   - [github.com/dbqueue/dbqueue/periodic]: cron and interval schedules,
//     one push per tick however many processes run them.
//   - [github.com/dbqueue/dbqueue/failed]: the failed_jobs table, as
//     Laravel's queue:failed, queue:retry, queue:forget, queue:flush and
//     queue:prune-failed: failed.New, List, Find (with the errors of the
//     attempts before), Search, Retry, RetryQueue, RetryAll, Forget,
//     Flush, Prune.
//   - [github.com/dbqueue/dbqueue/migrations]: the tables. migrations.Up on
//     a *sql.DB, UpDSN on a DSN, FS for goose, golang-migrate or Atlas,
//     WithTables for other table names. cmd/migrate is the same as a
//     command.
//   - Driver packages: [github.com/dbqueue/dbqueue/driver/dbqpgx] (pgx v5:
//     dbqpgx.New(pool), and dbqpgx.PushTx to push in a pgx transaction),
//     [github.com/dbqueue/dbqueue/driver/dbqmysql] (dbqmysql.New(db)) and
//     [github.com/dbqueue/dbqueue/driver/dbqsqlite] (dbqsqlite.New(db)).
//   - [github.com/dbqueue/dbqueue/dbqueuetest]: a migrated SQLite queue in a
//     test's temporary directory, or a table set of the test's own on a
//     server (NewDSN, NewEnv); what was pushed to it (Pushed, PushedArgs);
//     and Work, which runs the ready jobs through a worker's handlers once.
//
// # The operator's view
//
// Workers record what they do (package worker, Options.MetricsInterval).
// Queue.Metrics reads it per step, queue and job name — counts, failure
// rate, runtime and queue-wait percentiles — summed in SQL over every
// worker process; Queue.Workers lists the running workers from their
// heartbeat rows; Queue.History reads finished jobs when workers keep
// them. They live here, beside Size and Queues, because the dashboard,
// the dbqueue command and an application's own health check all start
// from a Queue.
//
// # Ownership
//
// Reserve claims a row and bumps its attempts; the holder then Deletes it
// (success), Releases it (retry later, same row) or Fails it (the row moves
// to failed_jobs in the same transaction). A reservation older than
// retry_after is claimed again by the same statement, so a crashed worker's
// job comes back by itself.
//
// Every claim also draws a new reservation token (the reservation_token
// column). Delete, Release and Fail name the row by its id, token and
// attempts together, and act only if that is still the reservation on the
// row: a holder whose reservation ran out and was claimed by another
// worker gets ErrNotHeld and changes nothing, so it can never finish,
// release or fail the new holder's run, nor add its error to the new
// holder's error history.
//
// The times the queue writes and compares (created_at, available_at after
// a delay, reserved_at, failed_at, the retry_after cut-off) come from the
// database's clock, never a worker's, so workers whose clocks disagree
// still agree on when a job is due and when a reservation runs out.
package dbqueue
