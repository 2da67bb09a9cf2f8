package dbqueue

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// Job is a reserved job: a row of the jobs table that the caller holds
// until it deletes, releases or fails it, or retry_after passes.
type Job struct {
	ID    int64
	Queue string
	// Attempts counts reservations, this one included.
	Attempts    int
	ReservedAt  time.Time
	AvailableAt time.Time
	CreatedAt   time.Time
	// Payload is the decoded envelope.
	Payload Payload
	// RawPayload is the payload column as stored.
	RawPayload []byte

	expires time.Time // local clock
	// token is the reservation token the claim drew: with ID it names this
	// reservation, and no other claim of the row ever gets the same one.
	token int64
}

// ExpiresAt is when, by this process's clock, the reservation runs out and
// another worker may take the job: finish it before then.
func (j *Job) ExpiresAt() time.Time { return j.expires }

// Name is the name the job's handler is registered under.
func (j *Job) Name() string { return j.Payload.Name() }

// Decode unmarshals the job's data into v.
func (j *Job) Decode(v any) error {
	if err := json.Unmarshal(j.Payload.Data, v); err != nil {
		return fmt.Errorf("dbqueue: job %d (%s): decode data into %T: %w", j.ID, j.Name(), v, err)
	}
	return nil
}

// jobRow is a scanned row before its payload is decoded.
type jobRow struct {
	job    Job
	badErr error // the payload did not decode
}

func scanJob(rows sqldb.Rows, extra ...any) (jobRow, error) {
	var (
		r                       jobRow
		payload                 []byte
		reserved                sql.NullInt64
		available, created, att int64
	)
	dest := append([]any{&r.job.ID, &r.job.Queue, &payload, &att, &reserved, &available, &created, &r.job.token}, extra...)
	if err := rows.Scan(dest...); err != nil {
		return r, err
	}
	r.job.Attempts = int(att)
	r.job.RawPayload = payload
	if reserved.Valid {
		r.job.ReservedAt = time.Unix(reserved.Int64, 0)
	}
	r.job.AvailableAt = time.Unix(available, 0)
	r.job.CreatedAt = time.Unix(created, 0)
	r.job.Payload, r.badErr = DecodePayload(payload)
	return r, nil
}
