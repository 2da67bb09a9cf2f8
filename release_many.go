package dbqueue

import (
	"context"
	"fmt"
	"time"

	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// Releasing is one held job to put back.
type Releasing struct {
	Job *Job
	// Delay is how long after the database's now the job is available
	// again (whole seconds, as Laravel counts it).
	Delay time.Duration
	// Payload, when not nil, replaces the job's payload, as
	// ReleaseWithPayload does.
	Payload []byte
	// Cause, when not nil, is why the attempt failed: it is added to the
	// job's error history, as ReleaseAfterError does.
	Cause error
}

// releaseMany puts held jobs back in one statement per 1,000, each checked
// against its own reservation, and returns those that were no longer held
// (and so were left alone). Rows are updated in place, as Release does.
// Jobs released with a new Payload get their Payload and RawPayload
// updated.
func (q *Queue) releaseMany(ctx context.Context, rs []Releasing) (lost []*Job, err error) {
	decoded := make([]Payload, len(rs))
	for i, r := range rs {
		if r.Delay < 0 {
			return nil, markUnwritable(fmt.Errorf("dbqueue: release job %d: negative delay %v", r.Job.ID, r.Delay))
		}
		if r.Payload != nil {
			if decoded[i], err = DecodePayload(r.Payload); err != nil {
				return nil, markUnwritable(fmt.Errorf("dbqueue: release job %d: %w", r.Job.ID, err))
			}
		}
	}
	for start := 0; start < len(rs); start += finishChunk {
		chunk := rs[start:min(start+finishChunk, len(rs))]
		rel := make([]dialect.Release, len(chunk))
		for i, r := range chunk {
			rel[i] = dialect.Release{Held: r.Job.held(), Delay: wholeSeconds(r.Delay), Payload: r.Payload, Error: releaseError(r.Cause)}
		}
		var released map[dialect.Key]bool
		err := sqldb.Retry(ctx, func() (err error) {
			released, err = q.sql.ReleaseHeld(ctx, q.db, rel)
			return err
		})
		if err != nil {
			return lost, sqldb.Wrap("release", err)
		}
		ended := make([]*Job, len(chunk))
		for i, r := range chunk {
			ended[i] = r.Job
		}
		q.placesFreed(ctx, ended)
		for i, r := range chunk {
			if !released[rel[i].Key()] {
				lost = append(lost, r.Job)
			} else if r.Payload != nil {
				r.Job.Payload, r.Job.RawPayload = decoded[start+i], r.Payload
			}
		}
	}
	return lost, nil
}
