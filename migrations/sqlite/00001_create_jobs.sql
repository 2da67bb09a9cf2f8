-- The jobs and failed_jobs tables with Laravel's names and meanings.
-- AUTOINCREMENT keeps SQLite from reusing the id of a deleted last row, so
-- (id, attempts) always names one reservation.

-- +goose Up
CREATE TABLE IF NOT EXISTS jobs (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    queue        TEXT    NOT NULL,
    payload      TEXT    NOT NULL,
    attempts     INTEGER NOT NULL DEFAULT 0,
    reserved_at  INTEGER NULL,
    available_at INTEGER NOT NULL,
    created_at   INTEGER NOT NULL
);

CREATE INDEX IF NOT EXISTS jobs_queue_ready_idx
    ON jobs (queue, available_at, id) WHERE reserved_at IS NULL;

CREATE INDEX IF NOT EXISTS jobs_queue_reserved_idx
    ON jobs (queue, reserved_at) WHERE reserved_at IS NOT NULL;

CREATE TABLE IF NOT EXISTS failed_jobs (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid       TEXT    NOT NULL UNIQUE,
    connection TEXT    NOT NULL,
    queue      TEXT    NOT NULL,
    payload    TEXT    NOT NULL,
    exception  TEXT    NOT NULL,
    failed_at  DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP
);

CREATE INDEX IF NOT EXISTS failed_jobs_failed_at_idx ON failed_jobs (failed_at);

-- +goose Down
DROP TABLE IF EXISTS failed_jobs;
DROP TABLE IF EXISTS jobs;
