package dbqueue

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/dbqueue/dbqueue/internal/dialect"
)

// Job is a reserved job: a row of the jobs table that the caller holds
// until it deletes, releases or fails it, or retry_after passes.
//
// A claim allocates its Jobs together, in one slice, and copies their
// payloads into shared 32 KiB blocks, which cut the garbage collector's
// work per job by a tenth or more. Each Job and payload is its own to
// read, change and append to, but a Job kept long after it is finished
// keeps the memory of its whole claim (up to 1,000 Jobs, about 600 KB
// with their payloads): keep its ID or a copy of what you need instead.
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
	// limited: the job runs under a concurrency limit; its end wakes
	// the workers of this process (Queue.placesFreed).
	limited bool
}

// ExpiresAt is when, by this process's clock, the reservation runs out and
// another worker may take the job: finish it before then.
func (j *Job) ExpiresAt() time.Time { return j.expires }

// Name is the name the job's handler is registered under.
func (j *Job) Name() string { return j.Payload.Name() }

// Limited reports whether the job runs under a concurrency limit
// (Concurrency): its place in the limit is taken until it ends.
func (j *Job) Limited() bool { return j.limited }

// Decode unmarshals the job's data into v.
func (j *Job) Decode(v any) error {
	if err := json.Unmarshal(j.Payload.Data, v); err != nil {
		return fmt.Errorf("dbqueue: job %d (%s): decode data into %T: %w", j.ID, j.Name(), v, err)
	}
	return nil
}

// newJob fills j, a zero Job, from a claimed row; the error says why its
// payload did not decode (the Job is usable for Fail all the same).
func newJob(j *Job, r dialect.JobRow, expires time.Time) error {
	*j = Job{
		ID: r.ID, Queue: r.Queue, Attempts: r.Attempts, RawPayload: r.Payload,
		AvailableAt: time.Unix(r.AvailableAt, 0), CreatedAt: time.Unix(r.CreatedAt, 0),
		expires: expires, token: r.Token, limited: r.Limited,
	}
	if r.Reserved {
		j.ReservedAt = time.Unix(r.ReservedAt, 0)
	}
	return decodePayload(r.Payload, &j.Payload)
}

// held is the reservation the job's claim drew.
func (j *Job) held() dialect.Held {
	return dialect.Held{ID: j.ID, Token: j.token, Attempts: j.Attempts}
}
