package dbqueue

import (
	"context"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// batchDiscarded counts a job deleted without running as processed in its
// batch, inside tx.
func (q *Queue) batchDiscarded(ctx context.Context, tx sqldb.Tx, payload []byte) error {
	return nil
}
