package dbqueue_test

import (
	"errors"
	"testing"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// Worker A's reservation runs out while it is stalled; worker B reclaims
// the job, and it fails with the same text A's failure carries (the same
// upstream was down for both). A's Fail, retried after its reply was lost,
// finds the row gone and failed_jobs holding this uuid and this text — B's
// work, not its own: it must report the job not held, or A's worker fires
// the failure hooks a second time for one failure.
func TestStaleFailWithTheSameTextIsNotTakenForItsOwn(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		push(t, q, dbqueue.NewJob{Name: "flaky"})
		a := reserve(t, q, 1)[0]
		db.Exec(t, "UPDATE jobs SET reserved_at = reserved_at - 100000 WHERE id = ?", a.ID) // A's reservation ran out
		b := reserve(t, q, 1)
		if len(b) != 1 || b[0].ID != a.ID {
			t.Fatalf("worker B reserved %v, want job %d", b, a.ID)
		}
		cause := errors.New("upstream answered 503")
		if err := q.Fail(ctx, b[0], cause); err != nil {
			t.Fatalf("B's Fail: %v", err)
		}
		if err := q.Fail(ctx, a, errors.New("upstream answered 503")); !errors.Is(err, dbqueue.ErrNotHeld) {
			t.Fatalf("stale holder's Fail with B's very text: %v, want ErrNotHeld (B failed the job, not A)", err)
		}
		// B's own Fail retried after a lost reply is still its own work.
		retried := *b[0]
		if err := q.Fail(ctx, &retried, cause); err != nil {
			t.Fatalf("B's Fail retried after a lost reply: %v, want nil", err)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM failed_jobs WHERE uuid = ?", a.Payload.UUID); n != 1 {
			t.Fatalf("failed_jobs holds %d rows for the job, want 1", n)
		}
	})
}
