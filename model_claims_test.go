package dbqueue_test

import (
	"time"

	"github.com/dbqueue/dbqueue"
)

// mAttempt is the model of what a job's claims leave behind: claimed,
// once any claim took it (an UntilStarted lock ended then, whatever a
// give-back or snooze takes back); abandoned, its reservation follows an
// abandoned attempt (a claim took over an expired reservation, or a row
// given back by such a reservation: dialect.AbandonedMark, by which a
// worker tells an abandoned attempt from a release on the last try);
// carry, a give-back or snooze of such a reservation left the mark for
// the next claim.
type mAttempt struct{ claimed, abandoned, carry bool }

// claimOps are the model's operations on claims beyond the life cycle.
func (m *model) claimOps() []struct {
	weight int
	fn     func()
} {
	return []struct {
		weight int
		fn     func()
	}{{2, m.snooze}}
}

// claimedBy checks what worker w's claim job of mj says, before the model
// counts the claim: it follows an abandoned attempt exactly when it took
// over an expired reservation, or a row given back by a reservation that
// did.
func (m *model) claimedBy(w int, job *dbqueue.Job, mj *mJob) {
	want := mj.state == mReserved && mj.expired || mj.carry
	if got := dbqueue.FollowsAbandoned(job); got != want {
		m.errorf("worker %d claimed job %d (attempt %d): follows an abandoned attempt: %v, model %v (%+v)", w, job.ID, job.Attempts, got, want, mj.mAttempt)
	}
	mj.claimed, mj.abandoned, mj.carry = true, want, false
}

// gaveBack is the model of a give-back or snooze of mj's reservation: the
// attempt it takes back carries its mark to the next claim.
func (mj *mJob) gaveBack() { mj.carry = mj.abandoned }

// snooze has a worker snooze a job it holds: back after a delay, its
// attempt taken back (Queue.Snooze).
func (m *model) snooze() {
	w := m.rng.IntN(modelWorkers)
	for _, job := range m.pick(w, 1) {
		mj := m.holds(job)
		delay := time.Duration(0)
		if m.rng.IntN(2) == 0 {
			delay = modelDelay
		}
		err := m.qs[w].Snooze(ctx, job, delay)
		m.logf("worker %d snoozes job %d (attempt %d, held %v) for %v: %v", w, job.ID, job.Attempts, mj != nil, delay, err)
		m.finished(w, job, mj, err)
		if err == nil && mj != nil {
			mj.state, mj.holder, mj.attempts = mReady, nil, max(mj.attempts-1, 0)
			if delay > 0 {
				mj.state = mDelayed
			}
			mj.gaveBack()
		}
	}
}
