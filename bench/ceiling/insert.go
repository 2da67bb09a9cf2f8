package ceiling

import (
	"context"
	"errors"
	"sync"
)

// The insert workload (Options.Insert): every job's handler inserts one
// row into a table of the benchmark's own, effects, in a transaction that
// also deletes the job with its ownership checked, as a transactional
// dbqueue handler (worker.HandleTx) does:
//
//	claim B ids (as above)
//	per job, at most TxConcurrency at once over all W claimers:
//	  BEGIN; INSERT INTO effects (job_id) VALUES (id);
//	  DELETE FROM jobs WHERE id = ? AND attempts = ?; COMMIT
//
// This is the hand-written loop a transactional handler is measured
// against: the same statements, nothing else.

// Effects is the table (in Schema) the insert workload's jobs write to.
const Effects = "effects"

// InsertSuffix is appended to a ceiling's name in the insert workload:
// "ceiling-pg-tx".
const InsertSuffix = "-tx"

// DefaultTxConcurrency is Options.TxConcurrency when left 0: dbqueue's
// worker Concurrency in the benchmark.
const DefaultTxConcurrency = 100

// errNotOwned is a per-job delete that found its row taken by another
// reservation: the loop's ownership check failed.
var errNotOwned = errors.New("ownership check: the job's row was not ours to delete")

// fanOut runs one job's transaction per claimed job, at most cap(sem) at
// once across all claimers of the loop, and returns when all have ended.
func fanOut(ctx context.Context, sem chan struct{}, jobs []claimed, tx func(context.Context, claimed) error) (int, error) {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		done  int
	)
	for _, j := range jobs {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return done, ctx.Err()
		}
		wg.Go(func() {
			defer func() { <-sem }()
			err := tx(ctx, j)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if first == nil {
					first = err
				}
				return
			}
			done++
		})
	}
	wg.Wait()
	return done, first
}
