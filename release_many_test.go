package dbqueue_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// ReleaseMany puts many held jobs back in one statement, each with its own
// delay and optional new payload, checked per job against its reservation.
func TestReleaseMany(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		for _, name := range []string{"a", "b", "c", "d"} {
			push(t, q, dbqueue.NewJob{Name: name})
		}
		jobs := reserve(t, q, 4)
		if len(jobs) != 4 {
			t.Fatalf("reserved %d", len(jobs))
		}
		// d is released on its own first: the batch no longer holds it.
		if err := q.Release(ctx, jobs[3], 0); err != nil {
			t.Fatal(err)
		}
		payload, err := dbqueue.WithKey(jobs[1].RawPayload, "exceptions", 2)
		if err != nil {
			t.Fatal(err)
		}
		rs := []dbqueue.Releasing{
			{Job: jobs[0]},
			{Job: jobs[1], Delay: time.Hour, Payload: payload},
			{Job: jobs[2], Delay: 1500 * time.Millisecond}, // whole seconds, rounded up
			{Job: jobs[3], Delay: time.Hour},
		}
		// Bad input changes nothing.
		if _, err := dbqueue.ReleaseMany(ctx, q, []dbqueue.Releasing{{Job: jobs[0]}, {Job: jobs[2], Delay: -time.Second}}); err == nil || !strings.Contains(err.Error(), "negative delay") {
			t.Fatalf("negative delay: %v", err)
		}
		if _, err := dbqueue.ReleaseMany(ctx, q, []dbqueue.Releasing{{Job: jobs[0], Payload: []byte(`{"job":`)}}); err == nil || !strings.Contains(err.Error(), "malformed payload") {
			t.Fatalf("malformed payload: %v", err)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE reserved_at IS NOT NULL"); n != 3 {
			t.Fatalf("%d jobs still reserved after refused calls, want 3", n)
		}

		lost, err := dbqueue.ReleaseMany(ctx, q, rs)
		if err != nil {
			t.Fatal(err)
		}
		if len(lost) != 1 || lost[0] != jobs[3] {
			t.Fatalf("lost %v, want only d (released before)", lost)
		}
		if jobs[1].Payload.Exceptions != 2 || string(jobs[1].RawPayload) != string(payload) {
			t.Fatalf("b's payload not updated on the Job: %+v", jobs[1].Payload)
		}
		type row struct {
			attempts int
			delay    int64
			payload  string
		}
		got := map[int64]row{}
		rows, err := db.SQL.Query(db.Dialect.Rebind("SELECT id, attempts, available_at - created_at, payload FROM jobs WHERE reserved_at IS NULL"))
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id int64
			var r row
			if err := rows.Scan(&id, &r.attempts, &r.delay, &r.payload); err != nil {
				t.Fatal(err)
			}
			got[id] = r
		}
		rows.Close()
		if len(got) != 4 {
			t.Fatalf("%d unreserved rows, want all 4: %+v", len(got), got)
		}
		// available_at - created_at: the delay, give or take the second
		// that may have ticked between push and release.
		for i, want := range []int64{0, 3600, 2, 0} {
			r := got[jobs[i].ID]
			if r.attempts != 1 || r.delay < want || r.delay > want+1 {
				t.Errorf("job %s: attempts %d, delay %ds; want attempts 1 (kept), delay %ds", jobs[i].Name(), r.attempts, r.delay, want)
			}
		}
		if got[jobs[1].ID].payload != string(payload) || got[jobs[0].ID].payload != string(jobs[0].RawPayload) {
			t.Errorf("payloads: b %q, a %q; want b's replaced and a's kept", got[jobs[1].ID].payload, got[jobs[0].ID].payload)
		}
		if lost, err := dbqueue.ReleaseMany(ctx, q, rs[:1]); err != nil || len(lost) != 1 {
			t.Fatalf("releasing a released job again: lost %v, %v; want it lost", lost, err)
		}
		if err := q.Delete(ctx, jobs[0]); !errors.Is(err, dbqueue.ErrNotHeld) {
			t.Fatalf("deleting a released job: %v, want ErrNotHeld", err)
		}
	})
}
