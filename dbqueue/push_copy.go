package dbqueue

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// copyThreshold is the smallest PushMany that PostgreSQL gets by COPY. Ids
// must come back, so COPY needs its own transaction, a round trip for the
// ids and the database's clock, and one for the notification. At 1,000 rows
// that cost ate COPY's gain (40k vs 38k rows/s in a side test). At 10,000,
// BenchmarkPushMany10k gives COPY 46.6k jobs/s against 30.0k for the
// multi-row INSERTs (medians of 5).
var copyThreshold = 10_000

// copyIn writes rows with COPY in one transaction and returns their ids in
// order. The ids are drawn from the table's own sequence first and written
// explicitly, and available_at and created_at are computed from the
// database's clock, read in the same transaction, as the INSERT does.
func (q *Queue) copyIn(ctx context.Context, pool *pgxpool.Pool, rows []pushRow) ([]int64, error) {
	var ids []int64
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var now int64
		err := tx.QueryRow(ctx, `SELECT `+Postgres.Now()+`, array_agg(nextval(pg_get_serial_sequence('jobs', 'id')) ORDER BY i)
FROM generate_series(1, $1::int) AS i`, len(rows)).Scan(&now, &ids)
		if err != nil {
			return err
		}
		values := make([][]any, len(rows))
		due := map[string]bool{}
		for i, r := range rows {
			available := now + r.at
			if r.absolute {
				available = r.at
			}
			if available <= now {
				due[r.queue] = true
			}
			values[i] = []any{ids[i], r.queue, string(r.payload), int32(0), available, now}
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"jobs"},
			[]string{"id", "queue", "payload", "attempts", "available_at", "created_at"}, pgx.CopyFromRows(values)); err != nil {
			return err
		}
		if !q.wake.shouldNotify(rows) {
			return nil
		}
		// Inside the transaction, as the INSERT's own notification: a
		// rolled-back push wakes nobody.
		queues := make([]string, 0, len(due))
		for name := range due {
			queues = append(queues, name)
		}
		_, err = tx.Exec(ctx, `SELECT pg_notify('`+notifyChannel+`', q) FROM unnest($1::text[]) AS q`, queues)
		return err
	})
	return ids, err
}
