package ceiling

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/dbqueue/dbqueue/bench"
)

var myDDL = []string{
	"CREATE DATABASE IF NOT EXISTS " + Schema,
	`CREATE TABLE IF NOT EXISTS ` + Schema + `.jobs (
	id           bigint unsigned NOT NULL AUTO_INCREMENT PRIMARY KEY,
	queue        varchar(255)    NOT NULL,
	payload      longtext        NOT NULL,
	attempts     int unsigned    NOT NULL,
	reserved_at  bigint unsigned NULL,
	available_at bigint unsigned NOT NULL,
	created_at   bigint unsigned NOT NULL,
	KEY jobs_queue_index (queue)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci`,
	`CREATE TABLE IF NOT EXISTS ` + Schema + `.` + Effects + ` (
	id     bigint unsigned NOT NULL AUTO_INCREMENT PRIMARY KEY,
	job_id bigint unsigned NOT NULL
) ENGINE=InnoDB`,
}

// The insert workload's statements (see insert.go).
const (
	myInsertEffect = `INSERT INTO ` + Schema + `.` + Effects + ` (job_id) VALUES (?)`
	myDeleteOne    = `DELETE FROM ` + Schema + `.jobs WHERE id = ? AND attempts = ?`
)

// The claim's SELECT. FORCE INDEX (PRIMARY) keeps the walk in id order: a
// plan through jobs_queue_index plus a sort would lock every ready row it
// reads (see DESIGN.md, MariaDB 10.11).
const myClaim = `
SELECT id, attempts, payload FROM ` + Schema + `.jobs FORCE INDEX (PRIMARY)
WHERE queue = ? AND reserved_at IS NULL AND available_at <= UNIX_TIMESTAMP()
ORDER BY id LIMIT ?
FOR UPDATE SKIP LOCKED`

// MariaDB is the ceiling loop on MariaDB / MySQL (go-sql-driver/mysql).
type MariaDB struct {
	o   Options
	db  *sql.DB
	sem chan struct{} // the insert workload's transactions in flight
}

var _ bench.System = (*MariaDB)(nil)

// NewMariaDB opens dsn with interpolated parameters (one round trip per
// statement instead of prepare/execute/close) and sessions in READ COMMITTED,
// which spares the claim gap locks.
func NewMariaDB(ctx context.Context, dsn string, o Options) (*MariaDB, error) {
	o = o.withDefaults()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("ceiling-mariadb: parse dsn: %w", err)
	}
	cfg.InterpolateParams = true
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	// tx_isolation is MariaDB's name (MySQL 8: transaction_isolation).
	cfg.Params["tx_isolation"] = "'READ-COMMITTED'"
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("ceiling-mariadb: %w", err)
	}
	db := sql.OpenDB(conn)
	// The insert workload's transactions each hold a connection, as a
	// dbqueue worker's transactional handlers do on its database/sql pool.
	conns := o.Workers + 2
	if o.Insert {
		conns += o.TxConcurrency
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("ceiling-mariadb: connect: %w", err)
	}
	return &MariaDB{o: o, db: db, sem: make(chan struct{}, o.TxConcurrency)}, nil
}

func (m *MariaDB) Name() string             { return m.o.name(CeilingMariaDB) }
func (m *MariaDB) Database() bench.Database { return bench.MariaDB }

// Setup creates the database and the table.
func (m *MariaDB) Setup(ctx context.Context) error {
	for _, q := range myDDL {
		if _, err := m.db.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// Reset empties the tables.
func (m *MariaDB) Reset(ctx context.Context) error {
	for _, t := range []string{"jobs", Effects} {
		if _, err := m.db.ExecContext(ctx, "TRUNCATE TABLE "+Schema+"."+t); err != nil {
			return err
		}
	}
	return nil
}

// Enqueue inserts n rows with multi-row INSERTs of up to 1,000 rows.
func (m *MariaDB) Enqueue(ctx context.Context, n int) error {
	for n > 0 {
		k := min(n, insertBatch)
		vals := placeholders(k, func(b *strings.Builder, _ int) {
			b.WriteString("(@q, ?, 0, @now, @now)")
		})
		// Session variables carry the shared values once per statement;
		// a transaction keeps the SET and the INSERT on one connection.
		tx, err := m.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "SET @q = ?, @now = UNIX_TIMESTAMP()", m.o.Queue); err != nil {
			tx.Rollback()
			return err
		}
		args := make([]any, 0, k)
		for _, pl := range payloads(k) {
			args = append(args, pl)
		}
		q := "INSERT INTO " + Schema + ".jobs (queue, payload, attempts, available_at, created_at) VALUES " + vals
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// Start starts W workers.
func (m *MariaDB) Start(ctx context.Context, n int) (bench.Run, error) {
	return startLoop(ctx, m.o, n, m.work, myRetryable), nil
}

func (m *MariaDB) work(ctx context.Context) (int, error) {
	jobs, err := m.claim(ctx)
	if err != nil || len(jobs) == 0 {
		return 0, err
	}
	if m.o.Insert {
		return fanOut(ctx, m.sem, jobs, m.insertTx)
	}
	// The jobs run here: no-ops.
	// id IN (…) gives the optimizer a primary-key range; the row-constructor
	// IN is the ownership check.
	args := make([]any, 0, 3*len(jobs))
	for _, j := range jobs {
		args = append(args, j.id)
	}
	for _, j := range jobs {
		args = append(args, j.id, j.attempts)
	}
	q := "DELETE FROM " + Schema + ".jobs WHERE id IN (" + placeholders(len(jobs), func(b *strings.Builder, _ int) { b.WriteByte('?') }) +
		") AND (id, attempts) IN (" + placeholders(len(jobs), func(b *strings.Builder, _ int) { b.WriteString("(?,?)") }) + ")"
	res, err := m.db.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	if got, _ := res.RowsAffected(); got != int64(len(jobs)) {
		return 0, fmt.Errorf("ownership check: deleted %d of %d claimed jobs", got, len(jobs))
	}
	return len(jobs), nil
}

// claim runs SELECT … FOR UPDATE SKIP LOCKED and the UPDATE in one READ
// COMMITTED transaction (MariaDB has no UPDATE … RETURNING).
func (m *MariaDB) claim(ctx context.Context) ([]claimed, error) {
	tx, err := m.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, myClaim, m.o.Queue, m.o.Batch)
	if err != nil {
		return nil, err
	}
	jobs := make([]claimed, 0, m.o.Batch)
	var payload sql.RawBytes
	for rows.Next() {
		var j claimed
		if err := rows.Scan(&j.id, &j.attempts, &payload); err != nil {
			rows.Close()
			return nil, err
		}
		j.attempts++ // the value our UPDATE writes
		jobs = append(jobs, j)
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(jobs) == 0 {
		return nil, nil
	}
	args := make([]any, len(jobs))
	for i, j := range jobs {
		args[i] = j.id
	}
	q := "UPDATE " + Schema + ".jobs SET reserved_at = UNIX_TIMESTAMP(), attempts = attempts + 1 WHERE id IN (" +
		placeholders(len(jobs), func(b *strings.Builder, _ int) { b.WriteByte('?') }) + ")"
	if _, err := tx.ExecContext(ctx, q, args...); err != nil {
		return nil, err
	}
	return jobs, tx.Commit()
}

// insertTx is one job of the insert workload: begin, insert its effect,
// delete it with the ownership check, commit; retried on a deadlock.
func (m *MariaDB) insertTx(ctx context.Context, j claimed) error {
	for {
		err := m.insertOnce(ctx, j)
		if err == nil || !myRetryable(err) {
			return err
		}
	}
}

func (m *MariaDB) insertOnce(ctx context.Context, j claimed) error {
	tx, err := m.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, myInsertEffect, j.id); err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, myDeleteOne, j.id, j.attempts)
	if err != nil {
		return err
	}
	if got, _ := res.RowsAffected(); got != 1 {
		return errNotOwned
	}
	return tx.Commit()
}

// myRetryable: deadlock (1213) and lock wait timeout (1205).
func myRetryable(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205)
}

// Close closes the pool.
func (m *MariaDB) Close() error { return m.db.Close() }
