package dbqueue

import (
	"context"
	"fmt"
	"time"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// Releasing is one held job for ReleaseMany to put back.
type Releasing struct {
	Job *Job
	// Delay is how long after the database's now the job is available
	// again (whole seconds, as Laravel counts it).
	Delay time.Duration
	// Payload, when not nil, replaces the job's payload, as
	// ReleaseWithPayload does.
	Payload []byte
}

// ReleaseMany puts held jobs back in one statement per 1,000, each checked
// against its own reservation, and returns those that were no longer held
// (and so were left alone). Rows are updated in place, as Release does.
// Jobs released with a new Payload get their Payload and RawPayload
// updated. Workers use it to write the releases of many failing jobs
// together.
func (q *Queue) ReleaseMany(ctx context.Context, rs []Releasing) (lost []*Job, err error) {
	decoded := make([]Payload, len(rs))
	for i, r := range rs {
		if r.Delay < 0 {
			return nil, fmt.Errorf("dbqueue: ReleaseMany job %d: negative delay %v", r.Job.ID, r.Delay)
		}
		if r.Payload != nil {
			if decoded[i], err = DecodePayload(r.Payload); err != nil {
				return nil, fmt.Errorf("dbqueue: ReleaseMany job %d: %w", r.Job.ID, err)
			}
		}
	}
	for start := 0; start < len(rs); start += pushChunk {
		chunk := rs[start:min(start+pushChunk, len(rs))]
		released, err := q.releaseChunk(ctx, chunk)
		if err != nil {
			return lost, sqldb.Wrap("release", err)
		}
		for i, r := range chunk {
			if !released[heldOf(r.Job)] {
				lost = append(lost, r.Job)
			} else if r.Payload != nil {
				r.Job.Payload, r.Job.RawPayload = decoded[start+i], r.Payload
			}
		}
	}
	return lost, nil
}

func (q *Queue) releaseChunk(ctx context.Context, rs []Releasing) (map[held]bool, error) {
	jobs := make([]*Job, len(rs))
	delays, payloads := make([]int64, len(rs)), make([][]byte, len(rs))
	for i, r := range rs {
		jobs[i], delays[i], payloads[i] = r.Job, wholeSeconds(r.Delay), r.Payload
	}
	ids, tokens, attempts := heldColumns(jobs)
	released := make(map[held]bool, len(rs))
	mark := func(hs []held) {
		for _, h := range hs {
			released[h] = true
		}
	}
	err := sqldb.Retry(ctx, func() error {
		clear(released)
		switch q.dialect {
		case Postgres:
			// One statement text whatever the batch, prepared once per
			// connection; a NULL payload keeps the row's own.
			attempts32, texts := make([]int32, len(rs)), make([]*string, len(rs))
			for i, r := range rs {
				attempts32[i] = int32(r.Job.Attempts)
				if r.Payload != nil {
					text := string(r.Payload)
					texts[i] = &text
				}
			}
			hs, err := scanHeld(q.db.Query(ctx, q.stmts.releaseArrays, ids, tokens, attempts32, delays, texts))
			mark(hs)
			return err
		case SQLite:
			query, args := q.stmts.releaseMany(ids, tokens, attempts, delays, payloads, true)
			hs, err := scanHeld(q.db.Query(ctx, query, args...))
			mark(hs)
			return err
		}
		// MySQL has no UPDATE … RETURNING: lock what is still held, update
		// exactly that, and know which rows were released.
		return sqldb.InTx(ctx, q.db, sqldb.TxOptions{ReadCommitted: true}, func(tx sqldb.Tx) error {
			still, err := scanHeld(tx.Query(ctx, q.stmts.selectHeld(ids, tokens, attempts)))
			if err != nil || len(still) == 0 {
				return err
			}
			keep := make(map[held]bool, len(still))
			for _, h := range still {
				keep[h] = true
			}
			var sIDs, sTokens, sAttempts, sDelays []int64
			var sPayloads [][]byte
			for i := range rs {
				if keep[held{ids[i], tokens[i]}] {
					sIDs, sTokens, sAttempts = append(sIDs, ids[i]), append(sTokens, tokens[i]), append(sAttempts, attempts[i])
					sDelays, sPayloads = append(sDelays, delays[i]), append(sPayloads, payloads[i])
				}
			}
			query, args := q.stmts.releaseMany(sIDs, sTokens, sAttempts, sDelays, sPayloads, false)
			if _, err := tx.Exec(ctx, query, args...); err != nil {
				return err
			}
			mark(still)
			return nil
		})
	})
	return released, err
}
