<?php
/*
 * usage: php interop/php/push.php string|object [N] [options]
 *
 * Pushes N (default 1) jobs through Laravel's DatabaseQueue and prints the
 * new jobs.id values, one per line.
 *
 *   string  Queue::push($job, $data):
 *             --job=NAME@method  (env DBQ_JOB,  default DbqInterop\Recorder@handle)
 *             --data=JSON        (env DBQ_DATA, default {})  must be a JSON object
 *   object  Queue::push(new DbqInterop\InteropJob($key, ...)):
 *             --tries=N --backoff=1,5,10 --timeout=S   (defaults 3, [1,5,10], 30)
 *             --throw            handle() throws
 *             --retry-for=S      retryUntil() = now + S
 *   common:
 *             --key=K            ledger key (env DBQ_KEY; else data.key; else "php").
 *                                With N > 1 job i (1-based) gets "K-i"; with N = 1, "K"
 *                                (when no key is given at all: "php-i" always).
 *             --delay=S          Queue::later(S, ...)
 *             --queue=Q          queue name (default DBQ_QUEUE or "default")
 */

declare(strict_types=1);

namespace DbqInterop;

require __DIR__ . '/bootstrap.php';

use Illuminate\Queue\Capsule\Manager as Queue;

const USAGE = 'php interop/php/push.php string|object [N] [--job=Class@method] [--data=JSON] [--key=K] [--delay=S] [--queue=Q] [--tries=N] [--backoff=a,b,c] [--timeout=S] [--throw] [--retry-for=S]';

[$opts, $pos] = parse_args($argv);
$mode = $pos[0] ?? null;
$n = isset($pos[1]) ? (int) $pos[1] : 1;
if (!in_array($mode, ['string', 'object'], true) || $n < 1 || count($pos) > 2) {
    fail_usage(USAGE);
}

boot();

$queueName = isset($opts['queue']) ? (string) $opts['queue'] : null;
$delay = isset($opts['delay']) ? (int) $opts['delay'] : null;

$data = [];
if ($mode === 'string') {
    $raw = $opts['data'] ?? env('DBQ_DATA', '{}');
    $data = json_decode((string) $raw, true);
    if (!is_array($data)) {
        fail_usage(USAGE, 'push: --data must be a JSON object');
    }
}

$base = $opts['key'] ?? env('DBQ_KEY') ?? (isset($data['key']) ? (string) $data['key'] : null);
$keyFor = function (int $i) use ($base, $n): string {
    if ($base === null || $base === true) {
        return "php-$i";
    }
    return $n === 1 ? (string) $base : "$base-$i";
};

for ($i = 1; $i <= $n; $i++) {
    $key = $keyFor($i);
    if ($mode === 'string') {
        $jobName = (string) ($opts['job'] ?? env('DBQ_JOB', 'DbqInterop\\Recorder@handle'));
        $payloadData = $data;
        $payloadData['key'] = $key;
        $job = $jobName;
    } else {
        $job = new InteropJob(
            $key,
            isset($opts['throw']),
            isset($opts['retry-for']) ? (int) $opts['retry-for'] : null
        );
        if (isset($opts['tries'])) {
            $job->tries = (int) $opts['tries'];
        }
        if (isset($opts['backoff'])) {
            $parts = array_map('intval', explode(',', (string) $opts['backoff']));
            $job->backoff = count($parts) === 1 ? $parts[0] : $parts;
        }
        if (isset($opts['timeout'])) {
            $job->timeout = (int) $opts['timeout'];
        }
        $payloadData = '';
    }

    $id = $delay !== null
        ? Queue::later($delay, $job, $payloadData, $queueName)
        : Queue::push($job, $payloadData, $queueName);
    echo $id, "\n";
}
