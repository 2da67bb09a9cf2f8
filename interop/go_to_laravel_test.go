package interop

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
)

// Go pushes string jobs naming a PHP class and method; Laravel's own worker
// runs them, and reads the maxTries, backoff and retryUntil Go wrote into
// the envelope: it retries with Go's backoff, succeeds on the third try
// Go allowed, and fails jobs whose tries or retryUntil run out.
func TestGoPushesLaravelWorks(t *testing.T) {
	t.Parallel()
	each(t, false, func(t *testing.T, s *side) {
		ctx := context.Background()
		s.ensureLedger(t)
		q := s.Queue(t)

		var jobs []dbqueue.NewJob
		want := map[string]bool{}
		for i := range 20 {
			key := fmt.Sprintf("go-%d", i+1)
			if i == 0 {
				key = "go/Zoë ✓ \"1\""
			}
			want[key] = true
			jobs = append(jobs, dbqueue.NewJob{Name: recorderHandle, Data: map[string]any{"key": key, "n": i}})
		}
		jobs = append(jobs,
			// Fails twice, then records: needs the 3 tries Go allows (the
			// PHP worker's own --tries is 1) and waits Go's backoff of 1s, 2s.
			dbqueue.NewJob{Name: recorderFlaky, Data: map[string]any{"key": "flaky", "succeed_on": 3},
				MaxTries: 3, Backoff: []time.Duration{time.Second, 2 * time.Second}},
			// Always fails: two tries, 1s apart, then failed_jobs.
			dbqueue.NewJob{Name: recorderFail, Data: map[string]any{"key": "fail"},
				MaxTries: 2, Backoff: []time.Duration{time.Second}},
			dbqueue.NewJob{Name: recorderHandle, Data: map[string]any{"key": "later"}, Delay: time.Hour},
		)
		want["flaky"] = true
		if _, err := q.PushMany(ctx, jobs); err != nil {
			t.Fatal(err)
		}

		// Laravel releases by deleting the row and inserting a new one with
		// created_at = now and available_at = now + backoff: watch for them.
		type seen struct {
			attempts int
			backoff  int64
		}
		var (
			mu       sync.Mutex
			releases = map[string]map[seen]bool{}
		)
		watch := func() {
			for _, r := range s.jobRows(t) {
				if r.Attempts > 0 && !r.Reserved {
					mu.Lock()
					if releases[r.Key] == nil {
						releases[r.Key] = map[seen]bool{}
					}
					releases[r.Key][seen{r.Attempts, r.AvailableAt - r.CreatedAt}] = true
					mu.Unlock()
				}
			}
		}

		w := s.startPHPWorker(t, nil, "--no-stop-when-empty", "--sleep=0.1", "--max-time=90")
		// Always fails, one try, but retryUntil 10s ahead outranks tries.
		// Pushed once the PHP worker is running jobs: on a loaded machine
		// PHP can take longer than the window to boot.
		eventually(t, 60*time.Second, func() bool { return len(s.runs(t)) > 0 }, func() string {
			return "the PHP worker ran nothing:\n" + tail(w.out.String())
		})
		if _, err := q.Push(ctx, dbqueue.NewJob{Name: recorderFail, Data: map[string]any{"key": "until"},
			MaxTries: 1, Backoff: []time.Duration{time.Second}, RetryUntil: time.Now().Add(10 * time.Second)}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 75*time.Second, func() bool {
			watch()
			return len(s.runs(t)) == len(want) && len(s.failedRows(t)) == 2 && s.Count(t, "SELECT COUNT(*) FROM jobs") == 1
		}, func() string {
			return fmt.Sprintf("ledger %v, failed_jobs %v, jobs %+v\nworker output:\n%s", s.runs(t), sortedKeys(s.failedRows(t)), s.jobRows(t), tail(w.out.String()))
		})
		if err := w.stop(); err != nil {
			t.Fatalf("php work.php: %v\n%s", err, tail(w.out.String()))
		}

		runs := s.runs(t)
		if got, wantKeys := sortedKeys(runs), slices.Sorted(maps.Keys(want)); !slices.Equal(got, wantKeys) {
			t.Errorf("ledger keys = %q, want %q", got, wantKeys)
		}
		for key, runners := range runs {
			if !slices.Equal(runners, []string{"php"}) {
				t.Errorf("job %q ran %v, want once by php", key, runners)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		// Laravel's release reads the clock twice, available_at before
		// created_at: when the second ticks between them, a backoff of b
		// shows as b-1. Either is Laravel using Go's backoff.
		backoffOK := func(got, want int64) bool { return got == want || got == want-1 }
		released := func(key string, want map[int]int64) {
			t.Helper()
			attempts := map[int]bool{}
			for r := range releases[key] {
				attempts[r.attempts] = true
				if b, ok := want[r.attempts]; !ok || !backoffOK(r.backoff, b) {
					t.Errorf("Laravel released %s after attempt %d with backoff %ds; want attempts→backoff %v", key, r.attempts, r.backoff, want)
				}
			}
			if len(attempts) != len(want) {
				t.Errorf("Laravel released %s after attempts %v, want %v", key, attempts, want)
			}
		}
		released("flaky", map[int]int64{1: 1, 2: 2})
		released("fail", map[int]int64{1: 1})
		untilTries := 0
		for r := range releases["until"] {
			untilTries = max(untilTries, r.attempts+1)
			if !backoffOK(r.backoff, 1) {
				t.Errorf("Laravel released the retryUntil job with backoff %d, want 1", r.backoff)
			}
		}
		if untilTries < 2 {
			t.Errorf("the job with maxTries 1 and retryUntil 10s ahead was tried %d times by Laravel, want more than 1 (releases %v)", untilTries, releases["until"])
		}

		fails := s.failedRows(t)
		for _, key := range []string{"fail", "until"} {
			f, ok := fails[key]
			// How Laravel fails a job whose retryUntil ran out depends on
			// timing, not on Go: if its last try lands in retryUntil's own
			// second, the handler's exception is recorded; if the release's
			// 1s backoff carries the next pickup past retryUntil, the worker
			// fails it before it runs with MaxAttemptsExceededException.
			// Both are Laravel reading Go's retryUntil.
			exception := strings.HasPrefix(f.Exception, "RuntimeException: interop: deliberate failure for key "+key)
			if key == "until" && strings.HasPrefix(f.Exception, `Illuminate\Queue\MaxAttemptsExceededException: `+recorderClass+` has been attempted too many times`) {
				exception = true
			}
			if !ok || f.Job != recorderFail || f.Connection != "database" || f.Queue != "default" || !exception {
				t.Errorf("failed_jobs[%s] = %+v, want Laravel's failure of the Go job", key, f)
			}
		}
		rows := s.jobRows(t)
		if len(rows) != 1 || rows[0].Key != "later" || rows[0].Attempts != 0 || rows[0].AvailableAt-rows[0].CreatedAt != 3600 {
			t.Errorf("jobs = %+v, want only the job Go delayed by an hour", rows)
		}
	})
}
