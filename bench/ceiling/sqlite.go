package ceiling

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/dbqueue/dbqueue/bench"
)

// The SQLite loop runs on the same driver (modernc.org/sqlite) and the
// same pragmas as dbqueue's SQLite: WAL, synchronous NORMAL, a busy
// timeout, and BEGIN IMMEDIATE.
const sqliteDDL = `
CREATE TABLE IF NOT EXISTS jobs (
	id           INTEGER PRIMARY KEY AUTOINCREMENT,
	queue        TEXT    NOT NULL,
	payload      TEXT    NOT NULL,
	attempts     INTEGER NOT NULL,
	reserved_at  INTEGER NULL,
	available_at INTEGER NOT NULL,
	created_at   INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS jobs_queue_index ON jobs (queue);
`

// SQLite's clock in Unix seconds.
const sqliteNow = `CAST(strftime('%s','now') AS INTEGER)`

// The claim: one UPDATE … RETURNING of the first B ready rows in id order
// (a write transaction holds the whole database, so no row locks).
const sqliteClaim = `
UPDATE jobs SET reserved_at = ` + sqliteNow + `, attempts = attempts + 1
WHERE id IN (
	SELECT id FROM jobs
	WHERE queue = ? AND reserved_at IS NULL AND available_at <= ` + sqliteNow + `
	ORDER BY id LIMIT ?)
RETURNING id, attempts, payload`

// SQLite is the ceiling loop on SQLite.
type SQLite struct {
	o    Options
	path string
	db   *sql.DB
}

var _ bench.System = (*SQLite)(nil)

// CeilingSQLite is the system's name.
const CeilingSQLite = bench.CeilingPrefix + "sqlite"

// NewSQLite opens the loop's own database file at path (created if
// missing), apart from dbqueue's.
func NewSQLite(ctx context.Context, path string, o Options) (*SQLite, error) {
	o = o.withDefaults()
	params := url.Values{}
	params.Add("_pragma", "busy_timeout(10000)")
	params.Add("_pragma", "journal_mode(WAL)")
	params.Add("_pragma", "synchronous(NORMAL)")
	params.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+params.Encode())
	if err != nil {
		return nil, fmt.Errorf("ceiling-sqlite: %w", err)
	}
	db.SetMaxOpenConns(o.Workers + 2)
	db.SetMaxIdleConns(o.Workers + 2)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("ceiling-sqlite: open %s: %w", path, err)
	}
	return &SQLite{o: o, path: path, db: db}, nil
}

func (s *SQLite) Name() string             { return s.o.name(CeilingSQLite) }
func (s *SQLite) Database() bench.Database { return bench.SQLite }

// Setup creates the table and gives the planner statistics, so the claim
// walks the primary key.
func (s *SQLite) Setup(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, sqliteDDL); err != nil {
		return err
	}
	if err := s.Enqueue(ctx, 20_000); err != nil {
		return err
	}
	if _, err := s.db.ExecContext(ctx, "ANALYZE"); err != nil {
		return err
	}
	return s.Reset(ctx)
}

// Reset empties the table.
func (s *SQLite) Reset(ctx context.Context) error {
	_, err := s.db.ExecContext(ctx, "DELETE FROM jobs")
	return err
}

// Enqueue inserts n rows with multi-row INSERTs of up to 1,000 rows, the
// queue and payload bound once per statement.
func (s *SQLite) Enqueue(ctx context.Context, n int) error {
	for n > 0 {
		k := min(n, insertBatch)
		vals := placeholders(k, func(b *strings.Builder, i int) {
			b.WriteString("(?1, ?" + itoa(i+2) + ", 0, " + sqliteNow + ", " + sqliteNow + ")")
		})
		q := "INSERT INTO jobs (queue, payload, attempts, available_at, created_at) VALUES " + vals
		args := []any{s.o.Queue}
		for _, pl := range payloads(k) {
			args = append(args, pl)
		}
		if _, err := s.db.ExecContext(ctx, q, args...); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// Start starts W workers.
func (s *SQLite) Start(ctx context.Context, n int) (bench.Run, error) {
	return startLoop(ctx, s.o, n, s.work, sqliteRetryable), nil
}

func (s *SQLite) work(ctx context.Context) (int, error) {
	rows, err := s.db.QueryContext(ctx, sqliteClaim, s.o.Queue, s.o.Batch)
	if err != nil {
		return 0, err
	}
	var jobs []claimed
	var payload sql.RawBytes
	for rows.Next() {
		var j claimed
		if err := rows.Scan(&j.id, &j.attempts, &payload); err != nil {
			rows.Close()
			return 0, err
		}
		jobs = append(jobs, j)
	}
	if err := rows.Close(); err != nil {
		return 0, err
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if len(jobs) == 0 {
		return 0, nil
	}
	// The jobs run here: no-ops. Ownership-checked delete, literals inline
	// as dbqueue writes them on SQLite.
	var ids, pairs strings.Builder
	for i, j := range jobs {
		if i > 0 {
			ids.WriteByte(',')
			pairs.WriteByte(',')
		}
		fmt.Fprintf(&ids, "%d", j.id)
		fmt.Fprintf(&pairs, "(%d,%d)", j.id, j.attempts)
	}
	res, err := s.db.ExecContext(ctx, "DELETE FROM jobs WHERE id IN ("+ids.String()+") AND (id, attempts) IN ("+pairs.String()+")")
	if err != nil {
		return 0, err
	}
	if got, _ := res.RowsAffected(); got != int64(len(jobs)) {
		return 0, fmt.Errorf("ownership check: deleted %d of %d claimed jobs", got, len(jobs))
	}
	return len(jobs), nil
}

// sqliteRetryable: the database was busy past the busy timeout.
func sqliteRetryable(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && (se.Code()&0xff == sqlite3.SQLITE_BUSY || se.Code()&0xff == sqlite3.SQLITE_LOCKED)
}

// Close closes the database and removes its file.
func (s *SQLite) Close() error {
	err := s.db.Close()
	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(s.path + suffix)
	}
	return err
}
