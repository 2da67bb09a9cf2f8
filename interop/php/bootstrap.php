<?php
/*
 * Shared setup for the Laravel interop scripts (Laravel 8.x Illuminate
 * components as packaged by Debian under /usr/share/php).
 *
 * Configuration comes only from the environment:
 *   DBQ_DRIVER    pgsql | mysql | sqlite            (required)
 *   DBQ_HOST      pgsql/mysql host                 (default 127.0.0.1)
 *   DBQ_PORT      pgsql/mysql port                 (default 5432 / 3306)
 *   DBQ_DATABASE  database name, or the SQLite file path
 *   DBQ_USERNAME  (default postgres / root)
 *   DBQ_PASSWORD  (default empty)
 *   DBQ_SCHEMA    pgsql search_path schema         (default public)
 *   DBQ_QUEUE     queue name                        (default "default")
 *   DBQ_RETRY_AFTER  DatabaseQueue retry_after      (default 90)
 *   DBQ_RUNNER    value written to interop_runs.runner (default "php")
 *   DBQ_LOG_SQL   if 1, every query Laravel runs is printed to stderr
 *   DBQ_SQLITE_BEGIN  IMMEDIATE (default) or DEFERRED: how SQLite
 *                 transactions begin (see ImmediatePdo)
 *
 * The queue connection is named "database" (as in a stock Laravel app), the
 * database connection "default"; jobs live in `jobs`, failures in
 * `failed_jobs` through DatabaseUuidFailedJobProvider.
 */

declare(strict_types=1);

namespace DbqInterop;

set_include_path('/usr/share/php' . PATH_SEPARATOR . get_include_path());
date_default_timezone_set('UTC'); // Laravel's default app.timezone

require_once 'Illuminate/Container/autoload.php';
require_once 'Illuminate/Events/autoload.php';
require_once 'Illuminate/Database/autoload.php';
require_once 'Illuminate/Bus/autoload.php';
require_once 'Illuminate/Queue/autoload.php';

use Illuminate\Bus\Dispatcher as BusDispatcher;
use Illuminate\Container\Container;
use Illuminate\Contracts\Bus\Dispatcher as BusDispatcherContract;
use Illuminate\Contracts\Bus\QueueingDispatcher;
use Illuminate\Contracts\Debug\ExceptionHandler as ExceptionHandlerContract;
use Illuminate\Contracts\Events\Dispatcher as EventsDispatcherContract;
use Illuminate\Database\Capsule\Manager as DB;
use Illuminate\Events\Dispatcher as EventsDispatcher;
use Illuminate\Queue\Capsule\Manager as Queue;
use Illuminate\Queue\Failed\DatabaseUuidFailedJobProvider;
use Throwable;

const QUEUE_CONNECTION = 'database';
const DB_CONNECTION = 'default';

function env(string $name, ?string $default = null): ?string
{
    $v = getenv($name);
    return ($v === false || $v === '') ? $default : $v;
}

function fail_usage(string $usage, string $msg = ''): void
{
    if ($msg !== '') {
        fwrite(STDERR, $msg . "\n");
    }
    fwrite(STDERR, "usage: " . $usage . "\n");
    exit(2);
}

/** Parse "--key=value" / "--flag" options; returns [options, positional]. */
function parse_args(array $argv): array
{
    $opts = [];
    $pos = [];
    foreach (array_slice($argv, 1) as $a) {
        if (strncmp($a, '--', 2) === 0) {
            $kv = explode('=', substr($a, 2), 2);
            $opts[$kv[0]] = $kv[1] ?? true;
        } else {
            $pos[] = $a;
        }
    }
    return [$opts, $pos];
}

function db_config(): array
{
    $driver = env('DBQ_DRIVER');
    switch ($driver) {
        case 'pgsql':
            return [
                'driver' => 'pgsql',
                'host' => env('DBQ_HOST', '127.0.0.1'),
                'port' => env('DBQ_PORT', '5432'),
                'database' => env('DBQ_DATABASE', 'test'),
                'username' => env('DBQ_USERNAME', 'postgres'),
                'password' => env('DBQ_PASSWORD', ''),
                'charset' => 'utf8',
                'prefix' => '',
                'prefix_indexes' => true,
                'schema' => env('DBQ_SCHEMA', 'public'),
                'sslmode' => 'prefer',
            ];
        case 'mysql':
            return [
                'driver' => 'mysql',
                'host' => env('DBQ_HOST', '127.0.0.1'),
                'port' => env('DBQ_PORT', '3306'),
                'database' => env('DBQ_DATABASE', 'test'),
                'username' => env('DBQ_USERNAME', 'root'),
                'password' => env('DBQ_PASSWORD', ''),
                'unix_socket' => '',
                'charset' => 'utf8mb4',
                'collation' => 'utf8mb4_unicode_ci',
                'prefix' => '',
                'prefix_indexes' => true,
                'strict' => true,
                'engine' => null,
            ];
        case 'sqlite':
            $path = env('DBQ_DATABASE');
            if ($path === null) {
                fwrite(STDERR, "DBQ_DATABASE (SQLite file path) is required\n");
                exit(2);
            }
            return [
                'driver' => 'sqlite',
                'database' => $path,
                'prefix' => '',
                'foreign_key_constraints' => false,
            ];
        default:
            fwrite(STDERR, "DBQ_DRIVER must be pgsql, mysql or sqlite (got " . var_export($driver, true) . ")\n");
            exit(2);
    }
}

/**
 * A PDO whose transactions begin with BEGIN IMMEDIATE (take SQLite's write
 * lock at once, waiting up to the busy timeout) instead of PDO's deferred
 * BEGIN.
 *
 * Laravel 8's DatabaseQueue pops, deletes and releases in transactions that
 * read first and write second. In a deferred transaction the write must
 * upgrade the read lock, and when another connection has written since the
 * read began SQLite refuses at once with SQLITE_BUSY ("database is locked"):
 * the busy timeout cannot wait that out. With a second writer on the file (a
 * Go worker, or another PHP worker) jobs then fail after they ran, or stay
 * reserved until retry_after. Newer Laravel versions offer this as the
 * SQLite connection's `transaction_mode`; on Laravel 8 it takes a connector.
 */
class ImmediatePdo extends \PDO
{
    private bool $inTxn = false;

    public function beginTransaction(): bool
    {
        if ($this->inTxn) {
            throw new \PDOException('There is already an active transaction');
        }
        $this->exec('BEGIN IMMEDIATE');
        $this->inTxn = true;
        return true;
    }

    public function commit(): bool
    {
        if (!$this->inTxn) {
            throw new \PDOException('There is no active transaction');
        }
        $this->exec('COMMIT');
        $this->inTxn = false;
        return true;
    }

    public function rollBack(): bool
    {
        if (!$this->inTxn) {
            throw new \PDOException('There is no active transaction');
        }
        $this->inTxn = false;
        $this->exec('ROLLBACK');
        return true;
    }

    public function inTransaction(): bool
    {
        return $this->inTxn;
    }
}

/** Laravel's SQLite connector, opening ImmediatePdo connections. */
class ImmediateSQLiteConnector extends \Illuminate\Database\Connectors\SQLiteConnector
{
    protected function createPdoConnection($dsn, $username, $password, $options)
    {
        return new ImmediatePdo($dsn, $username, $password, $options);
    }
}

/** Writes reported exceptions to stderr, one line each (Worker::runJob reports job exceptions). */
class StderrExceptionHandler implements ExceptionHandlerContract
{
    public function report(Throwable $e)
    {
        fwrite(STDERR, 'report: ' . get_class($e) . ': ' . $e->getMessage() . "\n");
    }

    public function shouldReport(Throwable $e)
    {
        return true;
    }

    public function render($request, Throwable $e)
    {
        throw $e;
    }

    public function renderForConsole($output, Throwable $e)
    {
        fwrite(STDERR, (string) $e . "\n");
    }
}

/**
 * Builds the container, database capsule, queue capsule, event dispatcher,
 * bus dispatcher, exception handler and failer. Returns the container;
 * useful entries: 'db' (DatabaseManager), 'queue' (QueueManager),
 * 'events', 'queue.failer', ExceptionHandlerContract::class.
 */
function boot(): Container
{
    $container = new Container();
    Container::setInstance($container);
    $container->instance(Container::class, $container);
    $container->instance(\Illuminate\Contracts\Container\Container::class, $container);

    $events = new EventsDispatcher($container);
    $container->instance('events', $events);
    $container->instance(EventsDispatcherContract::class, $events);

    if (strtoupper((string) env('DBQ_SQLITE_BEGIN', 'IMMEDIATE')) === 'IMMEDIATE') {
        // See ImmediateSQLiteConnector: without it, Laravel 8's queue fails
        // with "database is locked" when another process writes at once.
        $container->bind('db.connector.sqlite', ImmediateSQLiteConnector::class);
    }
    $db = new DB($container);
    $db->addConnection(db_config(), DB_CONNECTION);
    $db->setEventDispatcher($events);
    $db->setAsGlobal();
    if (env('DBQ_LOG_SQL') === '1') {
        $events->listen(\Illuminate\Database\Events\QueryExecuted::class, function ($q) {
            fwrite(STDERR, 'sql: ' . $q->sql . ' ' . json_encode($q->bindings, JSON_UNESCAPED_SLASHES) . "\n");
        });
        $events->listen(\Illuminate\Database\Events\TransactionBeginning::class, function () {
            fwrite(STDERR, "sql: BEGIN\n");
        });
        $events->listen(\Illuminate\Database\Events\TransactionCommitted::class, function () {
            fwrite(STDERR, "sql: COMMIT\n");
        });
        $events->listen(\Illuminate\Database\Events\TransactionRolledBack::class, function () {
            fwrite(STDERR, "sql: ROLLBACK\n");
        });
    }
    $container->instance('db', $db->getDatabaseManager());

    $queue = new Queue($container);
    $queue->addConnection([
        'driver' => 'database',
        'connection' => DB_CONNECTION,
        'table' => 'jobs',
        'queue' => env('DBQ_QUEUE', 'default'),
        'retry_after' => (int) env('DBQ_RETRY_AFTER', '90'),
        'after_commit' => false,
    ], QUEUE_CONNECTION);
    $container['config']['queue.default'] = QUEUE_CONNECTION;
    $queue->setAsGlobal();
    $container->instance('queue', $queue->getQueueManager());
    $container->instance(\Illuminate\Contracts\Queue\Factory::class, $queue->getQueueManager());

    $container->singleton(BusDispatcherContract::class, function ($c) {
        return new BusDispatcher($c, function ($connection = null) use ($c) {
            return $c['queue']->connection($connection);
        });
    });
    $container->alias(BusDispatcherContract::class, QueueingDispatcher::class);

    $container->instance(ExceptionHandlerContract::class, new StderrExceptionHandler());

    $container->instance('queue.failer', new DatabaseUuidFailedJobProvider(
        $container['db'], DB_CONNECTION, 'failed_jobs'
    ));

    return $container;
}

/** The interop ledger: one row per handler run. */
function ensure_ledger(): void
{
    $schema = DB::schema();
    if (!$schema->hasTable('interop_runs')) {
        $schema->create('interop_runs', function ($t) {
            $t->string('job_key', 191);
            $t->string('runner', 16);
        });
    }
}

function record_run(string $key): void
{
    DB::connection()->table('interop_runs')->insert([
        'job_key' => $key,
        'runner' => env('DBQ_RUNNER', 'php'),
    ]);
}

require_once __DIR__ . '/Jobs.php';
