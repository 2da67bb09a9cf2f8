<?php
/*
 * usage: php interop/php/schema.php [--no-ledger]
 *
 * Drops and re-creates `jobs` and `failed_jobs` exactly as Laravel 8's
 * migration stubs do (queue:table / queue:failed-table), plus the interop
 * ledger `interop_runs` (unless --no-ledger). Creates the PostgreSQL schema
 * (DBQ_SCHEMA), the MariaDB database (DBQ_DATABASE) or the SQLite file if
 * missing.
 */

declare(strict_types=1);

namespace DbqInterop;

require __DIR__ . '/bootstrap.php';

use Illuminate\Database\Capsule\Manager as DB;
use Illuminate\Database\Schema\Blueprint;
use PDO;

const USAGE = 'php interop/php/schema.php [--no-ledger]';

[$opts, $pos] = parse_args($argv);
if ($pos) {
    fail_usage(USAGE);
}

// Make sure the container (schema / database / file) exists before Laravel connects.
$cfg = db_config();
switch ($cfg['driver']) {
    case 'sqlite':
        if ($cfg['database'] !== ':memory:' && !file_exists($cfg['database'])) {
            touch($cfg['database']);
        }
        break;
    case 'mysql':
        $pdo = new PDO(
            "mysql:host={$cfg['host']};port={$cfg['port']}",
            $cfg['username'], $cfg['password'],
            [PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION]
        );
        $pdo->exec('CREATE DATABASE IF NOT EXISTS `' . str_replace('`', '``', $cfg['database']) . '`');
        $pdo = null;
        break;
}

boot();

if ($cfg['driver'] === 'pgsql') {
    DB::connection()->statement('CREATE SCHEMA IF NOT EXISTS "' . str_replace('"', '""', $cfg['schema']) . '"');
}

$schema = DB::schema();

$schema->dropIfExists('jobs');
$schema->dropIfExists('failed_jobs');

// Illuminate/Queue/Console/stubs/jobs.stub
$schema->create('jobs', function (Blueprint $table) {
    $table->bigIncrements('id');
    $table->string('queue')->index();
    $table->longText('payload');
    $table->unsignedTinyInteger('attempts');
    $table->unsignedInteger('reserved_at')->nullable();
    $table->unsignedInteger('available_at');
    $table->unsignedInteger('created_at');
});

// Illuminate/Queue/Console/stubs/failed_jobs.stub
$schema->create('failed_jobs', function (Blueprint $table) {
    $table->id();
    $table->string('uuid')->unique();
    $table->text('connection');
    $table->text('queue');
    $table->longText('payload');
    $table->longText('exception');
    $table->timestamp('failed_at')->useCurrent();
});

if (!isset($opts['no-ledger'])) {
    $schema->dropIfExists('interop_runs');
    ensure_ledger();
}

echo "ok\n";
