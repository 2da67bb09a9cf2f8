-- A reservation token that only grows, and columns wide enough to last.
--
-- reservation_token: dbqueue adds one to it on every claim and every
-- give-back of a row, so (id, reservation_token) names one reservation and
-- is never handed out twice, even when a give-back takes an attempt back.
-- Laravel's workers leave it alone; the attempts check still tells their
-- claims apart.
--
-- Laravel's own tables (queue:table) have a tinyint unsigned attempts (a
-- job's 256th claim fails in strict mode and sticks otherwise) and int
-- unsigned times: widened here. Tables dbqueue created are left as they
-- are (MySQL 8 has no ADD COLUMN IF NOT EXISTS, hence the checks).

-- +goose Up
SET @dbq_ddl := IF((SELECT COUNT(*) FROM information_schema.columns
        WHERE table_schema = DATABASE() AND table_name = 'jobs' AND column_name = 'reservation_token') = 0,
    'ALTER TABLE jobs ADD COLUMN reservation_token bigint NOT NULL DEFAULT 0',
    'DO 0');
PREPARE dbq_stmt FROM @dbq_ddl;
EXECUTE dbq_stmt;
DEALLOCATE PREPARE dbq_stmt;

SET @dbq_ddl := IF((SELECT COUNT(*) FROM information_schema.columns
        WHERE table_schema = DATABASE() AND table_name = 'jobs'
          AND ((column_name = 'attempts' AND data_type IN ('tinyint', 'smallint', 'mediumint'))
            OR (column_name IN ('reserved_at', 'available_at', 'created_at') AND data_type <> 'bigint'))) > 0,
    'ALTER TABLE jobs MODIFY attempts int unsigned NOT NULL DEFAULT 0, MODIFY reserved_at bigint NULL, MODIFY available_at bigint NOT NULL, MODIFY created_at bigint NOT NULL',
    'DO 0');
PREPARE dbq_stmt FROM @dbq_ddl;
EXECUTE dbq_stmt;
DEALLOCATE PREPARE dbq_stmt;

-- +goose Down
ALTER TABLE jobs DROP COLUMN reservation_token;
