<?php
/*
 * Job handlers for the interop tests. Loaded by bootstrap.php.
 *
 * String jobs (Queue::push('DbqInterop\Recorder@handle', ['key' => ...])):
 *   Recorder@handle  records a run in interop_runs under data.key, then deletes the job.
 *   Recorder@fail    throws (→ released with backoff until tries run out → failed_jobs).
 *   Recorder@flaky   throws while attempts < data.succeed_on (default 2), then records.
 *   Recorder@slow    sleeps data.sleep seconds (default 5), then records (timeout tests).
 *   Recorder@nodelete records but does NOT call $job->delete() — shows Laravel's
 *                    rule that a string job handler must delete its own job.
 *   Recorder@brittle throws unless the worker runs with DBQ_HEALED=1, then
 *                    records (fails now, succeeds once retried by a healed worker).
 *
 * Object job: DbqInterop\InteropJob (a queued command, run by CallQueuedHandler@call).
 */

declare(strict_types=1);

namespace DbqInterop;

use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Queue\SerializesModels;
use RuntimeException;

class Recorder
{
    private function key(array $data): string
    {
        if (!isset($data['key'])) {
            throw new RuntimeException('interop: job data has no "key"');
        }
        return (string) $data['key'];
    }

    public function handle($job, $data): void
    {
        record_run($this->key((array) $data));
        $job->delete();
    }

    public function fail($job, $data): void
    {
        throw new RuntimeException('interop: deliberate failure for key ' . $this->key((array) $data));
    }

    public function flaky($job, $data): void
    {
        $data = (array) $data;
        $succeedOn = (int) ($data['succeed_on'] ?? 2);
        if ($job->attempts() < $succeedOn) {
            throw new RuntimeException('interop: flaky failure, attempt ' . $job->attempts() . ' for key ' . $this->key($data));
        }
        record_run($this->key($data));
        $job->delete();
    }

    public function slow($job, $data): void
    {
        $data = (array) $data;
        sleep((int) ($data['sleep'] ?? 5));
        record_run($this->key($data));
        $job->delete();
    }

    public function brittle($job, $data): void
    {
        $key = $this->key((array) $data);
        if (env('DBQ_HEALED') !== '1') {
            throw new RuntimeException('interop: brittle failure for key ' . $key);
        }
        record_run($key);
        $job->delete();
    }

    public function nodelete($job, $data): void
    {
        record_run($this->key((array) $data));
    }

    /** Called by Job::fail() for string jobs when the job is marked failed. */
    public function failed($data, $e, string $uuid = ''): void
    {
        // Nothing: failed_jobs is written by the JobFailed listener in work.php.
    }
}

/**
 * A queued command like `php artisan make:job` produces.
 * Pushed with tries/backoff/timeout set; optionally throws or has retryUntil.
 */
class InteropJob implements ShouldQueue
{
    use InteractsWithQueue, Queueable, SerializesModels;

    /** @var int */
    public $tries = 3;

    /** @var int[] seconds before retry N (Laravel encodes it as "1,5,10") */
    public $backoff = [1, 5, 10];

    /** @var int seconds */
    public $timeout = 30;

    /** @var string ledger key */
    public $key;

    /** @var bool throw from handle() */
    public $shouldThrow = false;

    /** @var int|null when set, retryUntil() returns now + this many seconds */
    public $retryForSeconds = null;

    public function __construct(string $key, bool $shouldThrow = false, ?int $retryForSeconds = null)
    {
        $this->key = $key;
        $this->shouldThrow = $shouldThrow;
        $this->retryForSeconds = $retryForSeconds;
    }

    public function retryUntil()
    {
        // Like the usual `return now()->addMinutes(5);`: evaluated when the payload
        // is created (and again by queue:retry).
        return $this->retryForSeconds === null
            ? null
            : \Illuminate\Support\Carbon::now()->addSeconds($this->retryForSeconds);
    }

    public function handle(): void
    {
        if ($this->shouldThrow) {
            throw new RuntimeException('interop: deliberate object-job failure for key ' . $this->key);
        }
        record_run($this->key);
    }
}
