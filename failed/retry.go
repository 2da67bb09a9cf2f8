package failed

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// notifyChannel is the PostgreSQL channel dbqueue's pushes notify and its
// workers listen on (dbqueue's notifyChannel; the two must agree).
const notifyChannel = "dbqueue_jobs"

// retryChunk bounds the rows one statement moves, and the rows one
// transaction of RetryQueue and RetryAll holds locked.
const retryChunk = 500

// retryRow is what a retry reads of a failed job.
type retryRow struct {
	id                      int64
	uuid, connection, queue string
	payload                 []byte
}

// Retry puts the failed jobs with these uuids back on their queues, as new
// jobs with no attempts made, due now by the database's clock, and deletes
// them from failed_jobs, all in one transaction. It returns how many it
// retried. On PostgreSQL the commit wakes the workers listening on those
// queues, as a push does.
//
// Either every uuid is retried or none is: if one names no failed job the
// error wraps ErrNotFound and names it, and if one was failed by another
// queue connection the error wraps ErrOtherConnection.
func (s *Store) Retry(ctx context.Context, uuids ...string) (int, error) {
	uuids = slices.Compact(slices.Sorted(slices.Values(uuids)))
	if len(uuids) == 0 {
		return 0, nil
	}
	var n int
	err := sqldb.Retry(ctx, func() error {
		return sqldb.InTx(ctx, s.db, s.txOptions(), func(tx sqldb.Tx) error {
			var rows []retryRow
			for chunk := range slices.Chunk(uuids, retryChunk) {
				args := make([]any, len(chunk))
				for i, u := range chunk {
					args[i] = u
				}
				got, err := s.lockRows(ctx, tx, "uuid IN ("+sqldb.List(len(chunk))+")", "", args...)
				if err != nil {
					return err
				}
				rows = append(rows, got...)
			}
			if err := s.checkRetry(uuids, rows); err != nil {
				return err
			}
			slices.SortFunc(rows, func(a, b retryRow) int { return cmp.Compare(a.id, b.id) })
			var err error
			n, err = s.move(ctx, tx, rows)
			return err
		})
	})
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrOtherConnection) {
		return 0, err // already says what and why
	}
	if err != nil {
		return 0, sqldb.Wrap("retry failed jobs", err)
	}
	return n, nil
}

// checkRetry fails a retry whose uuids are not all there, or not all this
// connection's, naming the culprits.
func (s *Store) checkRetry(uuids []string, rows []retryRow) error {
	found := make(map[string]bool, len(rows))
	var other []string
	for _, r := range rows {
		found[r.uuid] = true
		if r.connection != s.connection {
			other = append(other, fmt.Sprintf("%s (%s)", r.uuid, r.connection))
		}
	}
	var missing []string
	for _, u := range uuids {
		if !found[u] {
			missing = append(missing, u)
		}
	}
	var errs []error
	if len(missing) > 0 {
		errs = append(errs, fmt.Errorf("%w: %s; nothing was retried", ErrNotFound, names(missing)))
	}
	if len(other) > 0 {
		errs = append(errs, fmt.Errorf("%w: %s; this queue is connection %q, so nothing was retried (retry them through a queue opened WithConnectionName of theirs)",
			ErrOtherConnection, names(other), s.connection))
	}
	return errors.Join(errs...)
}

// names lists up to ten names for an error.
func names(list []string) string {
	const most = 10
	if len(list) <= most {
		return strings.Join(list, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(list[:most], ", "), len(list)-most)
}

// RetryQueue retries every failed job of a queue ("" for the queue's
// default queue) that this queue connection failed. See RetryAll.
func (s *Store) RetryQueue(ctx context.Context, queue string) (int, error) {
	if queue == "" {
		queue = s.queue
	}
	return s.retryAll(ctx, "queue = ?", queue)
}

// RetryAll retries every failed job that this queue connection failed,
// oldest failure first. Jobs of other connections are left alone.
//
// The jobs move in transactions of a few hundred, each all-or-nothing, so
// a large table is never locked at once; on error the count says how many
// had moved. Jobs that fail again while it runs are not retried a second
// time.
func (s *Store) RetryAll(ctx context.Context) (int, error) {
	return s.retryAll(ctx, "")
}

func (s *Store) retryAll(ctx context.Context, where string, args ...any) (int, error) {
	// Stop at the newest failure when we started, or a job that keeps
	// failing would be retried forever.
	var last sql.NullInt64
	if err := s.db.QueryRow(ctx, "SELECT MAX(id) FROM failed_jobs").Scan(&last); err != nil {
		return 0, sqldb.Wrap("retry failed jobs", err)
	}
	if !last.Valid {
		return 0, nil // none failed
	}
	cond := "connection = ? AND id > ? AND id <= ?"
	if where != "" {
		cond += " AND " + where
	}
	var total int
	for after := int64(0); ; {
		var rows []retryRow
		err := sqldb.Retry(ctx, func() error {
			return sqldb.InTx(ctx, s.db, s.txOptions(), func(tx sqldb.Tx) (err error) {
				rows, err = s.lockRows(ctx, tx, cond, " LIMIT "+strconv.Itoa(retryChunk), append([]any{s.connection, after, last.Int64}, args...)...)
				if err != nil {
					return err
				}
				_, err = s.move(ctx, tx, rows)
				return err
			})
		})
		if err != nil {
			return total, sqldb.Wrap("retry failed jobs", err)
		}
		total += len(rows)
		if len(rows) < retryChunk {
			return total, nil
		}
		after = rows[len(rows)-1].id
	}
}

// txOptions asks MySQL for READ COMMITTED, so the locking reads lock only
// the rows they return, not the gaps and rows of other queues they pass.
func (s *Store) txOptions() sqldb.TxOptions {
	return sqldb.TxOptions{ReadCommitted: s.dialect == sqldb.MySQL}
}

// lockRows selects failed jobs in id order and locks them until the
// transaction ends, so two retries never move the same job. SQLite has no
// row locks: its write transaction already holds the whole database.
func (s *Store) lockRows(ctx context.Context, tx sqldb.Tx, where, limit string, args ...any) ([]retryRow, error) {
	query := "SELECT id, uuid, connection, queue, payload FROM failed_jobs WHERE " + where + " ORDER BY id" + limit
	if s.dialect != sqldb.SQLite {
		query += " FOR UPDATE"
	}
	rs, err := tx.Query(ctx, s.dialect.Rebind(query), args...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var rows []retryRow
	for rs.Next() {
		var r retryRow
		if err := rs.Scan(&r.id, &r.uuid, &r.connection, &r.queue, &r.payload); err != nil {
			return nil, err
		}
		rows = append(rows, r)
	}
	return rows, rs.Err()
}

// move inserts locked failed jobs into jobs and deletes them from
// failed_jobs, inside the caller's transaction.
func (s *Store) move(ctx context.Context, tx sqldb.Tx, rows []retryRow) (int, error) {
	now := s.dialect.Now()
	for chunk := range slices.Chunk(rows, retryChunk) {
		values := strings.TrimSuffix(strings.Repeat("(?, ?, 0, NULL, "+now+", "+now+"),", len(chunk)), ",")
		args := make([]any, 0, 2*len(chunk))
		ids := make([]any, len(chunk))
		for i, r := range chunk {
			queue := r.queue
			if queue == "" {
				queue = s.queue // as Laravel's pushRaw does with an empty queue
			}
			args = append(args, queue, string(resetAttempts(r.payload)))
			ids[i] = r.id
		}
		insert := "INSERT INTO jobs (queue, payload, attempts, reserved_at, available_at, created_at) VALUES " + values
		if s.dialect == sqldb.Postgres {
			// Wake the workers listening on these queues, as a push does:
			// in the same statement, so inside the retry's transaction, and
			// a retry that rolls back wakes nobody. PostgreSQL sends one
			// notification per queue at commit.
			insert = "WITH ins AS (" + insert + " RETURNING queue) SELECT count(pg_notify('" + notifyChannel +
				"', q)) FROM (SELECT DISTINCT queue AS q FROM ins) d"
			var queues int64
			if err := tx.QueryRow(ctx, s.dialect.Rebind(insert), args...).Scan(&queues); err != nil {
				return 0, err
			}
		} else if _, err := tx.Exec(ctx, s.dialect.Rebind(insert), args...); err != nil {
			return 0, err
		}
		res, err := tx.Exec(ctx, s.dialect.Rebind("DELETE FROM failed_jobs WHERE id IN ("+sqldb.List(len(ids))+")"), ids...)
		if err != nil {
			return 0, err
		}
		if res.RowsAffected != int64(len(chunk)) {
			// Only a transaction that did not hold its rows gets here; roll
			// back rather than leave a job in both tables.
			return 0, fmt.Errorf("failed_jobs changed during the retry: deleted %d of %d rows; nothing was retried", res.RowsAffected, len(chunk))
		}
	}
	return len(rows), nil
}

// resetAttempts does what Laravel 8's RetryCommand::resetAttempts does: a
// payload whose top-level "attempts" is set (and not null) gets 0 there.
// Every other byte is kept, so the uuid and PHP-serialised data survive
// exactly; a payload that is not a JSON object is returned as it is.
func resetAttempts(raw []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return raw
	}
	type span struct{ start, end int64 }
	var spans []span
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return raw
		}
		keyEnd := dec.InputOffset()
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return raw
		}
		if key != "attempts" || string(value) == "null" {
			continue
		}
		// The value starts after the colon and any white space.
		start := keyEnd + int64(bytes.IndexByte(raw[keyEnd:], ':')) + 1
		for start < int64(len(raw)) && isSpace(raw[start]) {
			start++
		}
		spans = append(spans, span{start, dec.InputOffset()})
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return raw
	}
	if _, err := dec.Token(); err != io.EOF {
		return raw // trailing data: not a payload Laravel could read either
	}
	if len(spans) == 0 {
		return raw
	}
	out := make([]byte, 0, len(raw))
	prev := int64(0)
	for _, sp := range spans {
		out = append(out, raw[prev:sp.start]...)
		out = append(out, '0')
		prev = sp.end
	}
	out = append(out, raw[prev:]...)
	if !json.Valid(out) {
		return raw
	}
	return out
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
