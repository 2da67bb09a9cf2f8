<?php
/*
 * usage: php interop/php/work.php [--queue=Q] [--sleep=S] [--tries=N] [--backoff=S]
 *            [--timeout=S] [--max-jobs=N] [--max-time=S] [--memory=MB] [--rest=S]
 *            [--no-stop-when-empty] [--once]
 *
 * Runs Laravel 8's own Illuminate\Queue\Worker (daemon loop, or runNextJob
 * with --once) on the "database" connection, like `php artisan queue:work
 * database --stop-when-empty`. Each option can also come from the env as
 * DBQ_WORK_<OPTION> (upper case, "-" → "_"), e.g. DBQ_WORK_MAX_TIME=20.
 * Defaults: sleep 0.2, tries 1, backoff 0, timeout 60, max-jobs 0 (no limit),
 * max-time 120 (a safety bound; 0 = none), memory 512, stop-when-empty on.
 *
 * Note that with stop-when-empty the worker stops as soon as a pop finds no
 * job that is available *now*: a job released with a backoff (or a delayed
 * job) is left in the table. Use --no-stop-when-empty --max-time=S to wait
 * for such jobs.
 *
 * Mirrors WorkCommand: JobFailed is logged to failed_jobs through the
 * failer; prints "Processing/Processed/Failed: <id> <name>" lines on stdout.
 * Exits with the worker's status (0 on a normal stop). When a job outruns its
 * timeout (payload "timeout", else --timeout) Laravel's SIGALRM handler fails
 * the job if it is out of tries and then SIGKILLs this process: exit 137, the
 * job row left reserved until retry_after.
 */

declare(strict_types=1);

namespace DbqInterop;

require __DIR__ . '/bootstrap.php';

use Illuminate\Contracts\Debug\ExceptionHandler;
use Illuminate\Queue\Events\JobFailed;
use Illuminate\Queue\Events\JobProcessed;
use Illuminate\Queue\Events\JobProcessing;
use Illuminate\Queue\Worker;
use Illuminate\Queue\WorkerOptions;

const USAGE = 'php interop/php/work.php [--queue=Q] [--sleep=S] [--tries=N] [--backoff=S] [--timeout=S] [--max-jobs=N] [--max-time=S] [--memory=MB] [--rest=S] [--no-stop-when-empty] [--once]';

[$opts, $pos] = parse_args($argv);
if ($pos) {
    fail_usage(USAGE);
}
$known = ['queue', 'sleep', 'tries', 'backoff', 'timeout', 'max-jobs', 'max-time', 'memory', 'rest', 'no-stop-when-empty', 'once', 'name'];
foreach (array_keys($opts) as $k) {
    if (!in_array($k, $known, true)) {
        fail_usage(USAGE, "work: unknown option --$k");
    }
}

$opt = function (string $name, $default) use ($opts) {
    if (array_key_exists($name, $opts)) {
        return $opts[$name];
    }
    $e = env('DBQ_WORK_' . strtoupper(str_replace('-', '_', $name)));
    return $e ?? $default;
};
$num = function ($v) {
    return is_numeric($v) ? $v + 0 : 0;
};
$flag = function ($v): bool {
    return $v === true || in_array(strtolower((string) $v), ['1', 'true', 'yes', 'on'], true);
};

$app = boot();
ensure_ledger();

$events = $app['events'];
$connection = QUEUE_CONNECTION;
$queue = (string) $opt('queue', env('DBQ_QUEUE', 'default'));

$say = function (string $status, $job) {
    echo $status, ': ', $job->getJobId(), ' ', $job->resolveName(), "\n";
};
$events->listen(JobProcessing::class, function ($event) use ($say) {
    $say('Processing', $event->job);
});
$events->listen(JobProcessed::class, function ($event) use ($say) {
    $say('Processed', $event->job);
});
// WorkCommand::listenForEvents + logFailedJob
$events->listen(JobFailed::class, function ($event) use ($app, $say) {
    $say('Failed', $event->job);
    $app['queue.failer']->log(
        $event->connectionName,
        $event->job->getQueue(),
        $event->job->getRawBody(),
        $event->exception
    );
});

$options = new WorkerOptions(
    (string) $opt('name', 'default'),
    $num($opt('backoff', 0)),
    $num($opt('memory', 512)),
    $num($opt('timeout', 60)),
    $num($opt('sleep', 0.2)),
    $num($opt('tries', 1)),
    true,                                    // force (no maintenance mode here)
    !$flag($opt('no-stop-when-empty', false)),
    $num($opt('max-jobs', 0)),
    $num($opt('max-time', 120)),
    $num($opt('rest', 0))
);

$worker = new Worker(
    $app['queue'],
    $events,
    $app[ExceptionHandler::class],
    function () {
        return false; // isDownForMaintenance
    }
);
$worker->setName($options->name);

if ($flag($opt('once', false))) {
    $worker->runNextJob($connection, $queue, $options);
    exit(0);
}

$status = $worker->daemon($connection, $queue, $options);
exit((int) $status);
