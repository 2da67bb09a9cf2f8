-- The job_batches table of Laravel's queue:batches-table stub
-- (Illuminate/Queue/Console/stubs/batches.stub), created by the Laravel 8.83
-- schema builder (Debian php-illuminate-database 8.83.26) with the stub's
-- Blueprint, on 10.11.19-MariaDB-0+deb12u1 (connection charset utf8mb4,
-- collation utf8mb4_unicode_ci, strict).
-- Statements Laravel emitted:
--   create table `job_batches` (`id` varchar(255) not null, `name` varchar(255) not null, `total_jobs` int not null, `pending_jobs` int not null, `failed_jobs` int not null, `failed_job_ids` longtext not null, `options` mediumtext null, `cancelled_at` int null, `created_at` int not null, `finished_at` int null) default character set utf8mb4 collate 'utf8mb4_unicode_ci';
--   alter table `job_batches` add primary key `job_batches_id_primary`(`id`);
-- SHOW CREATE TABLE:
CREATE TABLE `job_batches` (
  `id` varchar(255) NOT NULL,
  `name` varchar(255) NOT NULL,
  `total_jobs` int(11) NOT NULL,
  `pending_jobs` int(11) NOT NULL,
  `failed_jobs` int(11) NOT NULL,
  `failed_job_ids` longtext NOT NULL,
  `options` mediumtext DEFAULT NULL,
  `cancelled_at` int(11) DEFAULT NULL,
  `created_at` int(11) NOT NULL,
  `finished_at` int(11) DEFAULT NULL,
  PRIMARY KEY (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
;
