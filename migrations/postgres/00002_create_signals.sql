-- Signals every worker reads: a restart request (like Laravel's
-- queue:restart) and paused queues (like queue:pause). Laravel keeps these
-- in its cache; dbqueue keeps them where the jobs are.

-- +goose Up
CREATE TABLE IF NOT EXISTS dbqueue_signals (
    name  varchar(255) NOT NULL PRIMARY KEY,
    value bigint NOT NULL
);

-- +goose Down
DROP TABLE IF EXISTS dbqueue_signals;
