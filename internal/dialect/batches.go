package dialect

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// Batches is the SQL of chains and batches: the job_batches table
// (Laravel's), and the one transaction that finishes a job linked to
// others.
type Batches interface {
	// InsertBatch writes a new batch row, created now, inside ex.
	InsertBatch(ctx context.Context, ex sqldb.Execer, b BatchRow) error
	// FindBatch reads a batch; found is false when there is none.
	FindBatch(ctx context.Context, ex sqldb.Execer, id string) (b BatchRow, found bool, err error)
	// CancelBatch marks a batch cancelled (and finished, as Laravel does)
	// unless it already is; found is false when there is none.
	CancelBatch(ctx context.Context, ex sqldb.Execer, id string) (found bool, err error)
	// PruneBatches deletes batches finished more than olderThan seconds
	// ago by the database's clock.
	PruneBatches(ctx context.Context, ex sqldb.Execer, olderThan int64) (int64, error)
	// CountInBatch records one job's end in its batch inside tx, with the
	// batch row locked: a success (failure nil) or a failure. change is
	// nil when the batch is gone.
	CountInBatch(ctx context.Context, tx sqldb.Tx, id, jobUUID string, failed bool) (change *BatchChange, err error)
	// FinishLinked ends a held row in one transaction: deleted (or, with
	// f.Fail, moved to failed_jobs), the chain's next row pushed, and the
	// outcome counted in the batch. Nothing happens when the reservation
	// is no longer held.
	FinishLinked(ctx context.Context, db sqldb.DB, h Held, f Finish) (FinishResult, error)
	// BatchTxOptions are the options of a transaction that locks a batch
	// row (MySQL: READ COMMITTED, so it locks no gaps).
	BatchTxOptions() sqldb.TxOptions
}

// BatchRow is a row of job_batches. Times are Unix seconds.
type BatchRow struct {
	ID, Name                           string
	TotalJobs, PendingJobs, FailedJobs int
	FailedJobIDs                       []string
	Options                            string // as stored: PHP-serialized
	CancelledAt, FinishedAt            *int64
	CreatedAt                          int64
}

// BatchChange is a batch before and after one job's end was counted,
// read and written under the row's lock: comparing the two tells the
// one caller that crossed a line (the last job done, the first failure).
type BatchChange struct{ Before, After BatchRow }

// Finish says how FinishLinked ends a row.
type Finish struct {
	// Fail moves the row to failed_jobs; nil deletes it.
	Fail *Failure
	// Next are pushed in the same transaction (a chain's next link);
	// Notify as Insert's.
	Next   []PushRow
	Notify bool
	// BatchID, when set, counts the outcome in that batch, under the
	// job's JobUUID.
	BatchID, JobUUID string
}

// FinishResult is what FinishLinked did.
type FinishResult struct {
	// Held is false when the reservation was no longer held: nothing was
	// written.
	Held    bool
	NextIDs []int64
	// Batch is nil without a batch, or when the batch row is gone.
	Batch *BatchChange
}

// BatchesName is job_batches beside Laravel's tables (Laravel's own name
// for it) and <jobs>_batches beside tables of other names, as the
// migrations name it.
func (t Tables) BatchesName() string {
	if t.Jobs == DefaultTables.Jobs && t.Failed == DefaultTables.Failed {
		return "job_batches"
	}
	return t.Jobs + "_batches"
}

// ErrorsName is dbqueue_job_errors beside Laravel's tables and
// <jobs>_errors beside tables of other names, as the migrations name it.
func (t Tables) ErrorsName() string {
	if t.Jobs == DefaultTables.Jobs && t.Failed == DefaultTables.Failed {
		return "dbqueue_job_errors"
	}
	return t.Jobs + "_errors"
}

// ErrorsTable is ErrorsName as SQL writes it, schema-qualified.
func (t Tables) ErrorsTable() string { return t.qualify(t.ErrorsName()) }

// BatchesTable is BatchesName as SQL writes it, schema-qualified.
func (t Tables) BatchesTable() string { return t.qualify(t.BatchesName()) }

const batchColumns = "id, name, total_jobs, pending_jobs, failed_jobs, failed_job_ids, options, cancelled_at, created_at, finished_at"

func scanBatch(row sqldb.Row, extra ...any) (BatchRow, error) {
	var (
		b                   BatchRow
		ids                 string
		options             sql.NullString
		cancelled, finished sql.NullInt64
	)
	dest := append([]any{&b.ID, &b.Name, &b.TotalJobs, &b.PendingJobs, &b.FailedJobs, &ids, &options, &cancelled, &b.CreatedAt, &finished}, extra...)
	if err := row.Scan(dest...); err != nil {
		return b, err
	}
	b.Options = options.String
	if ids != "" {
		// Laravel writes a JSON list; a row it cannot read keeps its counts.
		_ = json.Unmarshal([]byte(ids), &b.FailedJobIDs)
	}
	if cancelled.Valid {
		v := cancelled.Int64
		b.CancelledAt = &v
	}
	if finished.Valid {
		v := finished.Int64
		b.FinishedAt = &v
	}
	return b, nil
}

func (c *common) batches() string { return c.tables.BatchesTable() }

func (c *common) InsertBatch(ctx context.Context, ex sqldb.Execer, b BatchRow) error {
	ids, _ := json.Marshal(nonNil(b.FailedJobIDs))
	_, err := ex.Exec(ctx, c.rebind("INSERT INTO "+c.batches()+" ("+batchColumns+") VALUES (?, ?, ?, ?, ?, ?, ?, NULL, "+c.now+", NULL)"),
		b.ID, b.Name, b.TotalJobs, b.PendingJobs, b.FailedJobs, string(ids), b.Options)
	return err
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (c *common) FindBatch(ctx context.Context, ex sqldb.Execer, id string) (BatchRow, bool, error) {
	b, err := scanBatch(ex.QueryRow(ctx, c.rebind("SELECT "+batchColumns+" FROM "+c.batches()+" WHERE id = ?"), id))
	if errors.Is(err, sql.ErrNoRows) {
		return BatchRow{}, false, nil
	}
	return b, err == nil, err
}

func (c *common) CancelBatch(ctx context.Context, ex sqldb.Execer, id string) (bool, error) {
	res, err := ex.Exec(ctx, c.rebind("UPDATE "+c.batches()+" SET cancelled_at = "+c.now+", finished_at = COALESCE(finished_at, "+c.now+
		") WHERE id = ? AND cancelled_at IS NULL"), id)
	if err != nil || res.RowsAffected > 0 {
		return err == nil, err
	}
	_, found, err := c.FindBatch(ctx, ex, id)
	return found, err
}

func (c *common) PruneBatches(ctx context.Context, ex sqldb.Execer, olderThan int64) (int64, error) {
	res, err := ex.Exec(ctx, c.rebind("DELETE FROM "+c.batches()+" WHERE finished_at IS NOT NULL AND finished_at < "+c.now+" - ?"), olderThan)
	return res.RowsAffected, err
}

func (c *common) BatchTxOptions() sqldb.TxOptions { return sqldb.TxOptions{} }

// countInBatch locks the batch row (lock: " FOR UPDATE", or "" where the
// transaction holds the database), applies Laravel's bookkeeping in Go
// and writes it back, all with the database's clock:
//
//   - a success takes one from pending_jobs and the job's uuid from
//     failed_job_ids (it failed before and was retried); the batch is
//     finished when pending_jobs reaches 0.
//   - a failure adds one to failed_jobs and the uuid to failed_job_ids;
//     the first failure of a batch that does not allow failures cancels
//     it, which also finishes it, as Laravel's cancel does.
//   - a failure of a job whose uuid failed_job_ids already lists (it was
//     retried from failed_jobs and failed again) changes nothing: each
//     job's failure counts once. Laravel counts it again, and its finally
//     then fires while jobs of the batch have not run (pending_jobs -
//     failed_jobs reaches 0 early); failed_jobs here stays what Laravel
//     means it to be, the jobs that failed, so a batch is done when each
//     job has succeeded or failed.
func (c *common) countInBatch(ctx context.Context, tx sqldb.Tx, id, jobUUID string, failed bool, lock string) (*BatchChange, error) {
	var now int64
	before, err := scanBatch(tx.QueryRow(ctx, c.rebind("SELECT "+batchColumns+", "+c.now+" FROM "+c.batches()+" WHERE id = ?"+lock), id), &now)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	after := before
	after.FailedJobIDs = slices.Clone(before.FailedJobIDs)
	if failed {
		if jobUUID != "" && slices.Contains(after.FailedJobIDs, jobUUID) {
			return &BatchChange{Before: before, After: after}, nil // counted when it first failed
		}
		after.FailedJobs++
		if jobUUID != "" {
			after.FailedJobIDs = append(after.FailedJobIDs, jobUUID)
		}
		if after.FailedJobs == 1 && !AllowsFailures(after.Options) && after.CancelledAt == nil {
			after.CancelledAt = &now
			if after.FinishedAt == nil {
				after.FinishedAt = &now
			}
		}
	} else {
		after.PendingJobs--
		after.FailedJobIDs = slices.DeleteFunc(after.FailedJobIDs, func(u string) bool { return u == jobUUID })
		if after.PendingJobs == 0 && after.FinishedAt == nil {
			after.FinishedAt = &now
		}
	}
	ids, _ := json.Marshal(nonNil(after.FailedJobIDs))
	_, err = tx.Exec(ctx, c.rebind("UPDATE "+c.batches()+" SET pending_jobs = ?, failed_jobs = ?, failed_job_ids = ?, cancelled_at = ?, finished_at = ? WHERE id = ?"),
		after.PendingJobs, after.FailedJobs, string(ids), after.CancelledAt, after.FinishedAt, id)
	if err != nil {
		return nil, err
	}
	return &BatchChange{Before: before, After: after}, nil
}

func (c *common) CountInBatch(ctx context.Context, tx sqldb.Tx, id, jobUUID string, failed bool) (*BatchChange, error) {
	return c.countInBatch(ctx, tx, id, jobUUID, failed, " FOR UPDATE")
}

type insertFunc func(ctx context.Context, ex sqldb.Execer, rows []PushRow, notify bool) ([]int64, error)

type counter func(ctx context.Context, tx sqldb.Tx, id, jobUUID string, failed bool) (*BatchChange, error)

// finishLinked is FinishLinked over the dialect's own Insert and
// CountInBatch. The row's delete comes first, so the rows it locks are
// always taken in the same order (the job's, then its batch's), and two
// finishes of one batch wait for each other rather than deadlock.
func (c *common) finishLinked(ctx context.Context, db sqldb.DB, h Held, f Finish, opts sqldb.TxOptions, insert insertFunc, count counter) (FinishResult, error) {
	var res FinishResult
	err := sqldb.InTx(ctx, db, opts, func(tx sqldb.Tx) error {
		res = FinishResult{}
		del, err := tx.Exec(ctx, c.rebind("DELETE FROM "+c.jobs+c.held), h.ID, h.Token, h.Attempts)
		if err != nil || del.RowsAffected == 0 {
			return err
		}
		res.Held = true
		if f.Fail != nil {
			if _, err := tx.Exec(ctx, c.rebind(c.failInsert), f.Fail.UUID, f.Fail.Connection, f.Fail.Queue, string(f.Fail.Payload), f.Fail.Exception); err != nil {
				return err
			}
			if err := c.moveHistory(ctx, tx, h, f.Fail.UUID); err != nil {
				return err
			}
		} else if err := c.dropHeldHistory(ctx, tx, h); err != nil {
			return err
		}
		if len(f.Next) > 0 {
			if res.NextIDs, err = insert(ctx, tx, f.Next, f.Notify); err != nil {
				return err
			}
		}
		if f.BatchID != "" {
			res.Batch, err = count(ctx, tx, f.BatchID, f.JobUUID, f.Fail != nil)
		}
		return err
	})
	if err != nil {
		return FinishResult{}, err
	}
	return res, nil
}

// phpAllowFailures is how PHP's serialize() writes allowFailures => true
// in a batch's options array.
const phpAllowFailures = `s:13:"allowFailures";b:1;`

// BatchOptions is a batch's options column as Laravel 8 writes it:
// serialize(['allowFailures' => true]) or serialize([]), which Laravel's
// Bus::findBatch reads back.
func BatchOptions(allowFailures bool) string {
	if allowFailures {
		return "a:1:{" + phpAllowFailures + "}"
	}
	return "a:0:{}"
}

// AllowsFailures reads allowFailures from a batch's options column:
// PHP-serialized (Laravel 8), or that base64-encoded (what newer Laravel
// writes on PostgreSQL).
func AllowsFailures(options string) bool {
	if len(options) > 0 && options[0] != 'a' {
		if raw, err := base64.StdEncoding.DecodeString(options); err == nil {
			options = string(raw)
		}
	}
	return strings.Contains(options, phpAllowFailures)
}

var (
	_ Batches = (*postgres)(nil)
	_ Batches = (*mysql)(nil)
	_ Batches = (*sqlite)(nil)
)
