package interop

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/failed"
	"github.com/dbqueue/dbqueue/worker"
)

// Fleet sizes: ok jobs per pusher (in two halves) and failing ones per
// pusher (in two halves).
const (
	fleetJobs    = 1000
	fleetBrittle = 50
)

// A Laravel worker process and a Go worker drain one queue at once while
// PHP and Go push into it: 2,000 jobs, each run exactly once by one of
// them. Jobs that fail on either side land in one failed_jobs that both
// `php failed.php list` and failed.Store see; Go retries half of them and
// PHP the other half, and they run once more.
func TestMixedFleet(t *testing.T) {
	t.Parallel()
	each(t, true, func(t *testing.T, s *side) {
		ctx := context.Background()
		s.laravelTables(t)
		q := s.Queue(t)

		var healed atomic.Bool // Go's side of DBQ_HEALED
		// The Go worker runs two jobs at a time, each taking a few
		// milliseconds, and claims no more than it runs: unthrottled it
		// would leave the PHP worker (one job at a time, ~300/s) too few
		// jobs to show that both sides share the queue.
		newGoWorker := func(stopWhenEmpty bool) *worker.Worker {
			w, err := worker.New(q, worker.Options{
				Concurrency: 2, Prefetch: -1, Sleep: 100 * time.Millisecond, StopWhenEmpty: stopWhenEmpty, Logger: quietLogger(t),
			})
			if err != nil {
				t.Fatal(err)
			}
			type data struct{ Key string }
			worker.HandleJSON(w, recorderHandle, func(ctx context.Context, job *dbqueue.Job, d data) error {
				time.Sleep(3 * time.Millisecond) // the job's work, so PHP and Go workers interleave
				return s.record(ctx, d.Key)
			})
			worker.HandleJSON(w, recorderBrittle, func(ctx context.Context, job *dbqueue.Job, d data) error {
				if !healed.Load() {
					return fmt.Errorf("interop: brittle failure for key %s", d.Key)
				}
				return s.record(ctx, d.Key)
			})
			return w
		}

		start := time.Now()
		php := s.startPHPWorker(t, nil, "--no-stop-when-empty", "--sleep=0.1", "--max-time=100")
		gw := startGoWorker(t, newGoWorker(false))

		// Both sides push while both workers drain.
		var (
			wg       sync.WaitGroup
			pushErrs = make(chan error, 2)
		)
		wg.Go(func() {
			for _, half := range []string{"a", "b"} {
				for _, args := range [][]string{
					{"string", fmt.Sprint(fleetJobs / 2), "--key=php-" + half},
					{"string", fmt.Sprint(fleetBrittle / 2), "--key=brittle-php-" + half, "--job=" + recorderBrittle},
				} {
					if _, err := s.tryPHP(nil, "push.php", args...); err != nil {
						pushErrs <- err
						return
					}
				}
			}
		})
		wg.Go(func() {
			const batch = fleetJobs / fleetBrittle // one brittle job per batch
			for i := 0; i < fleetJobs; i += batch {
				jobs := make([]dbqueue.NewJob, 0, batch+1)
				for j := i; j < i+batch; j++ {
					jobs = append(jobs, dbqueue.NewJob{Name: recorderHandle, Data: map[string]string{"key": fmt.Sprintf("go-%d", j+1)}})
				}
				jobs = append(jobs, dbqueue.NewJob{Name: recorderBrittle, Data: map[string]string{"key": fmt.Sprintf("brittle-go-%d", i/batch+1)}})
				if _, err := q.PushMany(ctx, jobs); err != nil {
					pushErrs <- err
					return
				}
				time.Sleep(20 * time.Millisecond) // the pushes' pace, spread over the run: not a wait
			}
		})
		wg.Wait()
		close(pushErrs)
		for err := range pushErrs {
			t.Fatal(err)
		}
		pushed := time.Since(start)

		const total = 2 * fleetJobs
		eventually(t, 90*time.Second, func() bool {
			return s.Count(t, "SELECT COUNT(*) FROM interop_runs") >= total &&
				s.Count(t, "SELECT COUNT(*) FROM failed_jobs") >= 2*fleetBrittle &&
				s.Count(t, "SELECT COUNT(*) FROM jobs") == 0
		}, func() string {
			return fmt.Sprintf("ledger has %d rows, failed_jobs %d, jobs %d\nphp worker:\n%s",
				s.Count(t, "SELECT COUNT(*) FROM interop_runs"), s.Count(t, "SELECT COUNT(*) FROM failed_jobs"),
				s.Count(t, "SELECT COUNT(*) FROM jobs"), tail(php.out.String()))
		})
		drained := time.Since(start)
		if err := gw.stop(); err != nil {
			t.Errorf("Go worker: %v", err)
		}
		if err := php.stop(); err != nil {
			t.Errorf("php work.php: %v\n%s", err, tail(php.out.String()))
		}

		// Exactly once each, and both sides took part, in both directions.
		runs := s.runs(t)
		ranBy := map[string]map[string]int{"php": {}, "go": {}} // runner → pusher → jobs
		want := map[string]bool{}
		for i := range fleetJobs {
			want[fmt.Sprintf("go-%d", i+1)] = true
			want[fmt.Sprintf("php-%s-%d", []string{"a", "b"}[i/(fleetJobs/2)], i%(fleetJobs/2)+1)] = true
		}
		for key, runners := range runs {
			if !want[key] {
				t.Errorf("job %s ran %v, but no such job should have run", key, runners)
				continue
			}
			if len(runners) != 1 {
				t.Errorf("job %s ran %d times (%v), want once", key, len(runners), runners)
			}
			pusher, _, _ := strings.Cut(key, "-")
			for _, r := range runners {
				if ranBy[r] == nil {
					t.Errorf("job %s ran by unknown runner %q", key, r)
					continue
				}
				ranBy[r][pusher]++
			}
		}
		for key := range want {
			if _, ok := runs[key]; !ok {
				t.Errorf("job %s never ran", key)
			}
		}
		if n := s.Count(t, "SELECT COUNT(*) FROM jobs"); n != 0 {
			t.Errorf("%d jobs left in jobs", n)
		}
		t.Logf("%s: pushed in %v, drained in %v; php ran %v, go ran %v (by pusher)", s.Dialect, pushed.Round(time.Millisecond), drained.Round(time.Millisecond), ranBy["php"], ranBy["go"])
		for runner, by := range ranBy {
			for _, pusher := range []string{"php", "go"} {
				if by[pusher] == 0 {
					t.Errorf("the %s worker ran none of the jobs %s pushed: the workers did not share the queue", runner, pusher)
				}
			}
		}

		// One failed_jobs, seen alike by both sides.
		store := newStore(t, q)
		list, err := store.List(ctx, failed.Filter{Limit: failed.MaxLimit})
		if err != nil {
			t.Fatal(err)
		}
		goUUIDs := map[string]bool{}
		failedBy := map[string]int{}
		for _, f := range list {
			goUUIDs[f.UUID] = true
			key := payloadKey(mustDecode(t, f.Payload))
			switch {
			case f.Name() != recorderBrittle || f.Connection != "database" || f.Queue != "default":
				t.Errorf("failed job %s: name %q, connection %q, queue %q", f.UUID, f.Name(), f.Connection, f.Queue)
			case f.Exception == "interop: brittle failure for key "+key:
				failedBy["go"]++
			case strings.HasPrefix(f.Exception, "RuntimeException: interop: brittle failure for key "+key+" in "):
				failedBy["php"]++
			default:
				t.Errorf("failed job %s (%s) has exception %q", f.UUID, key, firstLine(f.Exception))
			}
		}
		if len(list) != 2*fleetBrittle {
			t.Fatalf("failed.Store.List found %d failed jobs, want %d", len(list), 2*fleetBrittle)
		}
		t.Logf("%s: failed by php %d, by go %d", s.Dialect, failedBy["php"], failedBy["go"])
		if failedBy["php"] == 0 || failedBy["go"] == 0 {
			t.Errorf("failures by side = %v: want both workers to have failed some", failedBy)
		}
		phpUUIDs := map[string]bool{}
		for _, f := range s.phpFailedList(t) {
			phpUUIDs[f.UUID] = true
		}
		if !maps.Equal(goUUIDs, phpUUIDs) {
			t.Fatalf("php failed.php list sees %d uuids, failed.Store.List %d: not the same set", len(phpUUIDs), len(goUUIDs))
		}

		// Go retries half, Laravel's queue:retry the other half.
		uuids := slices.Sorted(maps.Keys(goUUIDs))
		goHalf, phpHalf := uuids[:fleetBrittle], uuids[fleetBrittle:]
		if n, err := store.Retry(ctx, goHalf...); err != nil || n != len(goHalf) {
			t.Fatalf("failed.Store.Retry = %d, %v", n, err)
		}
		out := s.runPHP(t, nil, "failed.php", append([]string{"retry"}, phpHalf...)...)
		if n := len(strings.Fields(out)); n != 2*len(phpHalf) {
			t.Fatalf("failed.php retry printed %q, want a uuid and job id for each of %d jobs", out, len(phpHalf))
		}
		if n := s.Count(t, "SELECT COUNT(*) FROM failed_jobs"); n != 0 {
			t.Fatalf("failed_jobs has %d rows after both retries", n)
		}
		if n := s.Count(t, "SELECT COUNT(*) FROM jobs WHERE attempts = 0 AND reserved_at IS NULL"); n != 2*fleetBrittle {
			t.Fatalf("jobs has %d fresh rows after the retries, want %d", n, 2*fleetBrittle)
		}

		// Healed, both sides drain the retried jobs.
		healed.Store(true)
		php = s.startPHPWorker(t, []string{"DBQ_HEALED=1"}, "--sleep=0.1")
		gw = startGoWorker(t, newGoWorker(true))
		if err := gw.wait(); err != nil {
			t.Errorf("Go worker: %v", err)
		}
		php.wait(t)
		runs = s.runs(t)
		for i := range fleetBrittle {
			for _, key := range []string{fmt.Sprintf("brittle-go-%d", i+1), fmt.Sprintf("brittle-php-%s-%d", []string{"a", "b"}[i/(fleetBrittle/2)], i%(fleetBrittle/2)+1)} {
				if len(runs[key]) != 1 {
					t.Errorf("retried job %s ran %v, want once", key, runs[key])
				}
			}
		}
		if len(runs) != total+2*fleetBrittle {
			t.Errorf("ledger has %d keys, want %d", len(runs), total+2*fleetBrittle)
		}
		if n := s.Count(t, "SELECT COUNT(*) FROM jobs") + s.Count(t, "SELECT COUNT(*) FROM failed_jobs"); n != 0 {
			t.Errorf("%d rows left in jobs and failed_jobs", n)
		}
	})
}

func mustDecode(t testing.TB, payload []byte) dbqueue.Payload {
	t.Helper()
	p, err := dbqueue.DecodePayload(payload)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
