package worker_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/worker"
)

// sendMail is a typed job named as a Laravel string job.
type sendMail struct {
	To string `json:"to"`
}

const mailKind = `App\Jobs\SendMail@handle`

func (sendMail) Kind() string { return mailKind }

// ptrArgs has its Kind on the pointer, and is registered as a pointer.
type ptrArgs struct {
	N int `json:"n"`
}

func (*ptrArgs) Kind() string { return "ptr-args" }

type emptyKind struct{}

func (emptyKind) Kind() string { return "" }

type readsReceiver struct{ name string }

func (r *readsReceiver) Kind() string { return r.name }

// runOnce runs w.RunOnce and fails the test on its error.
func runOnce(t *testing.T, w *worker.Worker) []worker.Result {
	t.Helper()
	res, err := w.RunOnce(bg)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestRegisterRunsTypedJobs(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		w, _ := newWorker(t, q, worker.Options{})
		var mu sync.Mutex
		var got []string
		worker.Register(w, func(ctx context.Context, job *dbqueue.Job, m sendMail) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, job.Name()+" "+m.To)
			return nil
		})
		worker.Register(w, func(ctx context.Context, job *dbqueue.Job, a *ptrArgs) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, job.Name()+" "+strings.Repeat("x", a.N))
			return nil
		})
		if _, err := dbqueue.PushArgsMany(bg, q, []dbqueue.JobArgs{sendMail{To: "ada"}, &ptrArgs{N: 3}}); err != nil {
			t.Fatal(err)
		}
		// Not a JSON object: decoding fails the job at once, whatever its tries.
		bad, err := q.Push(bg, dbqueue.NewJob{Name: mailKind, Data: []int{1}, MaxTries: 5})
		if err != nil {
			t.Fatal(err)
		}
		res := runOnce(t, w)
		if len(res) != 3 || res[0].Outcome != worker.OutcomeDone || res[1].Outcome != worker.OutcomeDone {
			t.Fatalf("results %+v: want done, done, failed", res)
		}
		if res[2].Job.ID != bad || res[2].Outcome != worker.OutcomeFailed || !strings.Contains(res[2].Err.Error(), "worker_test.sendMail") {
			t.Fatalf("undecodable job: %+v, want failed with the decode error", res[2])
		}
		slices.Sort(got) // the jobs ran at once
		if strings.Join(got, ",") != mailKind+" ada,ptr-args xxx" {
			t.Fatalf("handlers got %q", got)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 0 {
			t.Fatalf("%d jobs left", n)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM failed_jobs"); n != 1 {
			t.Fatalf("%d failed jobs, want the undecodable one", n)
		}
	})
}

func TestRegisterAndHandlerOptionsRefuseMistakes(t *testing.T) {
	q := dbtest.New(t, dbqueue.SQLite).Queue(t, dbqueue.WithRetryAfter(60*time.Second))
	w, _ := newWorker(t, q, worker.Options{Timeout: 10 * time.Second})
	noop := func(ctx context.Context, job *dbqueue.Job) error { return nil }
	for _, c := range []struct {
		name string
		fn   func()
		want string
	}{
		{"empty kind", func() {
			worker.Register(w, func(context.Context, *dbqueue.Job, emptyKind) error { return nil })
		}, "Kind() of its zero value is empty"},
		{"kind reads its receiver", func() {
			worker.Register(w, func(context.Context, *dbqueue.Job, *readsReceiver) error { return nil })
		}, "must return a constant"},
		{"interface", func() {
			worker.Register(w, func(context.Context, *dbqueue.Job, dbqueue.JobArgs) error { return nil })
		}, "must return a constant"},
		{"timeout near retry_after", func() { w.Handle("a", noop, worker.WithTimeout(56*time.Second)) }, "at least 5s shorter than the queue's retry_after 1m0s"},
		{"zero timeout", func() { w.Handle("b", noop, worker.WithTimeout(0)) }, "WithTimeout(0s)"},
		{"tries", func() { w.Handle("c", noop, worker.WithTries(0)) }, "WithTries(0)"},
		{"backoff", func() { w.Handle("d", noop, worker.WithBackoff(time.Second, -time.Second)) }, "WithBackoff(-1s)"},
	} {
		func() {
			defer func() {
				v := recover()
				if s, _ := v.(string); !strings.Contains(s, c.want) {
					t.Errorf("%s: panic %v, want one containing %q", c.name, v, c.want)
				}
			}()
			c.fn()
		}()
	}
	// None of them was registered.
	if _, err := w.RunOnce(bg); err == nil || !strings.Contains(err.Error(), "no handlers") {
		t.Fatalf("RunOnce after refused registrations: %v", err)
	}
	w.Handle("a", noop, worker.WithTimeout(55*time.Second), worker.WithTries(worker.Unlimited), worker.WithBackoff())
}

// A payload's option beats its handler's, which beats the worker's.
func TestHandlerOptionsPrecedence(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		// The worker alone would fail at once, retry at once, allow 60s.
		w, _ := newWorker(t, q, worker.Options{Tries: 1, Timeout: 60 * time.Second})
		var mu sync.Mutex
		left := map[string]time.Duration{} // job → time left on its context
		fail := func(ctx context.Context, job *dbqueue.Job) error {
			dl, _ := ctx.Deadline()
			mu.Lock()
			left[string(job.Payload.Data)] = time.Until(dl)
			mu.Unlock()
			return errors.New("boom")
		}
		w.Handle("tuned", fail, worker.WithTries(3), worker.WithBackoff(time.Hour, 2*time.Hour), worker.WithTimeout(30*time.Second))
		w.Handle("plain", fail)
		ids, err := q.PushMany(bg, []dbqueue.NewJob{
			{Name: "tuned", Data: "handler"},
			{Name: "tuned", Data: "payload", MaxTries: 1, Timeout: 2 * time.Second},
			{Name: "tuned", Data: "payload-backoff", Backoff: []time.Duration{time.Minute}},
			{Name: "plain", Data: "worker"},
		})
		if err != nil {
			t.Fatal(err)
		}
		res := runOnce(t, w)
		byID := map[int64]worker.Result{}
		for _, r := range res {
			byID[r.Job.ID] = r
		}
		check := func(id int64, want worker.Outcome, delay time.Duration) {
			t.Helper()
			r := byID[id]
			if r.Outcome != want || r.Delay != delay || r.Err == nil || !strings.Contains(r.Err.Error(), "boom") {
				t.Errorf("job %s: %s after %v (%v), want %s after %v with the handler's error", r.Job.Payload.Data, r.Outcome, r.Delay, r.Err, want, delay)
			}
		}
		check(ids[0], worker.OutcomeReleased, time.Hour)   // handler's tries and backoff
		check(ids[1], worker.OutcomeFailed, 0)             // payload's maxTries 1
		check(ids[2], worker.OutcomeReleased, time.Minute) // payload's backoff
		check(ids[3], worker.OutcomeFailed, 0)             // worker's Tries 1
		mu.Lock()
		defer mu.Unlock()
		within := func(data string, lo, hi time.Duration) {
			t.Helper()
			if d := left[data]; d <= lo || d > hi {
				t.Errorf("job %s ran with %v left, want (%v, %v]", data, d, lo, hi)
			}
		}
		within(`"handler"`, 2*time.Second, 30*time.Second) // handler's 30s, not the worker's 60s
		within(`"payload"`, 0, 2*time.Second)              // payload's 2s
		within(`"worker"`, 30*time.Second, 60*time.Second) // worker's 60s
		var wait int64
		if err := db.SQL.QueryRow(db.Dialect.Rebind("SELECT available_at - "+db.Now()+" FROM jobs WHERE id = ?"), ids[0]).Scan(&wait); err != nil {
			t.Fatal(err)
		}
		if wait < 3500 || wait > 3600 {
			t.Fatalf("released for %ds, want the handler's backoff, 3600s", wait)
		}
	})
}

// During a rolling deploy an old worker takes a job of a kind only new
// workers handle: it releases the job with its attempt given back, and a
// worker with the handler runs it with all its tries (one, the default);
// a job no worker handles fails once UnknownKindWait has passed since its
// push, saying which kind has no handler.
func TestUnknownKindWaitsForAWorkerThatHandlesIt(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		var (
			mu       sync.Mutex // guards released and ran: jobs run at once
			released []time.Duration
			ran      []string
		)
		old, _ := newWorker(t, q, worker.Options{Name: "old", UnknownKindBackoff: 2 * time.Minute, Events: worker.Events{
			JobReleased: func(ctx context.Context, job *dbqueue.Job, delay time.Duration) {
				mu.Lock()
				defer mu.Unlock()
				released = append(released, delay)
			},
		}})
		old.Handle("known", func(ctx context.Context, job *dbqueue.Job) error { return nil })
		mail, err := dbqueue.PushArgs(bg, q, sendMail{To: "new"}, dbqueue.JobOptions{})
		if err != nil {
			t.Fatal(err)
		}
		const orphanKind = `App\Jobs\NobodyHandlesThis`
		if _, err := q.Push(bg, dbqueue.NewJob{Name: orphanKind}); err != nil {
			t.Fatal(err)
		}

		for round := range 3 { // more rounds than the default one try
			res := runOnce(t, old)
			if len(res) != 2 || res[0].Outcome != worker.OutcomeReleased || res[0].Delay != 2*time.Minute || res[1].Outcome != worker.OutcomeReleased {
				t.Fatalf("old worker, round %d: %+v, want both released for UnknownKindBackoff", round, res)
			}
			var wait int64
			if err := db.SQL.QueryRow(db.Dialect.Rebind("SELECT available_at - "+db.Now()+" FROM jobs WHERE id = ?"), mail).Scan(&wait); err != nil {
				t.Fatal(err)
			}
			if wait < 110 || wait > 120 {
				t.Fatalf("released for %ds, want UnknownKindBackoff, 120s", wait)
			}
			if n := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE attempts = 0 AND reserved_at IS NULL"); n != 2 {
				t.Fatalf("round %d: %d jobs released with their attempt given back, want 2", round, n)
			}
			// The backoff passes.
			db.Exec(t, "UPDATE jobs SET available_at = available_at - 120")
		}
		if len(released) != 6 || released[0] != 2*time.Minute {
			t.Fatalf("JobReleased heard %v", released)
		}

		// A new worker has the handler: it runs the mail on its first
		// attempt, its one try intact. The other job it does not know
		// either.
		newer, _ := newWorker(t, q, worker.Options{Name: "new"})
		worker.Register(newer, func(ctx context.Context, job *dbqueue.Job, m sendMail) error {
			mu.Lock()
			defer mu.Unlock()
			ran = append(ran, m.To+" attempt "+itoa(job.Attempts))
			return nil
		})
		res := runOnce(t, newer)
		if len(res) != 2 || res[0].Outcome != worker.OutcomeDone || res[1].Outcome != worker.OutcomeReleased || strings.Join(ran, ",") != "new attempt 1" {
			t.Fatalf("new worker: %+v, ran %q; want the mail done on attempt 1, the other released", res, ran)
		}

		// A day passes since the push, by the database's clock: no
		// handler came for the other job.
		db.Exec(t, "UPDATE jobs SET created_at = created_at - 86400, available_at = available_at - 120")
		res = runOnce(t, old)
		if len(res) != 1 || res[0].Outcome != worker.OutcomeFailed {
			t.Fatalf("old worker, a day on: %+v, want failed", res)
		}
		msg := res[0].Err.Error()
		for _, want := range []string{orphanKind, "no handler is registered", "on this worker", `worker "old"`, "UnknownKindWait 24h0m0s", "deploy a worker that handles"} {
			if !strings.Contains(msg, want) {
				t.Errorf("failure %q does not say %q", msg, want)
			}
		}
		if !errors.Is(res[0].Err, worker.ErrUnknownJob) {
			t.Errorf("failure %v is not ErrUnknownJob", res[0].Err)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM failed_jobs WHERE exception LIKE ?", "%no handler is registered%"); n != 1 {
			t.Fatalf("%d failed_jobs rows naming the missing handler, want 1", n)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 0 {
			t.Fatalf("%d jobs left", n)
		}
	})
}

// Two workers share a queue, only one of them with the handler: whichever
// takes the job first, it runs once, on the worker with the handler, on
// its first attempt.
func TestUnknownKindReachesTheWorkerWithItsHandler(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		releasedBy := make(chan struct{}, 1)
		old, _ := newWorker(t, q, worker.Options{Name: "old", UnknownKindBackoff: time.Second, Events: worker.Events{
			JobReleased: func(context.Context, *dbqueue.Job, time.Duration) {
				select {
				case releasedBy <- struct{}{}:
				default:
				}
			},
		}})
		old.Handle("known", func(context.Context, *dbqueue.Job) error { return nil })
		done := make(chan int, 1)
		newer, _ := newWorker(t, q, worker.Options{Name: "new"})
		newer.Handle("added", func(_ context.Context, job *dbqueue.Job) error {
			done <- job.Attempts
			return nil
		})
		pushN(t, q, 1, dbqueue.NewJob{Name: "added"})
		ctx, cancel := context.WithTimeout(bg, 30*time.Second)
		defer cancel()
		oldDone := make(chan error, 1)
		go func() { oldDone <- old.Run(ctx) }()
		select {
		case <-releasedBy: // the old worker took it first
		case <-ctx.Done():
			t.Fatal("the old worker never released the job")
		}
		newDone := make(chan error, 1)
		go func() { newDone <- newer.Run(ctx) }()
		select {
		case attempt := <-done:
			if attempt != 1 {
				t.Fatalf("the worker with the handler ran the job on attempt %d, want 1", attempt)
			}
		case <-ctx.Done():
			t.Fatal("the worker with the handler never ran the job")
		}
		cancel()
		for _, ch := range []chan error{oldDone, newDone} {
			if err := <-ch; err != nil && !errors.Is(err, context.Canceled) {
				t.Fatal(err)
			}
		}
		dbtest.WaitFor(t, 10*time.Second, "the job deleted", func() bool {
			return db.Count(t, "SELECT COUNT(*) FROM jobs")+db.Count(t, "SELECT COUNT(*) FROM failed_jobs") == 0
		})
	})
}

func itoa(n int) string { return strconv.Itoa(n) }
