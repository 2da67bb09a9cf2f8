-- The jobs and failed_jobs tables with Laravel's names and meanings, wider
-- types (bigint times, integer attempts), and an index whose order is the
-- claim's order, so InnoDB locks only the rows it hands out.

-- +goose Up
CREATE TABLE IF NOT EXISTS jobs (
    id           bigint unsigned NOT NULL AUTO_INCREMENT,
    queue        varchar(255)    NOT NULL,
    payload      longtext        NOT NULL,
    attempts     int unsigned    NOT NULL DEFAULT 0,
    reserved_at  bigint          NULL,
    available_at bigint          NOT NULL,
    created_at   bigint          NOT NULL,
    PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- The claim's index, added apart from CREATE TABLE so that a jobs table
-- Laravel created gets it too (MySQL 8 has no CREATE INDEX IF NOT EXISTS).
SET @dbq_missing := (SELECT COUNT(*) = 0 FROM information_schema.statistics
    WHERE table_schema = DATABASE() AND table_name = 'jobs'
      AND index_name = 'jobs_queue_reserved_available_idx');
SET @dbq_ddl := IF(@dbq_missing,
    'CREATE INDEX jobs_queue_reserved_available_idx ON jobs (queue, reserved_at, available_at)',
    'DO 0');
PREPARE dbq_stmt FROM @dbq_ddl;
EXECUTE dbq_stmt;
DEALLOCATE PREPARE dbq_stmt;

CREATE TABLE IF NOT EXISTS failed_jobs (
    id         bigint unsigned NOT NULL AUTO_INCREMENT,
    uuid       varchar(255)    NOT NULL,
    connection text            NOT NULL,
    queue      text            NOT NULL,
    payload    longtext        NOT NULL,
    exception  longtext        NOT NULL,
    failed_at  timestamp       NOT NULL DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (id),
    UNIQUE KEY failed_jobs_uuid_unique (uuid),
    KEY failed_jobs_failed_at_idx (failed_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE IF EXISTS failed_jobs;
DROP TABLE IF EXISTS jobs;
