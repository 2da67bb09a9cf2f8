package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/bench/dbqueueq"
)

// dbStats reads what a soak samples from the database beside the queue:
// the jobs table's size and whatever keeps it from growing (dead tuples
// and autovacuum on PostgreSQL, the purge's history list on MariaDB, the
// file and its WAL on SQLite), and the log written per job done.
type dbStats struct {
	names []string
	// read returns one value per name. done is the jobs done since the
	// previous read; per-job columns divide the log written since then by
	// it.
	read func(ctx context.Context, done int64) ([]float64, error)
}

const bytesPerMiB = 1 << 20

func statsFor(sys *dbqueueq.System, sqlitePath string) dbStats {
	db := sys.Admin()
	switch sys.Dialect() {
	case dbqueue.Postgres:
		return pgSoakStats(db)
	case dbqueue.MySQL:
		return mariadbSoakStats(db)
	default:
		return sqliteSoakStats(db, sqlitePath)
	}
}

// perJob turns a cumulative byte counter into bytes per job done since
// the previous call; the first call only sets the base.
type perJobCounter struct {
	prev float64
	set  bool
}

func (p *perJobCounter) next(now float64, done int64) float64 {
	defer func() { p.prev, p.set = now, true }()
	if !p.set || done <= 0 {
		return 0
	}
	return (now - p.prev) / float64(done)
}

func pgSoakStats(db *sql.DB) dbStats {
	var wal perJobCounter
	return dbStats{
		names: []string{"table_mib", "index_mib", "live_rows", "dead_rows", "autovacuums", "wal_bytes_per_job"},
		read: func(ctx context.Context, done int64) ([]float64, error) {
			var table, index, live, dead, autovac, lsn float64
			err := db.QueryRowContext(ctx, `SELECT pg_table_size('jobs'), pg_indexes_size('jobs'),
				coalesce(n_live_tup, 0), coalesce(n_dead_tup, 0), coalesce(autovacuum_count, 0),
				(pg_current_wal_lsn() - '0/0'::pg_lsn)::float8
				FROM pg_stat_user_tables WHERE relid = 'jobs'::regclass`).Scan(&table, &index, &live, &dead, &autovac, &lsn)
			if err != nil {
				return nil, fmt.Errorf("postgres statistics: %w", err)
			}
			return []float64{table / bytesPerMiB, index / bytesPerMiB, live, dead, autovac, wal.next(lsn, done)}, nil
		},
	}
}

func mariadbSoakStats(db *sql.DB) dbStats {
	var redo, binlog perJobCounter
	return dbStats{
		names: []string{"file_mib", "data_mib", "index_mib", "free_mib", "history_list", "redo_bytes_per_job", "binlog_bytes_per_job"},
		read: func(ctx context.Context, done int64) ([]float64, error) {
			var file, data, index, free, lsn, history float64
			var name string
			if err := db.QueryRowContext(ctx, `SELECT FILE_SIZE FROM information_schema.INNODB_SYS_TABLESPACES
				WHERE NAME = CONCAT(DATABASE(), '/jobs')`).Scan(&file); err != nil {
				return nil, fmt.Errorf("mariadb tablespace: %w", err)
			}
			if err := db.QueryRowContext(ctx, `SELECT DATA_LENGTH, INDEX_LENGTH, DATA_FREE FROM information_schema.TABLES
				WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'jobs'`).Scan(&data, &index, &free); err != nil {
				return nil, fmt.Errorf("mariadb table: %w", err)
			}
			if err := db.QueryRowContext(ctx, `SHOW GLOBAL STATUS LIKE 'Innodb_lsn_current'`).Scan(&name, &lsn); err != nil {
				return nil, fmt.Errorf("mariadb lsn: %w", err)
			}
			if err := db.QueryRowContext(ctx, `SHOW GLOBAL STATUS LIKE 'Innodb_history_list_length'`).Scan(&name, &history); err != nil {
				return nil, fmt.Errorf("mariadb history list: %w", err)
			}
			bin, err := binlogBytes(ctx, db)
			if err != nil {
				return nil, err
			}
			return []float64{file / bytesPerMiB, data / bytesPerMiB, index / bytesPerMiB, free / bytesPerMiB, history, redo.next(lsn, done), binlog.next(bin, done)}, nil
		},
	}
}

// binlogBytes is the size of every binary log (0 with log_bin off).
func binlogBytes(ctx context.Context, db *sql.DB) (float64, error) {
	var on int
	if err := db.QueryRowContext(ctx, "SELECT @@log_bin").Scan(&on); err != nil || on == 0 {
		return 0, err
	}
	rows, err := db.QueryContext(ctx, "SHOW BINARY LOGS")
	if err != nil {
		return 0, fmt.Errorf("mariadb binary logs: %w", err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return 0, err
	}
	var total float64
	for rows.Next() {
		vals := make([]any, len(cols))
		var name string
		var size float64
		vals[0], vals[1] = &name, &size
		for i := 2; i < len(cols); i++ {
			vals[i] = new(sql.RawBytes)
		}
		if err := rows.Scan(vals...); err != nil {
			return 0, err
		}
		total += size
	}
	return total, rows.Err()
}

func sqliteSoakStats(db *sql.DB, path string) dbStats {
	return dbStats{
		names: []string{"file_mib", "wal_mib", "free_pages"},
		read: func(ctx context.Context, _ int64) ([]float64, error) {
			var free float64
			if err := db.QueryRowContext(ctx, "PRAGMA freelist_count").Scan(&free); err != nil {
				return nil, fmt.Errorf("sqlite freelist: %w", err)
			}
			return []float64{fileMiB(path), fileMiB(path + "-wal"), free}, nil
		},
	}
}

func fileMiB(path string) float64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return float64(fi.Size()) / bytesPerMiB
}

// sqlitePath is the file a sqlite: DSN names (before any ?options).
func sqlitePath(dsn string) string {
	p := strings.TrimPrefix(strings.TrimPrefix(dsn, "sqlite://"), "sqlite:")
	p, _, _ = strings.Cut(p, "?")
	return strings.TrimPrefix(p, "file:")
}
