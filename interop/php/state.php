<?php
/*
 * usage: php interop/php/state.php
 *
 * Prints the queue state as JSON, read through Laravel's query builder:
 *   {"jobs": [{id, queue, attempts, reserved_at, available_at, created_at, payload_uuid}],
 *    "failed_jobs": [{id, uuid, connection, queue, failed_at}],
 *    "interop_runs": [{job_key, runner}]}   (ledger sorted by job_key)
 * For debugging and for interop/php/selftest.sh.
 */

declare(strict_types=1);

namespace DbqInterop;

require __DIR__ . '/bootstrap.php';

use Illuminate\Database\Capsule\Manager as DB;

boot();
$schema = DB::schema();
$db = DB::connection();

$out = ['jobs' => [], 'failed_jobs' => [], 'interop_runs' => []];
if ($schema->hasTable('jobs')) {
    foreach ($db->table('jobs')->orderBy('id')->get() as $r) {
        $out['jobs'][] = [
            'id' => (int) $r->id,
            'queue' => $r->queue,
            'attempts' => (int) $r->attempts,
            'reserved_at' => $r->reserved_at === null ? null : (int) $r->reserved_at,
            'available_at' => (int) $r->available_at,
            'created_at' => (int) $r->created_at,
            'payload_uuid' => json_decode($r->payload, true)['uuid'] ?? null,
        ];
    }
}
if ($schema->hasTable('failed_jobs')) {
    foreach ($db->table('failed_jobs')->orderBy('id')->get() as $r) {
        $out['failed_jobs'][] = [
            'id' => (int) $r->id,
            'uuid' => $r->uuid,
            'connection' => $r->connection,
            'queue' => $r->queue,
            'failed_at' => (string) $r->failed_at,
        ];
    }
}
if ($schema->hasTable('interop_runs')) {
    foreach ($db->table('interop_runs')->orderBy('job_key')->orderBy('runner')->get() as $r) {
        $out['interop_runs'][] = ['job_key' => $r->job_key, 'runner' => $r->runner];
    }
}
echo json_encode($out, JSON_PRETTY_PRINT | JSON_UNESCAPED_SLASHES), "\n";
