// Package migrations installs dbqueue's tables (jobs, failed_jobs) with
// goose's Provider API: SQL embedded per dialect, no global state, its own
// version table (dbqueue_migrations) so it never touches an application's
// goose_db_version, and a lock so two processes migrating at once is safe.
//
// The SQL is a template per dialect, rendered for the table names given
// WithTables, so several dbqueue installations can share one database.
// FS hands the rendered files to other migration tools (goose,
// golang-migrate, Atlas); see docs/migrations.md.
package migrations

import (
	"context"
	"crypto/rand"
	"database/sql"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// files holds the SQL templates, rendered by render.
//
//go:embed postgres/*.sql.tmpl mysql/*.sql.tmpl sqlite/*.sql.tmpl
var files embed.FS

// VersionTable is the table where dbqueue records the applied migrations
// of the default table set (Tables.VersionTable names the others').
const VersionTable = "dbqueue_migrations"

// lockID is the PostgreSQL advisory lock key and MySQL lock row id
// (crc32 of "dbqueue"), distinct from goose's default so an application's
// own goose migrations never wait on dbqueue's.
const lockID = 3169432961

// Result is what one migration did.
type Result = goose.MigrationResult

// Status is one migration's state.
type Status = goose.MigrationStatus

// Migrator runs dbqueue's migrations on one database.
type Migrator struct {
	provider *goose.Provider
	db       *sql.DB
	dialect  dbqueue.Dialect
	tables   Tables
	logger   *slog.Logger
	widened  []Widening
	notes    []string
}

// New returns a Migrator for db, opened with a driver for dialect. Options:
// WithTables for table names other than jobs and failed_jobs, WithLogger.
func New(db *sql.DB, dialect dbqueue.Dialect, options ...Option) (*Migrator, error) {
	if db == nil {
		return nil, errors.New("migrations: nil *sql.DB")
	}
	cfg := newConfig(options)
	if cfg.format != formatGoose {
		return nil, errors.New("migrations: FormatGolangMigrate is an option of FS only: New runs the migrations with goose")
	}
	if !cfg.loggerSet {
		cfg.logger = slog.Default()
	}
	tables := cfg.tables
	versionTable := tables.VersionTable()
	var (
		gd   goose.Dialect
		opts = []goose.ProviderOption{goose.WithTableName(versionTable), goose.WithDisableGlobalRegistry(true)}
	)
	switch dialect {
	case dbqueue.Postgres:
		gd = goose.DialectPostgres
		locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(lockID), lock.WithLockTimeout(1, 300))
		if err != nil {
			return nil, err
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	case dbqueue.MySQL:
		gd = goose.DialectMySQL
		locker, err := lock.NewMySQLTableLocker(
			lock.WithTableName(versionTable+"_lock"),
			lock.WithTableLockID(lockID),
			lock.WithTableLockTimeout(200*time.Millisecond, 1500),
		)
		if err != nil {
			return nil, err
		}
		opts = append(opts, goose.WithLocker(locker))
	case dbqueue.SQLite:
		// SQLite serialises each write, but not goose's read-then-apply:
		// without a lock two processes starting at once both apply the same
		// migration. goose has no SQLite locker; sqliteLocker is one.
		gd = goose.DialectSQLite3
		opts = append(opts, goose.WithLocker(newSQLiteLocker(versionTable+"_lock")))
	default:
		return nil, fmt.Errorf("migrations: unknown dialect %q: use dbqueue.Postgres, dbqueue.MySQL or dbqueue.SQLite", dialect)
	}
	rendered, err := render(dialect, tables)
	if err != nil {
		return nil, err
	}
	p, err := goose.NewProvider(gd, db, rendered, opts...)
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	return &Migrator{provider: p, db: db, dialect: dialect, tables: tables, logger: cfg.logger}, nil
}

// ensureSchema creates the PostgreSQL schema WithTables names, when
// missing, before goose creates its version table there.
func (m *Migrator) ensureSchema(ctx context.Context) error {
	if m.tables.Schema == "" {
		return nil
	}
	var n int
	if err := m.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM pg_namespace WHERE nspname = $1", m.tables.Schema).Scan(&n); err != nil {
		return fmt.Errorf("look for schema %s: %w", m.tables.Schema, err)
	}
	if n > 0 {
		return nil
	}
	if _, err := m.db.ExecContext(ctx, "CREATE SCHEMA IF NOT EXISTS "+m.tables.Schema); err != nil {
		return fmt.Errorf("create schema %s (create it yourself, or grant CREATE on the database): %w", m.tables.Schema, err)
	}
	return nil
}

// checkLockable fails fast, saying what to do, when goose's lock cannot work
// on this connection: its MySQL lock scans DATETIME columns, which needs
// parseTime=true, and would otherwise retry for minutes before failing.
func (m *Migrator) checkLockable(ctx context.Context) error {
	if m.dialect != dbqueue.MySQL {
		return nil
	}
	var now any
	if err := m.db.QueryRowContext(ctx, "SELECT NOW(6)").Scan(&now); err != nil {
		return err
	}
	if _, ok := now.(time.Time); !ok {
		return errors.New("the MySQL *sql.DB must be opened with parseTime=true (the migration lock reads DATETIME columns): add ?parseTime=true to its DSN, or open it from dbqueue.ParseDSN's Conn, which adds it")
	}
	return nil
}

// Up applies every pending migration. When it widens the columns of an
// existing jobs table (one Laravel created), it says so through the
// logger (WithLogger) and Widened lists the columns. When it changes how
// the server treats a table (the jobs table's autovacuum options on
// PostgreSQL), it says so too, and Notes lists what it set.
func (m *Migrator) Up(ctx context.Context) ([]*Result, error) {
	m.widened, m.notes = nil, nil
	if err := m.checkLockable(ctx); err != nil {
		return nil, fmt.Errorf("migrations: up: %w", err)
	}
	if err := m.ensureSchema(ctx); err != nil {
		return nil, fmt.Errorf("migrations: up: %w", err)
	}
	before, err := columnTypes(ctx, m.db, m.dialect, m.tables)
	if err != nil {
		return nil, fmt.Errorf("migrations: up: %w", err)
	}
	res, err := m.provider.Up(ctx)
	if len(res) > 0 && len(before) > 0 {
		after, terr := columnTypes(ctx, m.db, m.dialect, m.tables)
		if terr == nil {
			m.widened = widenings(m.dialect, m.tables, before, after)
			for _, w := range m.widened {
				if m.logger != nil {
					m.logger.InfoContext(ctx, "dbqueue migrations: "+w.String())
				}
			}
		} else if err == nil {
			err = terr
		}
	}
	notes, nerr := m.notesFor(ctx, res)
	if nerr != nil && err == nil {
		err = nerr
	}
	m.notes = notes
	for _, n := range notes {
		if m.logger != nil {
			m.logger.InfoContext(ctx, "dbqueue migrations: "+n)
		}
	}
	if err != nil {
		return res, fmt.Errorf("migrations: up: %w", err)
	}
	return res, nil
}

// Notes lists the server settings the last Up set on dbqueue's tables
// (the jobs table's autovacuum options on PostgreSQL, migration 00012),
// one line each, empty when it set none. They are reported because they
// change how the server treats a table an application may share.
func (m *Migrator) Notes() []string { return m.notes }

// Widened lists the columns of existing tables that the last Up changed
// in place (Laravel's narrow attempts and times, MySQL's name columns made
// byte-exact), empty when it changed none.
func (m *Migrator) Widened() []Widening { return m.widened }

// Down rolls back the most recent migration. It drops tables and the jobs in
// them.
func (m *Migrator) Down(ctx context.Context) (*Result, error) {
	if err := m.checkLockable(ctx); err != nil {
		return nil, fmt.Errorf("migrations: down: %w", err)
	}
	res, err := m.provider.Down(ctx)
	if errors.Is(err, goose.ErrNoNextVersion) {
		return nil, fmt.Errorf("migrations: down: nothing to roll back, no dbqueue migration is applied: %w", err)
	}
	if err != nil {
		return res, fmt.Errorf("migrations: down: %w", err)
	}
	return res, nil
}

// Status lists every migration and whether it is applied.
func (m *Migrator) Status(ctx context.Context) ([]*Status, error) {
	st, err := m.provider.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrations: status: %w", err)
	}
	return st, nil
}

// Version is the newest applied migration (0 for none).
func (m *Migrator) Version(ctx context.Context) (int64, error) {
	v, err := m.provider.GetDBVersion(ctx)
	if err != nil {
		return 0, fmt.Errorf("migrations: version: %w", err)
	}
	return v, nil
}

// Up applies dbqueue's pending migrations to db: the call for applications
// that migrate at start-up. Widened columns are logged to slog.Default()
// unless WithLogger says otherwise.
func Up(ctx context.Context, db *sql.DB, dialect dbqueue.Dialect, opts ...Option) error {
	m, err := New(db, dialect, opts...)
	if err != nil {
		return err
	}
	_, err = m.Up(ctx)
	return err
}

// UpDSN is Up on the database a dbqueue DSN names (see dbqueue.ParseDSN):
// for programs that are handed a DSN and want the tables before opening
// the queue.
func UpDSN(ctx context.Context, dsn string, opts ...Option) error {
	db, dialect, err := dbqueue.OpenSQL(dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	return Up(ctx, db, dialect, opts...)
}

// sqliteLocker is a goose.Locker for SQLite: one lock row, taken with an
// upsert that succeeds only when the row is free or its lease has run out,
// and kept alive by a heartbeat, so a migrator that died frees the lock
// after the lease.
type sqliteLocker struct {
	table     string // holds the row a migrator owns while it migrates
	owner     string
	lease     time.Duration
	heartbeat time.Duration
	poll      time.Duration
	timeout   time.Duration

	stop context.CancelFunc
	done chan struct{}
}

func newSQLiteLocker(table string) *sqliteLocker {
	var b [4]byte
	_, _ = rand.Read(b[:])
	host, _ := os.Hostname()
	return &sqliteLocker{
		table:     table,
		owner:     fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:])),
		lease:     30 * time.Second,
		heartbeat: 5 * time.Second,
		poll:      100 * time.Millisecond,
		timeout:   5 * time.Minute,
	}
}

const sqliteNow = "CAST(strftime('%s','now') AS INTEGER)"

// Lock waits until this migrator holds the lock row.
func (l *sqliteLocker) Lock(ctx context.Context, db *sql.DB) error {
	create := "CREATE TABLE IF NOT EXISTS " + l.table +
		" (id INTEGER PRIMARY KEY, locked_by TEXT NOT NULL, expires_at INTEGER NOT NULL)"
	take := "INSERT INTO " + l.table + " (id, locked_by, expires_at) VALUES (?, ?, " + sqliteNow + " + ?)" +
		" ON CONFLICT (id) DO UPDATE SET locked_by = excluded.locked_by, expires_at = excluded.expires_at" +
		" WHERE " + l.table + ".expires_at < " + sqliteNow
	deadline := time.Now().Add(l.timeout)
	for {
		_, err := db.ExecContext(ctx, create)
		if err == nil {
			var res sql.Result
			res, err = db.ExecContext(ctx, take, lockID, l.owner, int64(l.lease/time.Second))
			if err == nil {
				if n, _ := res.RowsAffected(); n == 1 {
					l.startHeartbeat(ctx, db)
					return nil
				}
			}
		}
		if err != nil && !sqldb.IsRetryable(err) {
			return fmt.Errorf("take the migration lock: %w", err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("another process has been migrating this database for %v (row %d of %s): wait for it, or delete that row if none is running", l.timeout, lockID, l.table)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for the migration lock: %w", ctx.Err())
		case <-time.After(l.poll):
		}
	}
}

func (l *sqliteLocker) startHeartbeat(ctx context.Context, db *sql.DB) {
	ctx, l.stop = context.WithCancel(context.WithoutCancel(ctx))
	l.done = make(chan struct{})
	renew := "UPDATE " + l.table + " SET expires_at = " + sqliteNow + " + ? WHERE id = ? AND locked_by = ?"
	go func() {
		defer close(l.done)
		tick := time.NewTicker(l.heartbeat)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				// A failed renewal is retried on the next tick; the lease
				// outlasts several.
				_, _ = db.ExecContext(ctx, renew, int64(l.lease/time.Second), lockID, l.owner)
			}
		}
	}()
}

// Unlock stops the heartbeat and frees the lock row.
func (l *sqliteLocker) Unlock(ctx context.Context, db *sql.DB) error {
	if l.stop != nil {
		l.stop()
		<-l.done
		l.stop, l.done = nil, nil
	}
	ctx = context.WithoutCancel(ctx)
	free := "DELETE FROM " + l.table + " WHERE id = ? AND locked_by = ?"
	var err error
	for range 100 {
		if _, err = db.ExecContext(ctx, free, lockID, l.owner); err == nil || !sqldb.IsRetryable(err) {
			break
		}
		time.Sleep(l.poll)
	}
	if err != nil {
		return fmt.Errorf("free the migration lock: %w", err)
	}
	return nil
}

var _ lock.Locker = (*sqliteLocker)(nil)
