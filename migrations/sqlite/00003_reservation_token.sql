-- A reservation token that only grows: dbqueue adds one to it on every
-- claim and every give-back of a row, so (id, reservation_token) names one
-- reservation and is never handed out twice, even when a give-back takes
-- an attempt back. Laravel's workers leave it alone; the attempts check
-- still tells their claims apart. SQLite's INTEGER is 64-bit already.

-- +goose Up
ALTER TABLE jobs ADD COLUMN reservation_token INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE jobs DROP COLUMN reservation_token;
