package dbqueue

import (
	"context"
	"fmt"
)

// StatementsText dumps every statement a queue of dialect d would run, for
// explain_test.go to check that the claim SELECTs it EXPLAINs are still the
// ones in use. A dump, not fields, so the check survives a reshuffle of the
// statements struct and fails only when the SQL itself changes.
func StatementsText(d Dialect, mariaDB bool) string {
	s := newStatements(d, mariaDB)
	text := fmt.Sprintf("%+v", s)
	if s.reserveCandidates != nil {
		text += "\n" + s.reserveCandidates("")
	}
	return text
}

// SessionIsolation reports the isolation level of a connection from q's
// own pool (MySQL: transaction_isolation, or MariaDB's tx_isolation).
func SessionIsolation(ctx context.Context, q *Queue) (string, error) {
	var level string
	err := q.db.QueryRow(ctx, "SELECT @@SESSION.transaction_isolation").Scan(&level)
	if err != nil {
		err = q.db.QueryRow(ctx, "SELECT @@SESSION.tx_isolation").Scan(&level)
	}
	return level, err
}

// SetCopyThreshold changes the size from which PushMany uses COPY, so a
// benchmark can time both paths on the same batch; it returns the undo.
func SetCopyThreshold(n int) (restore func()) {
	old := copyThreshold
	copyThreshold = n
	return func() { copyThreshold = old }
}
