package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dbqueue/dbqueue"
)

// ErrUnwritable is wrapped by the cause a job is failed with when its
// handler's outcome can never be written because of the job's own data:
// a chain link with no usable queue or payload, a release payload that does
// not encode, or data the database refuses (a new payload over MySQL's
// max_allowed_packet: sqldb.Refused, the same test Fail's own fallbacks
// use, see dbqueue.FailureTextBytes). Retrying such a write meets the same fault every time, and a
// job whose success is not written runs again once its reservation runs
// out — forever with unlimited tries — so the worker fails the job at once
// instead, and the cause says whether the handler had succeeded.
var ErrUnwritable = errors.New("its outcome cannot be written, and retrying cannot help: the job is failed rather than run again; fix the producer that wrote its payload")

// recurring marks an error of the worker's own that comes from the job,
// not the database: writing the outcome again meets it again.
type recurring struct{ err error }

func (e recurring) Error() string { return e.err.Error() }
func (e recurring) Unwrap() error { return e.err }

// recurs reports whether err, from writing a job's outcome, comes from
// the job itself rather than the database, so retrying cannot help.
// Database errors — conflicts, lost connections, a server failing over,
// anything unknown — are retried while the reservation lasts.
func (w *Worker) recurs(err error) bool {
	var rc recurring
	return err != nil && (errors.As(err, &rc) || w.ops.Unwritable(err))
}

// successUnwritable is the cause a job whose handler succeeded is failed
// with when its success cannot be written.
func successUnwritable(job *dbqueue.Job, err error) error {
	return fmt.Errorf("%s: the handler succeeded, but %w: %w", job.Name(), ErrUnwritable, err)
}

// release puts job back after delay (with payload when not nil), retrying
// database trouble (persist). A release that can never be written fails
// the job instead, with why it was being released: left reserved, it
// would run again after retry_after and meet the same fault. It reports
// whether the job was failed, and the write's error.
func (r *run) release(job *dbqueue.Job, h *handler, took, delay time.Duration, payload []byte, why error) (failed bool, err error) {
	ctx := r.jobCtx
	err = r.persist(ctx, job, func(ctx context.Context) error {
		return r.releases.release(ctx, job, delay, payload, why)
	})
	if !r.w.recurs(err) {
		return false, err
	}
	cause := fmt.Errorf("%s: the job was to be released (%w), but %w: %w", job.Name(), errOr(why), ErrUnwritable, err)
	r.fail(job, h, took, cause)
	return true, err
}

// errOr is err, or a plain "asked for a release" when there is none.
func errOr(err error) error {
	if err == nil {
		return errReleaseAsked
	}
	return err
}

var errReleaseAsked = errors.New("its handler asked for a release")
