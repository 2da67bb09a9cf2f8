package interop

import (
	"context"
	"slices"
	"testing"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/worker"
)

// recorderArgs is a typed job whose kind is the PHP recorder's
// Class@method: the same kind runs on Laravel's worker and on Go's.
type recorderArgs struct {
	Key string `json:"key"`
}

func (recorderArgs) Kind() string { return recorderHandle }

// A typed job pushed from Go is a string job Laravel's worker runs, and a
// string job Laravel pushes reaches the Go handler Register made for the
// same kind.
func TestTypedJobsBothWays(t *testing.T) {
	t.Parallel()
	each(t, false, func(t *testing.T, s *side) {
		ctx := context.Background()
		s.ensureLedger(t)
		q := s.Queue(t)

		s.pushPHP(t, "string", "1", "--key=from-php")
		w, err := worker.New(q, worker.Options{Logger: quietLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		worker.Register(w, func(ctx context.Context, job *dbqueue.Job, a recorderArgs) error {
			return s.record(ctx, a.Key)
		})
		res, err := w.RunOnce(ctx)
		if err != nil || len(res) != 1 || res[0].Outcome != worker.OutcomeDone {
			t.Fatalf("Go worker on Laravel's string job: %+v, %v; want it done", res, err)
		}

		if _, err := dbqueue.PushArgs(ctx, q, recorderArgs{Key: "from-go"}, dbqueue.JobOptions{MaxTries: 1}); err != nil {
			t.Fatal(err)
		}
		s.startPHPWorker(t, nil, "--tries=1").wait(t)

		runs := s.runs(t)
		if !slices.Equal(runs["from-php"], []string{"go"}) || !slices.Equal(runs["from-go"], []string{"php"}) {
			t.Fatalf("ledger %v: want from-php run by go, from-go by php", runs)
		}
		if n := s.Count(t, "SELECT COUNT(*) FROM jobs"); n != 0 {
			t.Fatalf("%d jobs left", n)
		}
		if n := s.Count(t, "SELECT COUNT(*) FROM failed_jobs"); n != 0 {
			t.Fatalf("%d failed jobs", n)
		}
	})
}
