-- The jobs and failed_jobs tables with Laravel's names and meanings, wider
-- types (bigint times, integer attempts), and indexes chosen for the claim.

-- +goose Up
CREATE TABLE IF NOT EXISTS jobs (
    id           bigserial    PRIMARY KEY,
    queue        varchar(255) NOT NULL,
    payload      text         NOT NULL,
    attempts     integer      NOT NULL DEFAULT 0,
    reserved_at  bigint       NULL,
    available_at bigint       NOT NULL,
    created_at   bigint       NOT NULL
);

-- Ready jobs in claim order: the claim reads the first n entries of this
-- index and stops, whatever the backlog of delayed or reserved rows.
CREATE INDEX IF NOT EXISTS jobs_queue_ready_idx
    ON jobs (queue, available_at, id) WHERE reserved_at IS NULL;

-- Reservations in age order: expired ones (the holder died) are found
-- without reading ready rows.
CREATE INDEX IF NOT EXISTS jobs_queue_reserved_idx
    ON jobs (queue, reserved_at) WHERE reserved_at IS NOT NULL;

CREATE TABLE IF NOT EXISTS failed_jobs (
    id         bigserial    PRIMARY KEY,
    uuid       varchar(255) NOT NULL UNIQUE,
    connection text         NOT NULL,
    queue      text         NOT NULL,
    payload    text         NOT NULL,
    exception  text         NOT NULL,
    failed_at  timestamptz(0) NOT NULL DEFAULT date_trunc('second', now())
);

CREATE INDEX IF NOT EXISTS failed_jobs_failed_at_idx ON failed_jobs (failed_at);

-- +goose Down
DROP TABLE IF EXISTS failed_jobs;
DROP TABLE IF EXISTS jobs;
