package dialect

import (
	"context"
	"database/sql"
	"errors"
	"strconv"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// TxFinisher is the SQL that ends a held row inside a transaction the
// caller owns (a transactional handler's): the caller's own writes and
// the job's end commit together or not at all. Nothing here begins,
// commits or rolls back: a method that reports the row not held leaves
// the transaction for the caller to roll back. Dialect embeds it.
type TxFinisher interface {
	// CompleteIn deletes a held row inside tx, in one statement, and
	// reports whether it was held.
	CompleteIn(ctx context.Context, tx sqldb.Tx, h Held) (bool, error)
	// FinishIn is FinishLinked inside tx: the row deleted (or, with
	// f.Fail, moved to failed_jobs), the chain's next row pushed and the
	// outcome counted in the batch, all in the caller's transaction.
	FinishIn(ctx context.Context, tx sqldb.Tx, h Held, f Finish) (FinishResult, error)
	// ReleaseIn puts a held row back inside tx, available delay seconds
	// after now, with a new reservation token; with giveBack it also takes
	// the attempt back (a snooze). It reports whether the row was held.
	ReleaseIn(ctx context.Context, tx sqldb.Tx, h Held, delay int64, giveBack bool) (bool, error)
	// LockReservation reads what holds row id now, locking the row first,
	// so that a transaction still writing it is waited for rather than
	// read around. found is false when the row is gone.
	LockReservation(ctx context.Context, db sqldb.DB, id int64) (r Reservation, found bool, err error)
}

// Reservation is what holds a row of jobs: its token and attempts, and
// whether it is reserved at all.
type Reservation struct {
	Token    int64
	Attempts int
	Reserved bool
}

// HeldBy reports whether h is the reservation that holds the row.
func (r Reservation) HeldBy(h Held) bool {
	return r.Reserved && r.Token == h.Token && r.Attempts == h.Attempts
}

// lockWaitSeconds bounds one wait of LockReservation for a row lock, so a
// transaction that never ends (its connection half-dead) turns into a
// retryable lock timeout the caller sees again and again, rather than one
// wait that outlives the caller's context on a driver that cannot cancel.
const lockWaitSeconds = 2

func (c *common) CompleteIn(ctx context.Context, tx sqldb.Tx, h Held) (bool, error) {
	res, err := tx.Exec(ctx, c.rebind("DELETE FROM "+c.jobs+c.held), h.ID, h.Token, h.Attempts)
	if err != nil || res.RowsAffected == 0 {
		return false, err
	}
	return true, c.dropHeldHistory(ctx, tx, h)
}

// releaseIn is ReleaseIn on every database. The token is drawn anew, as a
// give-back draws it, so that after the commit nothing can mistake the
// row for still held by this reservation: not a retried release, and not
// a caller finding out whether a commit whose reply was lost happened.
func (c *common) releaseIn(ctx context.Context, tx sqldb.Tx, h Held, delay int64, giveBack bool) (bool, error) {
	token := "reservation_token + 1"
	if giveBack {
		token = giveBackToken + ", attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END"
	}
	set := unreserve + ", available_at = " + c.now + " + " + strconv.FormatInt(delay, 10) + ", reservation_token = " + token
	res, err := tx.Exec(ctx, c.rebind("UPDATE "+c.jobs+" SET "+set+c.held), h.ID, h.Token, h.Attempts)
	return err == nil && res.RowsAffected > 0, err
}

func (c *common) ReleaseIn(ctx context.Context, tx sqldb.Tx, h Held, delay int64, giveBack bool) (bool, error) {
	return c.releaseIn(ctx, tx, h, delay, giveBack)
}

func finishIn(ctx context.Context, tx sqldb.Tx, fn func(sqldb.DB) (FinishResult, error)) (FinishResult, error) {
	j := &joined{Tx: tx}
	res, err := fn(j)
	if err == nil && j.rolledBack {
		// The step gave up half-way and its rollback could not undo what
		// it wrote in the caller's transaction: the caller must.
		err = errStepRolledBack
	}
	return res, err
}

var errStepRolledBack = errors.New("dbqueue: a finishing step inside the caller's transaction rolled back: roll the transaction back")

// joined is a DB whose transactions are steps of one transaction the
// caller owns: Begin returns it, Commit does nothing (the caller commits),
// and Rollback, which cannot undo the step alone, is remembered so that
// finishIn fails and the caller rolls everything back.
type joined struct {
	sqldb.Tx
	rolledBack bool
}

func (j *joined) Begin(context.Context, sqldb.TxOptions) (sqldb.Tx, error) { return j, nil }
func (j *joined) Commit(context.Context) error                             { return nil }
func (j *joined) Rollback(context.Context) error {
	j.rolledBack = true
	return nil
}
func (j *joined) Close() error { return nil }

// lockReservation is LockReservation: in a transaction of its own,
// prepare (a lock timeout) and then a read of the row with lock appended,
// rolled back at once. A lock wait that times out is a retryable error.
func (c *common) lockReservation(ctx context.Context, db sqldb.DB, id int64, prepare, lock string) (Reservation, bool, error) {
	var r Reservation
	tx, err := db.Begin(ctx, c.lockTx)
	if err != nil {
		return r, false, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if prepare != "" {
		if _, err := tx.Exec(ctx, prepare); err != nil {
			return r, false, err
		}
	}
	var (
		token, attempts int64
		reserved        sql.NullInt64
	)
	err = tx.QueryRow(ctx, c.rebind("SELECT reservation_token, attempts, reserved_at FROM "+c.jobs+" WHERE id = ?"+lock), id).
		Scan(c.ints(&token), c.ints(&attempts), &reserved)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return r, false, nil
	case err != nil:
		return r, false, err
	}
	r = Reservation{Token: token, Attempts: int(attempts), Reserved: reserved.Valid}
	return r, true, nil
}

var (
	_ TxFinisher = (*postgres)(nil)
	_ TxFinisher = (*mysql)(nil)
	_ TxFinisher = (*sqlite)(nil)
)
