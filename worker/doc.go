// Package worker runs jobs from a dbqueue.Queue: what Laravel's
// `php artisan queue:work` does, as a library to embed in a Go service, with
// many jobs at once in goroutines.
//
// The loop reads top to bottom like Laravel's Worker::daemon: check the
// stop conditions and the restart and pause signals, reserve as many jobs
// as there are free slots, run each with its timeout, and then delete it
// (success), release it with a backoff (an error with tries left) or move
// it to failed_jobs (out of tries, past retryUntil, too many exceptions, a
// timeout with failOnTimeout). A job whose name has no handler on this
// worker is released for Options.UnknownKindBackoff with its attempt given
// back, so that in a rolling deploy a worker of the new version runs it
// with all its tries, and failed with ErrUnknownJob once
// Options.UnknownKindWait has passed since its push.
//
// A job reserved again past its tries got there in one of two ways. Its
// last try ended in a release (ReleaseAfter, a middleware's, a Laravel
// worker's): it fails with ErrMaxAttempts without running, as in Laravel.
// Or it was abandoned by a worker that stopped while running it (killed,
// crashed), and the claim that took over its expired reservation says so.
// Laravel fails that one without running it too, which on its default of
// one try sends every job in flight on a killed worker to failed_jobs;
// this worker runs it up to Options.AbandonedRetries (2) more times, then
// fails it with ErrAbandoned, since a job that keeps killing its worker
// must end. Set AbandonedRetries to LaravelAbandoned for Laravel's exact
// rule.
//
// Handlers are registered by name (Handle, HandleJSON) or by args type
// (Register, for dbqueue.JobArgs types pushed with dbqueue.PushArgs). Tries,
// backoff and timeout come from the job's payload, else its handler
// (WithTries, WithBackoff, WithTimeout), else Options. RunOnce works the
// jobs ready now once, for tests, cron jobs and serverless workers.
//
// Transactional handlers (HandleTx, RegisterTx) get a transaction on the
// queue's database, in which the worker also writes the job's end before
// it commits: the handler's writes happen exactly once, a stale holder's
// roll back, and a commit whose reply is lost is resolved from the
// database rather than guessed. Handlers may also Snooze (again after a
// delay, the attempt given back) or Cancel (no retry, in failed_jobs).
//
// Timeouts: a handler's context is cancelled at the job's timeout. A
// handler that returns is finished at once (released or failed). A handler
// that ignores its context is given two more seconds; then its job is
// treated as timed out without waiting for it — failed if that is what the
// timeout calls for, otherwise left reserved so it comes back after
// retry_after, as it would in Laravel, whose worker kills its own process.
// The stuck goroutine keeps its slot until it returns, so concurrency stays
// bounded, and when every slot is stuck Run returns ErrWedged so a
// supervisor can restart the process.
//
// Metrics: a worker counts what it does per queue and job name (processed,
// failed, released, runtime and queue-wait histograms) in memory, without
// a lock or an allocation per job, and adds the counts to the minute's
// row of the metrics table every Options.MetricsInterval (10s), with a
// heartbeat row of its own in the workers table; dbqueue.Queue.Metrics
// and Queue.Workers read them, summed over every process. Counts a write
// could not store are kept for the next one; Run writes once more as it
// returns and deletes its heartbeat row. Options.HistoryRetention also
// records each finished job (dbqueue.Queue.History).
package worker
