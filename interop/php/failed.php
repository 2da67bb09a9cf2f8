<?php
/*
 * usage: php interop/php/failed.php list
 *        php interop/php/failed.php retry <uuid>... | all
 *        php interop/php/failed.php forget <uuid>
 *
 * list   prints the failed jobs (newest first, as the failer's all() returns
 *        them) as a JSON array of {uuid, connection, queue, exception, failed_at},
 *        exception being the first line of the stored text.
 * retry  does what Laravel 8's `queue:retry` (RetryCommand) does for each uuid:
 *        find → JobRetryRequested event → pushRaw(refreshRetryUntil(resetAttempts(
 *        payload)), queue) on the failed job's own connection → forget. Prints
 *        "<uuid> <new jobs.id>" per job; exits 1 if a uuid was not found.
 * forget deletes the failed_jobs row (queue:forget).
 */

declare(strict_types=1);

namespace DbqInterop;

require __DIR__ . '/bootstrap.php';

use DateTimeInterface;
use Illuminate\Contracts\Encryption\Encrypter;
use Illuminate\Queue\Events\JobRetryRequested;
use Illuminate\Support\Arr;
use Illuminate\Support\Str;
use RuntimeException;

const USAGE = 'php interop/php/failed.php list | retry <uuid>...|all | forget <uuid>';

[$opts, $pos] = parse_args($argv);
$cmd = $pos[0] ?? null;

$app = boot();
$failer = $app['queue.failer'];

// RetryCommand::resetAttempts
function reset_attempts(string $payload): string
{
    $payload = json_decode($payload, true);
    if (isset($payload['attempts'])) {
        $payload['attempts'] = 0;
    }
    return json_encode($payload);
}

// RetryCommand::refreshRetryUntil
function refresh_retry_until($app, string $payload): string
{
    $payload = json_decode($payload, true);
    if (!isset($payload['data']['command'])) {
        return json_encode($payload);
    }
    if (Str::startsWith($payload['data']['command'], 'O:')) {
        $instance = unserialize($payload['data']['command']);
    } elseif ($app->bound(Encrypter::class)) {
        $instance = unserialize($app->make(Encrypter::class)->decrypt($payload['data']['command']));
    }
    if (!isset($instance)) {
        throw new RuntimeException('Unable to extract job payload.');
    }
    if (is_object($instance) && !$instance instanceof \__PHP_Incomplete_Class && method_exists($instance, 'retryUntil')) {
        $retryUntil = $instance->retryUntil();
        $payload['retryUntil'] = $retryUntil instanceof DateTimeInterface
            ? $retryUntil->getTimestamp()
            : $retryUntil;
    }
    return json_encode($payload);
}

switch ($cmd) {
    case 'list':
        $out = [];
        foreach ($failer->all() as $r) {
            $out[] = [
                'uuid' => $r->id, // DatabaseUuidFailedJobProvider::all() puts uuid in id
                'connection' => $r->connection,
                'queue' => $r->queue,
                'exception' => strtok((string) $r->exception, "\n"),
                'failed_at' => (string) $r->failed_at,
            ];
        }
        echo json_encode($out, JSON_PRETTY_PRINT | JSON_UNESCAPED_SLASHES), "\n";
        exit(0);

    case 'retry':
        $ids = array_slice($pos, 1);
        if (!$ids) {
            fail_usage(USAGE);
        }
        if (count($ids) === 1 && $ids[0] === 'all') {
            $ids = Arr::pluck($failer->all(), 'id');
        }
        $rc = 0;
        foreach ($ids as $id) {
            $job = $failer->find($id);
            if (is_null($job)) {
                fwrite(STDERR, "Unable to find failed job with ID [{$id}].\n");
                $rc = 1;
                continue;
            }
            $app['events']->dispatch(new JobRetryRequested($job));
            $newId = $app['queue']->connection($job->connection)->pushRaw(
                refresh_retry_until($app, reset_attempts($job->payload)), $job->queue
            );
            $failer->forget($id);
            echo $id, ' ', $newId, "\n";
        }
        exit($rc);

    case 'forget':
        if (count($pos) !== 2) {
            fail_usage(USAGE);
        }
        if (!$failer->forget($pos[1])) {
            fwrite(STDERR, "No failed job matches the given ID.\n");
            exit(1);
        }
        echo "ok\n";
        exit(0);

    default:
        fail_usage(USAGE);
}
