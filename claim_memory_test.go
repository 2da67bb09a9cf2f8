package dbqueue_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// A claim copies its payloads into shared blocks and its Jobs into shared
// chunks. Each job must still own its bytes: appending to one job's
// RawPayload must not write over the next job's, and a payload too large
// for a block, between small ones, must arrive whole.
func TestClaimedJobsKeepTheirOwnPayloads(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		big := strings.Repeat("x", 20<<10) // over a quarter of a block
		var jobs []dbqueue.NewJob
		for i := range 100 {
			text := "job " + strings.Repeat("y", i)
			if i == 50 {
				text = big
			}
			jobs = append(jobs, dbqueue.NewJob{Name: "keep", Data: map[string]any{"n": i, "text": text}})
		}
		if _, err := q.PushMany(ctx, jobs); err != nil {
			t.Fatal(err)
		}
		got := reserve(t, q, len(jobs))
		if len(got) != len(jobs) {
			t.Fatalf("reserved %d jobs, want %d", len(got), len(jobs))
		}
		before := make([][]byte, len(got))
		for i, j := range got {
			before[i] = bytes.Clone(j.RawPayload)
		}
		for _, j := range got {
			_ = append(j.RawPayload, `garbage that must land in a copy`...)
			_ = append(j.Payload.Data, `more`...)
		}
		for i, j := range got {
			if !bytes.Equal(j.RawPayload, before[i]) {
				t.Fatalf("job %d's payload changed when its neighbour's was appended to:\n%s\nwas\n%s", j.ID, j.RawPayload, before[i])
			}
			var data struct {
				N    int
				Text string
			}
			if err := j.Decode(&data); err != nil {
				t.Fatal(err)
			}
			want := "job " + strings.Repeat("y", data.N)
			if data.N == 50 {
				want = big
			}
			if data.Text != want {
				t.Fatalf("job %d (n=%d): text of %d bytes, want %d", j.ID, data.N, len(data.Text), len(want))
			}
		}
		if lost, err := dbqueue.DeleteMany(ctx, q, got); err != nil || len(lost) != 0 {
			t.Fatalf("DeleteMany: lost %d, %v", len(lost), err)
		}
	})
}

// A batch of deletes whose jobs came from one claim shares one
// reservation token and attempts count, and PostgreSQL then sends their
// ids alone. Each row must still be checked: the rows another worker
// reclaimed after retry_after are reported lost and left to it, the others
// deleted.
func TestDeleteManyOfOneClaimChecksEveryRow(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t, dbqueue.WithRetryAfter(60*time.Second))
		if _, err := q.PushMany(ctx, []dbqueue.NewJob{{Name: "a"}, {Name: "b"}, {Name: "c"}, {Name: "d"}}); err != nil {
			t.Fatal(err)
		}
		mine := reserve(t, q, 4)
		if len(mine) != 4 {
			t.Fatalf("reserved %d, want 4", len(mine))
		}
		// The holder stalls: two of its jobs run out and go to another.
		db.Exec(t, "UPDATE jobs SET reserved_at = reserved_at - 61 WHERE id IN (?, ?)", mine[1].ID, mine[3].ID)
		theirs := reserve(t, q, 4)
		if len(theirs) != 2 {
			t.Fatalf("the second worker reserved %d, want the 2 expired", len(theirs))
		}
		lost, err := dbqueue.DeleteMany(ctx, q, mine)
		if err != nil {
			t.Fatal(err)
		}
		if len(lost) != 2 || lost[0] != mine[1] || lost[1] != mine[3] {
			t.Fatalf("lost %v, want jobs %d and %d", lost, mine[1].ID, mine[3].ID)
		}
		var left []int64
		for _, j := range theirs {
			left = append(left, j.ID)
			if err := q.Delete(ctx, j); err != nil {
				t.Fatalf("the new holder's delete of %d: %v", j.ID, err)
			}
		}
		slices.Sort(left)
		if !slices.Equal(left, []int64{mine[1].ID, mine[3].ID}) {
			t.Fatalf("the new holder had %v", left)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 0 {
			t.Fatalf("%d jobs left", n)
		}
	})
}
