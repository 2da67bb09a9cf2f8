-- A reservation token that only grows, and columns wide enough to last.
--
-- reservation_token: dbqueue adds one to it on every claim and every
-- give-back of a row, so (id, reservation_token) names one reservation and
-- is never handed out twice, even when a give-back takes an attempt back.
-- Laravel's workers leave it alone; the attempts check still tells their
-- claims apart.
--
-- Laravel's own tables (queue:table) have a smallint attempts and integer
-- times: widened here, in place (a no-op on tables dbqueue created).

-- +goose Up
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS reservation_token bigint NOT NULL DEFAULT 0;
ALTER TABLE jobs
    ALTER COLUMN attempts TYPE integer,
    ALTER COLUMN reserved_at TYPE bigint,
    ALTER COLUMN available_at TYPE bigint,
    ALTER COLUMN created_at TYPE bigint;

-- +goose Down
ALTER TABLE jobs DROP COLUMN IF EXISTS reservation_token;
