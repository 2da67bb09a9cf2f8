-- Tables created by Laravel 8.83 (Debian php-illuminate-database 8.83.26) schema builder
-- from the queue:table / queue:failed-table stubs, via interop/php/schema.php, on SQLite 3.40.1.
-- Statements Laravel emitted:
--   drop table if exists "jobs";
--   drop table if exists "failed_jobs";
--   create table "jobs" ("id" integer not null primary key autoincrement, "queue" varchar not null, "payload" text not null, "attempts" integer not null, "reserved_at" integer, "available_at" integer not null, "created_at" integer not null);
--   create index "jobs_queue_index" on "jobs" ("queue");
--   create table "failed_jobs" ("id" integer not null primary key autoincrement, "uuid" varchar not null, "connection" text not null, "queue" text not null, "payload" text not null, "exception" text not null, "failed_at" datetime default CURRENT_TIMESTAMP not null);
--   create unique index "failed_jobs_uuid_unique" on "failed_jobs" ("uuid");
-- sqlite3 .schema:
CREATE TABLE IF NOT EXISTS "jobs" ("id" integer not null primary key autoincrement, "queue" varchar not null, "payload" text not null, "attempts" integer not null, "reserved_at" integer, "available_at" integer not null, "created_at" integer not null);
CREATE TABLE sqlite_sequence(name,seq);
CREATE INDEX "jobs_queue_index" on "jobs" ("queue");
CREATE TABLE IF NOT EXISTS "failed_jobs" ("id" integer not null primary key autoincrement, "uuid" varchar not null, "connection" text not null, "queue" text not null, "payload" text not null, "exception" text not null, "failed_at" datetime default CURRENT_TIMESTAMP not null);
CREATE UNIQUE INDEX "failed_jobs_uuid_unique" on "failed_jobs" ("uuid");
