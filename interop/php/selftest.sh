#!/usr/bin/env bash
# usage: bash interop/php/selftest.sh [pgsql|mysql|sqlite]...   (default: all three)
#
# End-to-end check of the PHP interop scripts alone (Laravel pushes, Laravel's
# worker drains): schema → push string/object/failing jobs → work → ledger rows,
# failed_jobs rows → failed.php retry all → work again → they fail again.
# PostgreSQL runs in schema "dbq_php_selftest" of DBQ_DATABASE (default test),
# MariaDB in database "dbq_php_selftest", SQLite in a temporary file.
# Prints "N passed, N failed".
set -euo pipefail
cd "$(dirname "$0")/../.."

drivers=("$@")
[ ${#drivers[@]} -gt 0 ] || drivers=(pgsql mysql sqlite)

P=interop/php
pass=0
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

check() { # name, php expression over $s (state) that must be true
    local name=$1 expr=$2
    if php -r '$s = json_decode(file_get_contents($argv[1]), true); exit((function($s){ return '"$expr"'; })($s) ? 0 : 1);' "$tmp/state.json"; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAIL [$DBQ_DRIVER] $name" >&2
        cat "$tmp/state.json" >&2
    fi
}

for d in "${drivers[@]}"; do
    unset DBQ_HOST DBQ_PORT DBQ_USERNAME DBQ_PASSWORD DBQ_SCHEMA DBQ_DATABASE
    export DBQ_DRIVER=$d
    case $d in
        pgsql) export DBQ_DATABASE=${PGDATABASE_TEST:-test} DBQ_SCHEMA=dbq_php_selftest ;;
        mysql) export DBQ_DATABASE=dbq_php_selftest ;;
        sqlite) export DBQ_DATABASE=$tmp/selftest.sqlite ;;
        *) echo "unknown driver $d" >&2; exit 2 ;;
    esac
    echo "== $d"
    php $P/schema.php >/dev/null
    php $P/push.php string 5 --key=s >/dev/null
    php $P/push.php object 3 --key=o >/dev/null
    php $P/push.php string 1 --key=flaky --job='DbqInterop\Recorder@flaky' --data='{"succeed_on":2}' >/dev/null
    php $P/push.php string 1 --key=bad --job='DbqInterop\Recorder@fail' >/dev/null
    php $P/push.php object 1 --key=badobj --throw --tries=2 --backoff=0 >/dev/null
    php $P/push.php string 1 --key=later --delay=3600 >/dev/null

    php $P/work.php --tries=3 --max-time=60 >"$tmp/work1.out" 2>"$tmp/work1.err"
    php $P/state.php >"$tmp/state.json"
    check "ledger after first run" 'array_map(fn($r) => $r["job_key"], $s["interop_runs"]) === ["flaky","o-1","o-2","o-3","s-1","s-2","s-3","s-4","s-5"]'
    check "only the delayed job left" 'count($s["jobs"]) === 1 && $s["jobs"][0]["attempts"] === 0 && $s["jobs"][0]["reserved_at"] === null'
    check "two failed jobs" 'count($s["failed_jobs"]) === 2 && $s["failed_jobs"][0]["connection"] === "database" && $s["failed_jobs"][0]["queue"] === "default"'

    php $P/failed.php list >"$tmp/list.json"
    if php -r '$l = json_decode(file_get_contents($argv[1]), true); exit(count($l) === 2 && strpos($l[0]["exception"], "RuntimeException: interop:") === 0 ? 0 : 1);' "$tmp/list.json"; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1)); echo "FAIL [$d] failed.php list" >&2; cat "$tmp/list.json" >&2
    fi

    php $P/failed.php retry all >/dev/null
    php $P/state.php >"$tmp/state.json"
    check "retry moved both back" 'count($s["jobs"]) === 3 && count($s["failed_jobs"]) === 0 && max(array_map(fn($j) => $j["attempts"], $s["jobs"])) === 0'

    php $P/work.php --tries=3 --max-time=60 >"$tmp/work2.out" 2>"$tmp/work2.err"
    php $P/state.php >"$tmp/state.json"
    check "retried jobs failed again" 'count($s["jobs"]) === 1 && count($s["failed_jobs"]) === 2 && count($s["interop_runs"]) === 9'
done

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
