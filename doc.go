// Package dbqueue is a job queue kept in the application's own SQL database:
// PostgreSQL, MySQL 8 / MariaDB 10.6+, or SQLite.
//
// It keeps Laravel's database-queue tables (jobs, failed_jobs) and payload
// envelope, so a Laravel app and a Go service can share one queue. A job's
// life is one row: Push inserts it, Reserve claims it with
// SELECT … FOR UPDATE SKIP LOCKED and bumps its attempts, and the holder then
// Deletes it (success), Releases it (retry later, same row) or Fails it (the
// row moves to failed_jobs in the same transaction). A reservation older than
// retry_after is claimed again by the same statement, so a crashed worker's
// job comes back without a sweeper.
//
// Delete, Release and Fail act only on the reservation the caller holds: a
// row is named by (id, attempts), so a worker whose job was reclaimed after
// retry_after gets ErrNotHeld instead of touching the new holder's run.
//
// Every time the queue stores comes from the database's clock.
package dbqueue
