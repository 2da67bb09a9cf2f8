package interop

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/worker"
)

// released is one release the Go worker made, as the jobs row then stood.
type released struct {
	attempts int
	delay    int64 // available_at minus the reservation time, in seconds
}

// Laravel pushes string jobs and object jobs; a Go worker runs them,
// routing string jobs by "Class@method" or by class and object jobs by
// displayName, and takes each job's tries, backoff, timeout and retryUntil
// from the payload Laravel wrote rather than from its own options.
func TestLaravelPushesGoWorks(t *testing.T) {
	t.Parallel()
	each(t, true, func(t *testing.T, s *side) {
		s.laravelTables(t)

		s.pushPHP(t, "string", "3", "--key=s", `--data={"n":42,"path":"a/b","name":"Zoë","nested":{"list":[1,2.5,true,null]}}`)
		s.pushPHP(t, "string", "1", "--key=by-class", `--job=DbqInterop\Mailer@send`)
		s.pushPHP(t, "object", "2", "--key=obj")
		s.pushPHP(t, "object", "1", "--key=tries", "--throw", "--tries=3", "--backoff=1,2")
		s.pushPHP(t, "object", "1", "--key=expired", "--retry-for=-10")
		s.pushPHP(t, "object", "1", "--key=timeout", "--tries=1", "--timeout=1")
		s.pushPHP(t, "string", "1", "--key=later", "--delay=3600")
		// Last, so the worker starts well before its retryUntil passes.
		s.pushPHP(t, "object", "1", "--key=until", "--throw", "--tries=1", "--backoff=1", "--retry-for=4")

		var (
			mu        sync.Mutex
			problems  []string           // what the handlers found wrong
			calls     = map[string]int{} // handler runs by key
			callTimes = map[string][]time.Time{}
			budget    = map[string]time.Duration{} // handler context's time to its deadline, by key
			releases  = map[string][]released{}
		)
		problem := func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			problems = append(problems, fmt.Sprintf(format, args...))
		}
		called := func(ctx context.Context, key string) {
			mu.Lock()
			defer mu.Unlock()
			calls[key]++
			callTimes[key] = append(callTimes[key], time.Now())
			if d, ok := ctx.Deadline(); ok {
				budget[key] = time.Until(d)
			}
		}

		q := s.Queue(t)
		w, err := worker.New(q, worker.Options{
			Concurrency: 4,
			Sleep:       100 * time.Millisecond,
			Timeout:     20 * time.Second, // payload timeouts must win over this
			Logger:      quietLogger(t),
			Events: worker.Events{
				JobReleasedAfterException: func(ctx context.Context, job *dbqueue.Job, delay time.Duration) {
					var (
						at       int64
						reserved sql.NullInt64
					)
					err := s.SQL.QueryRowContext(ctx, s.Dialect.Rebind("SELECT available_at, reserved_at FROM jobs WHERE id = ?"), job.ID).Scan(&at, &reserved)
					if err != nil || reserved.Valid {
						problem("job %d released, but its row reads %v, reserved_at %v", job.ID, err, reserved)
						return
					}
					mu.Lock()
					defer mu.Unlock()
					key := payloadKey(job.Payload)
					releases[key] = append(releases[key], released{job.Attempts, at - job.ReservedAt.Unix()})
				},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		type stringData struct {
			Key    string `json:"key"`
			N      int    `json:"n"`
			Path   string `json:"path"`
			Name   string `json:"name"`
			Nested struct {
				List []any `json:"list"`
			} `json:"nested"`
		}
		worker.HandleJSON(w, recorderHandle, func(ctx context.Context, job *dbqueue.Job, d stringData) error {
			called(ctx, d.Key)
			if d.N != 42 || d.Path != "a/b" || d.Name != "Zoë" || !slices.Equal(d.Nested.List, []any{1.0, 2.5, true, nil}) {
				problem("string job %s: data %s decoded as %+v", d.Key, job.Payload.Data, d)
			}
			return s.record(ctx, d.Key)
		})
		// Registered by class only: Laravel's "Class@method" reaches it.
		worker.HandleJSON(w, `DbqInterop\Mailer`, func(ctx context.Context, job *dbqueue.Job, d stringData) error {
			called(ctx, d.Key)
			if job.Payload.Job != `DbqInterop\Mailer@send` {
				problem("class handler got job %q", job.Payload.Job)
			}
			return s.record(ctx, d.Key)
		})
		w.Handle(interopJob, func(ctx context.Context, job *dbqueue.Job) error {
			var data struct {
				CommandName string `json:"commandName"`
				Command     string `json:"command"`
			}
			if err := json.Unmarshal(job.Payload.Data, &data); err != nil {
				return worker.FailNow(err)
			}
			key, ok := phpStringProp(data.Command, "key")
			if !ok {
				return worker.FailNow(fmt.Errorf("no key in command %q", data.Command))
			}
			called(ctx, key)
			if data.CommandName != interopJob || !strings.HasPrefix(data.Command, `O:21:"DbqInterop\InteropJob":`) {
				problem("object job %s: data.commandName %q, data.command %q", key, data.CommandName, data.Command)
			}
			if key == "timeout" {
				<-ctx.Done() // runs past the payload's 1s timeout
				return ctx.Err()
			}
			if throw, _ := phpBoolProp(data.Command, "shouldThrow"); throw {
				return fmt.Errorf("interop: deliberate object-job failure for key %s", key)
			}
			return s.record(ctx, key)
		})

		g := startGoWorker(t, w)
		doneKeys := []string{"by-class", "obj-1", "obj-2", "s-1", "s-2", "s-3"}
		failedKeys := []string{"expired", "timeout", "tries", "until"}
		eventually(t, 30*time.Second, func() bool {
			return len(s.runs(t)) == len(doneKeys) && len(s.failedRows(t)) == len(failedKeys)
		}, func() string {
			return fmt.Sprintf("ledger %v, failed_jobs %v, jobs %+v", s.runs(t), sortedKeys(s.failedRows(t)), s.jobRows(t))
		})
		if err := g.stop(); err != nil {
			t.Fatal(err)
		}

		mu.Lock()
		defer mu.Unlock()
		for _, p := range problems {
			t.Error(p)
		}
		runs := s.runs(t)
		if got := sortedKeys(runs); !slices.Equal(got, doneKeys) {
			t.Errorf("ledger keys = %v, want %v", got, doneKeys)
		}
		for key, runners := range runs {
			if !slices.Equal(runners, []string{"go"}) {
				t.Errorf("job %s ran %v, want once by go", key, runners)
			}
		}
		fails := s.failedRows(t)
		if got := sortedKeys(fails); !slices.Equal(got, failedKeys) {
			t.Fatalf("failed_jobs keys = %v, want %v", got, failedKeys)
		}
		for key, f := range fails {
			if f.Connection != "database" || f.Queue != "default" || f.Job != interopJob {
				t.Errorf("failed job %s: %+v", key, f)
			}
		}

		// tries=3, backoff 1,2: three attempts, released after 1s then 2s.
		if calls["tries"] != 3 {
			t.Errorf("job with tries=3 ran %d times, want 3", calls["tries"])
		}
		if r := releases["tries"]; len(r) != 2 || r[0].attempts != 1 || r[1].attempts != 2 ||
			r[0].delay < 1 || r[0].delay > 2 || r[1].delay < 2 || r[1].delay > 3 {
			t.Errorf("releases of the tries=3 backoff=1,2 job = %+v, want attempt 1 due 1s later, attempt 2 due 2s later", r)
		}
		if !strings.Contains(fails["tries"].Exception, "deliberate object-job failure for key tries") {
			t.Errorf("tries job failed with %q", fails["tries"].Exception)
		}
		// Times are whole seconds, so a 2s backoff waits at least 1s.
		if at := callTimes["tries"]; len(at) == 3 && at[2].Sub(at[1]) < time.Second {
			t.Errorf("the third attempt came %v after the second, despite a 2s backoff", at[2].Sub(at[1]))
		}
		// retryUntil 4s ahead outranks tries=1: retried until it passes.
		if calls["until"] < 2 {
			t.Errorf("job with tries=1 and retryUntil 4s ahead ran %d times, want more than 1", calls["until"])
		}
		for _, r := range releases["until"] {
			if r.delay < 1 || r.delay > 2 {
				t.Errorf("until job released with delay %ds, want its backoff of 1s", r.delay)
			}
		}
		// retryUntil already passed: failed without running.
		if calls["expired"] != 0 || !strings.Contains(fails["expired"].Exception, worker.ErrMaxAttempts.Error()) {
			t.Errorf("job past its retryUntil ran %d times and failed with %q, want failed unrun with %q",
				calls["expired"], fails["expired"].Exception, worker.ErrMaxAttempts)
		}
		// timeout=1: the handler's context ends after 1s, not the worker's 20s.
		if b := budget["timeout"]; calls["timeout"] != 1 || b <= 0 || b > time.Second {
			t.Errorf("job with timeout=1 ran %d times with %v to its deadline, want once with at most 1s", calls["timeout"], b)
		}
		if !strings.Contains(fails["timeout"].Exception, worker.ErrTimeout.Error()) {
			t.Errorf("timed-out job failed with %q, want %q", fails["timeout"].Exception, worker.ErrTimeout)
		}
		// timeout=30 (InteropJob's default) outranks the worker's 20s.
		if b := budget["obj-1"]; b < 25*time.Second || b > 30*time.Second {
			t.Errorf("object job with timeout=30 had %v to its deadline", b)
		}
		if b := budget["s-1"]; b < 15*time.Second || b > 20*time.Second {
			t.Errorf("string job with no timeout had %v to its deadline, want the worker's 20s", b)
		}
		rows := s.jobRows(t)
		if len(rows) != 1 || rows[0].Key != "later" || rows[0].Attempts != 0 {
			t.Errorf("jobs = %+v, want only the job Laravel delayed by an hour, never reserved", rows)
		}
	})
}
