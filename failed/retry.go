package failed

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// retryChunk bounds the rows one statement moves, and the rows one
// transaction of RetryQueue and RetryAll holds locked.
const retryChunk = 500

// retryRow is what a retry reads of a failed job.
type retryRow = dialect.FailedRow

// Retry puts the failed jobs with these uuids back on their queues, as new
// jobs with no attempts made, due now by the database's clock, and deletes
// them from failed_jobs, all in one transaction. It returns how many it
// retried.
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
		return sqldb.InTx(ctx, s.db, s.sql.FailedTxOptions(), func(tx sqldb.Tx) error {
			var rows []retryRow
			for chunk := range slices.Chunk(uuids, retryChunk) {
				got, err := s.sql.LockFailed(ctx, tx, dialect.FailedFilter{UUIDs: chunk})
				if err != nil {
					return err
				}
				rows = append(rows, got...)
			}
			if err := s.checkRetry(uuids, rows); err != nil {
				return err
			}
			slices.SortFunc(rows, func(a, b retryRow) int { return cmp.Compare(a.ID, b.ID) })
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
		found[r.UUID] = true
		if r.Connection != s.connection {
			other = append(other, fmt.Sprintf("%s (%s)", r.UUID, r.Connection))
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
	return s.retryAll(ctx, queue)
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

func (s *Store) retryAll(ctx context.Context, queue string) (int, error) {
	// Stop at the newest failure when we started, or a job that keeps
	// failing would be retried forever.
	last, err := s.sql.MaxFailedID(ctx, s.db)
	if err != nil {
		return 0, sqldb.Wrap("retry failed jobs", err)
	}
	if last == 0 {
		return 0, nil // none failed
	}
	var total int
	for after := int64(0); ; {
		var rows []retryRow
		err := sqldb.Retry(ctx, func() error {
			return sqldb.InTx(ctx, s.db, s.sql.FailedTxOptions(), func(tx sqldb.Tx) (err error) {
				rows, err = s.sql.LockFailed(ctx, tx, dialect.FailedFilter{
					Connection: s.connection, Queue: queue, AfterID: after, UpToID: last, Limit: retryChunk,
				})
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
		after = rows[len(rows)-1].ID
	}
}

// move inserts locked failed jobs into jobs, due now, with their attempts
// reset as Laravel's queue:retry does, and deletes them from failed_jobs,
// inside the caller's transaction. PostgreSQL listeners are woken by the
// same statement; this process's own, on other databases, when it returns.
//
// A job pushed with an UntilFinished unique lock takes its lock again
// (dbqueue.Queue.PushUnique): its lock ended when it failed, and a
// retried job that did not hold it would let a push of its key queue a
// copy. If another job of the key took the lock while this one was
// failed, the lock stays with that one and the retried job runs without
// it: one job holds a key, never two.
func (s *Store) move(ctx context.Context, tx sqldb.Tx, rows []retryRow) (int, error) {
	var plain []dialect.FailedRow
	flush := func() error {
		if len(plain) == 0 {
			return nil
		}
		err := s.sql.RetryFromFailed(ctx, tx, plain)
		plain = plain[:0]
		return err
	}
	for _, r := range rows {
		if r.Queue == "" {
			r.Queue = s.queue // as Laravel's pushRaw does with an empty queue
		}
		r.Payload = resetAttempts(r.Payload)
		lock, unique := dialect.RetryLock(r.Payload)
		if !unique {
			plain = append(plain, r)
			continue
		}
		// In id order with the rest, so jobs go back in the order they failed.
		if err := flush(); err != nil {
			return 0, err
		}
		if _, err := s.sql.RetryUnique(ctx, tx, r, lock); err != nil {
			return 0, err
		}
	}
	if err := flush(); err != nil {
		return 0, err
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
