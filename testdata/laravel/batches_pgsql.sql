-- The job_batches table of Laravel's queue:batches-table stub
-- (Illuminate/Queue/Console/stubs/batches.stub), created by the Laravel 8.83
-- schema builder (Debian php-illuminate-database 8.83.26) with the stub's
-- Blueprint, on PostgreSQL 15.
-- Statements Laravel emitted:
--   create table "job_batches" ("id" varchar(255) not null, "name" varchar(255) not null, "total_jobs" integer not null, "pending_jobs" integer not null, "failed_jobs" integer not null, "failed_job_ids" text not null, "options" text null, "cancelled_at" integer null, "created_at" integer not null, "finished_at" integer null);
--   alter table "job_batches" add primary key ("id");
-- pg_dump -s -t job_batches --no-owner --no-privileges:
CREATE TABLE job_batches (
    id character varying(255) NOT NULL,
    name character varying(255) NOT NULL,
    total_jobs integer NOT NULL,
    pending_jobs integer NOT NULL,
    failed_jobs integer NOT NULL,
    failed_job_ids text NOT NULL,
    options text,
    cancelled_at integer,
    created_at integer NOT NULL,
    finished_at integer
);
ALTER TABLE ONLY job_batches
    ADD CONSTRAINT job_batches_pkey PRIMARY KEY (id);
