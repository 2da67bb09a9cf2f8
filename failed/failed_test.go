package failed_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/failed"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

var ctx = context.Background()

// failJob pushes a job, reserves it and fails it, returning the job as it
// was reserved (its payload uuid is the failed_jobs uuid).
func failJob(t *testing.T, q *dbqueue.Queue, job dbqueue.NewJob) *dbqueue.Job {
	t.Helper()
	if _, err := q.Push(ctx, job); err != nil {
		t.Fatalf("push %s: %v", job.Name, err)
	}
	queue := job.Queue
	if queue == "" {
		queue = q.DefaultQueue()
	}
	jobs, err := q.Reserve(ctx, 1, queue)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("reserve %s: %d jobs, %v", job.Name, len(jobs), err)
	}
	if err := q.Fail(ctx, jobs[0], fmt.Errorf("%s broke", job.Name)); err != nil {
		t.Fatalf("fail %s: %v", job.Name, err)
	}
	return jobs[0]
}

// insertFailed writes a failed_jobs row directly, as a PHP worker or an
// older Laravel would have.
func insertFailed(t *testing.T, db *dbtest.DB, uuid, connection, queue, payload string) {
	t.Helper()
	db.Exec(t, "INSERT INTO failed_jobs (uuid, connection, queue, payload, exception) VALUES (?, ?, ?, ?, 'boom')", uuid, connection, queue, payload)
}

// setFailedAt moves a failed job's failed_at to the given Unix time,
// computed by sqlExpr on the database (with ? for arg).
func setFailedAt(t *testing.T, db *dbtest.DB, uuid, sqlExpr string, arg int64) {
	t.Helper()
	db.Exec(t, "UPDATE failed_jobs SET failed_at = "+db.Timestamp(sqlExpr)+" WHERE uuid = ?", arg, uuid)
}

func dbNow(t *testing.T, db *dbtest.DB) int64 {
	t.Helper()
	var now int64
	if err := db.SQL.QueryRow("SELECT " + db.Now()).Scan(&now); err != nil {
		t.Fatal(err)
	}
	return now
}

func uuids(jobs []failed.Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.UUID
	}
	return out
}

func list(t *testing.T, s *failed.Store, f failed.Filter) []string {
	t.Helper()
	jobs, err := s.List(ctx, f)
	if err != nil {
		t.Fatalf("list %+v: %v", f, err)
	}
	return uuids(jobs)
}

func TestListFindAndName(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t, dbqueue.WithConnectionName("jobs-db"))
		s := newStore(t, q)
		var u []string // uuids in failure order
		for i, queue := range []string{"a", "b", "a", "b", "a"} {
			j := failJob(t, q, dbqueue.NewJob{Name: fmt.Sprintf("job-%d", i), Queue: queue})
			u = append(u, j.Payload.UUID)
		}
		newest := []string{u[4], u[3], u[2], u[1], u[0]}
		if got := list(t, s, failed.Filter{}); !slices.Equal(got, newest) {
			t.Fatalf("list: %v, want newest first %v", got, newest)
		}

		// Keyset paging walks every job once, newest first.
		var paged []string
		var before int64
		for range 4 {
			page, err := s.List(ctx, failed.Filter{Limit: 2, BeforeID: before})
			if err != nil {
				t.Fatal(err)
			}
			if len(page) == 0 {
				break
			}
			if len(page) > 2 {
				t.Fatalf("page of %d with Limit 2", len(page))
			}
			paged = append(paged, uuids(page)...)
			before = page[len(page)-1].ID
		}
		if !slices.Equal(paged, newest) {
			t.Fatalf("paged: %v, want %v", paged, newest)
		}

		if got := list(t, s, failed.Filter{Queue: "a"}); !slices.Equal(got, []string{u[4], u[2], u[0]}) {
			t.Fatalf("queue a: %v", got)
		}
		first, err := s.List(ctx, failed.Filter{Queue: "a", Limit: 1})
		if err != nil || len(first) != 1 {
			t.Fatalf("queue a, limit 1: %d, %v", len(first), err)
		}
		if got := list(t, s, failed.Filter{Queue: "a", BeforeID: first[0].ID}); !slices.Equal(got, []string{u[2], u[0]}) {
			t.Fatalf("queue a before %d: %v", first[0].ID, got)
		}
		if got := list(t, s, failed.Filter{Queue: "nope"}); len(got) != 0 {
			t.Fatalf("unknown queue listed %v", got)
		}
		for _, limit := range []int{-1, failed.MaxLimit + 1} {
			if _, err := s.List(ctx, failed.Filter{Limit: limit}); err == nil {
				t.Errorf("Limit %d accepted", limit)
			}
		}

		// Find returns the whole row, failed_at by the database's clock.
		now := dbNow(t, db)
		j, err := s.Find(ctx, u[3])
		if err != nil {
			t.Fatal(err)
		}
		if j.UUID != u[3] || j.Connection != "jobs-db" || j.Queue != "b" || j.Exception != "job-3 broke" || j.Name() != "job-3" {
			t.Fatalf("find: %+v", j)
		}
		if !strings.Contains(string(j.Payload), `"uuid":"`+u[3]+`"`) {
			t.Fatalf("payload %s", j.Payload)
		}
		// PostgreSQL rounds failed_at to the nearest second, so allow one ahead.
		if at := j.FailedAt.Unix(); at > now+1 || now-at > 5 {
			t.Fatalf("failed_at %d, database now %d", at, now)
		}
		if all, _ := s.List(ctx, failed.Filter{}); all[1].ID != j.ID || !slices.Equal(all[1].Payload, j.Payload) || !all[1].FailedAt.Equal(j.FailedAt) {
			t.Fatalf("list and find disagree: %+v vs %+v", all[1], j)
		}
		if _, err := s.Find(ctx, "no-such-uuid"); !errors.Is(err, failed.ErrNotFound) || !strings.Contains(err.Error(), "no-such-uuid") {
			t.Fatalf("find unknown: %v, want ErrNotFound naming it", err)
		}
	})
}

func TestNameToleratesMalformedPayloads(t *testing.T) {
	object, err := os.ReadFile("../testdata/laravel/object_job.json")
	if err != nil {
		t.Fatal(err)
	}
	for payload, want := range map[string]string{
		string(object): `DbqInterop\InteropJob`, // a Laravel object job is named by displayName
		`{"job":"App\\Jobs\\Mail@handle","maxTries":"three"}`: `App\Jobs\Mail@handle`,
		`{not json`:             "",
		`{"uuid":"x","data":1}`: "",
		``:                      "",
	} {
		if got := (failed.Job{Payload: []byte(payload)}).Name(); got != want {
			t.Errorf("Name of %.40s: %q, want %q", payload, got, want)
		}
	}
}

func TestRetry(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		s := newStore(t, q)

		// A job that failed on its second attempt comes back on attempt 1.
		if _, err := q.Push(ctx, dbqueue.NewJob{Name: "flaky", MaxTries: 2}); err != nil {
			t.Fatal(err)
		}
		first := reserveOne(t, q, "default")
		if err := q.Release(ctx, first, 0); err != nil {
			t.Fatal(err)
		}
		second := reserveOne(t, q, "default")
		if second.Attempts != 2 {
			t.Fatalf("attempts %d before failing, want 2", second.Attempts)
		}
		if err := q.Fail(ctx, second, errors.New("gave up")); err != nil {
			t.Fatal(err)
		}
		b := failJob(t, q, dbqueue.NewJob{Name: "b", Queue: "mail"})
		c := failJob(t, q, dbqueue.NewJob{Name: "c", Queue: "mail"})
		keep := failJob(t, q, dbqueue.NewJob{Name: "keep", Queue: "mail"})

		n, err := s.Retry(ctx, second.Payload.UUID)
		if err != nil || n != 1 {
			t.Fatalf("retry one: %d, %v", n, err)
		}
		if _, err := s.Find(ctx, second.Payload.UUID); !errors.Is(err, failed.ErrNotFound) {
			t.Fatalf("retried job still in failed_jobs: %v", err)
		}
		if got := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE attempts = 0 AND reserved_at IS NULL AND available_at <= "+db.Now()+" AND created_at <= "+db.Now()+" AND created_at > "+db.Now()+" - 5"); got != 1 {
			t.Fatalf("%d fresh ready rows in jobs, want 1", got)
		}
		again := reserveOne(t, q, "default")
		if again.Attempts != 1 || again.Payload.UUID != second.Payload.UUID || string(again.RawPayload) != string(second.RawPayload) {
			t.Fatalf("retried job: attempts %d, payload %s; want attempt 1 and the payload %s", again.Attempts, again.RawPayload, second.RawPayload)
		}

		// Several at once, duplicates ignored; they return to their queue.
		n, err = s.Retry(ctx, b.Payload.UUID, c.Payload.UUID, b.Payload.UUID)
		if err != nil || n != 2 {
			t.Fatalf("retry two: %d, %v", n, err)
		}
		jobs, err := q.Reserve(ctx, 10, "mail")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, j := range jobs {
			if j.Attempts != 1 {
				t.Errorf("job %s on attempt %d, want 1", j.Name(), j.Attempts)
			}
			got = append(got, j.Payload.UUID)
		}
		if want := []string{b.Payload.UUID, c.Payload.UUID}; !slices.Equal(got, want) {
			t.Fatalf("reserved %v from mail, want %v in failure order", got, want)
		}
		if left := list(t, s, failed.Filter{}); !slices.Equal(left, []string{keep.Payload.UUID}) {
			t.Fatalf("failed_jobs left: %v, want only %s", left, keep.Payload.UUID)
		}
		if n, err := s.Retry(ctx); n != 0 || err != nil {
			t.Fatalf("retry of nothing: %d, %v", n, err)
		}
	})
}

func reserveOne(t *testing.T, q *dbqueue.Queue, queue string) *dbqueue.Job {
	t.Helper()
	jobs, err := q.Reserve(ctx, 1, queue)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("reserve from %s: %d jobs, %v", queue, len(jobs), err)
	}
	return jobs[0]
}

func TestRetryQueueAndAll(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		s := newStore(t, q)
		failJob(t, q, dbqueue.NewJob{Name: "a1", Queue: "a"})
		failJob(t, q, dbqueue.NewJob{Name: "b1", Queue: "b"})
		failJob(t, q, dbqueue.NewJob{Name: "a2", Queue: "a"})
		failJob(t, q, dbqueue.NewJob{Name: "d1"})
		// Another connection's failure shares the table and is left alone.
		insertFailed(t, db, "redis-1", "redis", "a", `{"uuid":"redis-1","job":"X@handle","data":null}`)

		if n, err := s.RetryQueue(ctx, "a"); err != nil || n != 2 {
			t.Fatalf("retry queue a: %d, %v; want 2", n, err)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE queue = 'a' AND attempts = 0 AND reserved_at IS NULL"); n != 2 {
			t.Fatalf("%d fresh jobs on a, want 2", n)
		}
		if got := db.Count(t, "SELECT COUNT(*) FROM failed_jobs WHERE queue = 'a'"); got != 1 {
			t.Fatalf("%d failed jobs left on a, want the redis one", got)
		}
		if n, err := s.RetryQueue(ctx, ""); err != nil || n != 1 {
			t.Fatalf("retry default queue: %d, %v; want 1", n, err)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE queue = 'default'"); n != 1 {
			t.Fatalf("%d jobs on default, want 1", n)
		}
		if n, err := s.RetryAll(ctx); err != nil || n != 1 {
			t.Fatalf("retry all: %d, %v; want b1 only", n, err)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE attempts = 0 AND reserved_at IS NULL"); n != 4 {
			t.Fatalf("%d fresh jobs, want 4", n)
		}
		if left := list(t, s, failed.Filter{}); !slices.Equal(left, []string{"redis-1"}) {
			t.Fatalf("failed_jobs left: %v, want only redis-1", left)
		}
		if n, err := s.RetryAll(ctx); err != nil || n != 0 {
			t.Fatalf("second retry all: %d, %v; want 0", n, err)
		}
		for _, queue := range []string{"a", "b", "default"} {
			if j := reserveOne(t, q, queue); j.Attempts != 1 {
				t.Errorf("job on %s reserved on attempt %d", queue, j.Attempts)
			}
		}
	})
}

func TestRetryIsAllOrNothing(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		s := newStore(t, q)
		a := failJob(t, q, dbqueue.NewJob{Name: "a"}).Payload.UUID
		b := failJob(t, q, dbqueue.NewJob{Name: "b"}).Payload.UUID
		insertFailed(t, db, "redis-1", "redis", "default", `{"uuid":"redis-1","job":"X@handle","data":null}`)
		unchanged := func(what string) {
			t.Helper()
			if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 0 {
				t.Fatalf("%s: %d jobs pushed, want none", what, n)
			}
			if n := db.Count(t, "SELECT COUNT(*) FROM failed_jobs"); n != 3 {
				t.Fatalf("%s: %d failed jobs left, want all 3", what, n)
			}
		}

		n, err := s.Retry(ctx, a, "no-such-uuid", b)
		if !errors.Is(err, failed.ErrNotFound) || !strings.Contains(err.Error(), "no-such-uuid") || strings.Contains(err.Error(), a) || n != 0 {
			t.Fatalf("retry with an unknown uuid: %d, %v; want ErrNotFound naming only it", n, err)
		}
		unchanged("unknown uuid")

		n, err = s.Retry(ctx, a, "redis-1")
		if !errors.Is(err, failed.ErrOtherConnection) || !strings.Contains(err.Error(), "redis-1") || n != 0 {
			t.Fatalf("retry of another connection's job: %d, %v; want ErrOtherConnection", n, err)
		}
		unchanged("other connection")
	})
}

func TestRetryResetsPayloadAttemptsOnly(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		s := newStore(t, q)
		laravel, err := os.ReadFile("../testdata/laravel/string_job.json")
		if err != nil {
			t.Fatal(err)
		}
		cases := []struct{ uuid, queue, payload, want string }{
			// Older Laravel payloads count attempts inside: reset, every other byte kept.
			{"legacy", "p", `{"uuid":"legacy","job":"Old@handle","attempts":  7 ,"data":{"attempts":3}}`,
				`{"uuid":"legacy","job":"Old@handle","attempts":  0 ,"data":{"attempts":3}}`},
			{"nulled", "p", `{"uuid":"nulled","job":"Old@handle","attempts":null}`, ""},
			// Laravel's own escapes ("a\/b") survive: the payload is not re-encoded.
			{"a5eff913-1455-4e17-b49e-9659fe65eb22", "p", string(laravel), ""},
			{"broken", "p", `{not json`, ""},
			// An empty queue goes to the default queue, as Laravel's pushRaw does.
			{"no-queue", "", `{"uuid":"no-queue","job":"X@handle","data":1}`, ""},
		}
		for _, c := range cases {
			insertFailed(t, db, c.uuid, dbqueue.DefaultConnection, c.queue, c.payload)
		}
		if n, err := s.RetryAll(ctx); err != nil || n != len(cases) {
			t.Fatalf("retry all: %d, %v", n, err)
		}
		for i, c := range cases {
			want, queue := c.want, c.queue
			if want == "" {
				want = c.payload
			}
			if queue == "" {
				queue = "default"
			}
			var got, gotQueue string
			err := db.SQL.QueryRow(db.Dialect.Rebind("SELECT payload, queue FROM jobs ORDER BY id LIMIT 1 OFFSET ?"), i).Scan(&got, &gotQueue)
			if err != nil {
				t.Fatal(err)
			}
			if got != want || gotQueue != queue {
				t.Errorf("%s: retried as %q on %q, want %q on %q", c.uuid, got, gotQueue, want, queue)
			}
		}
	})
}

// TestRetryConcurrently: retries racing over the same rows move each job
// exactly once.
func TestRetryConcurrently(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		const jobs, retriers = 200, 8
		q := db.Queue(t)
		var all []string
		for i := range jobs {
			all = append(all, failJob(t, q, dbqueue.NewJob{Name: fmt.Sprint("j", i)}).Payload.UUID)
		}
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			total int
		)
		errs := make(chan error, 2*retriers)
		for i := range retriers {
			s := newStore(t, db.Queue(t))
			wg.Add(1)
			go func() {
				defer wg.Done()
				var n int
				var err error
				if i%2 == 0 {
					n, err = s.RetryAll(ctx)
				} else {
					// Racing for the same rows, a retry may find them gone.
					n, err = s.Retry(ctx, all[i*jobs/retriers:(i+1)*jobs/retriers]...)
					if errors.Is(err, failed.ErrNotFound) {
						n, err = 0, nil
					}
				}
				if err != nil {
					errs <- err
				}
				mu.Lock()
				total += n
				mu.Unlock()
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if total != jobs {
			t.Fatalf("retried %d in total, want %d", total, jobs)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != jobs {
			t.Fatalf("%d jobs rows, want %d: a job was retried twice or lost", n, jobs)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM failed_jobs"); n != 0 {
			t.Fatalf("%d failed jobs left", n)
		}
	})
}

// TestRetryMany crosses the chunk size: one call stays all-or-nothing,
// RetryAll moves everything.
func TestRetryMany(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		const total, first = 1201, 600
		q := db.Queue(t)
		s := newStore(t, q)
		var (
			all  []string
			args []any
		)
		for i := range total {
			u := fmt.Sprintf("bulk-%04d", i)
			all = append(all, u)
			args = append(args, u, `{"uuid":"`+u+`","job":"bulk","data":null}`)
		}
		db.Exec(t, "INSERT INTO failed_jobs (uuid, connection, queue, payload, exception) VALUES "+
			strings.TrimSuffix(strings.Repeat("(?, 'database', 'bulk', ?, 'boom'),", total), ","), args...)

		if _, err := s.Retry(ctx, append(slices.Clone(all[:first]), "no-such-uuid")...); !errors.Is(err, failed.ErrNotFound) {
			t.Fatalf("retry with an unknown uuid: %v", err)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM failed_jobs"); n != total {
			t.Fatalf("a failed retry moved %d jobs", total-n)
		}
		if n, err := s.Retry(ctx, all[:first]...); err != nil || n != first {
			t.Fatalf("retry %d: %d, %v", first, n, err)
		}
		if n, err := s.RetryAll(ctx); err != nil || n != total-first {
			t.Fatalf("retry all: %d, %v; want %d", n, err, total-first)
		}
		if n := db.Count(t, "SELECT COUNT(DISTINCT payload) FROM jobs WHERE queue = 'bulk'"); n != total {
			t.Fatalf("%d distinct jobs, want %d", n, total)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM failed_jobs"); n != 0 {
			t.Fatalf("%d failed jobs left", n)
		}
	})
}

func TestForget(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		s := newStore(t, q)
		gone := failJob(t, q, dbqueue.NewJob{Name: "gone"}).Payload.UUID
		kept := failJob(t, q, dbqueue.NewJob{Name: "kept"}).Payload.UUID
		if ok, err := s.Forget(ctx, gone); !ok || err != nil {
			t.Fatalf("forget: %v, %v", ok, err)
		}
		if ok, err := s.Forget(ctx, gone); ok || err != nil {
			t.Fatalf("forget twice: %v, %v; want false", ok, err)
		}
		if left := list(t, s, failed.Filter{}); !slices.Equal(left, []string{kept}) {
			t.Fatalf("left %v, want %s", left, kept)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 0 {
			t.Fatalf("forget pushed %d jobs", n)
		}
	})
}

func TestFlush(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		s := newStore(t, q)
		old := failJob(t, q, dbqueue.NewJob{Name: "old"}).Payload.UUID
		mid := failJob(t, q, dbqueue.NewJob{Name: "mid"}).Payload.UUID
		fresh := failJob(t, q, dbqueue.NewJob{Name: "fresh"}).Payload.UUID
		setFailedAt(t, db, old, db.Now()+" - ?", 7200)
		setFailedAt(t, db, mid, db.Now()+" - ?", 2700)

		j, err := s.Find(ctx, old)
		if err != nil {
			t.Fatal(err)
		}
		if age := dbNow(t, db) - j.FailedAt.Unix(); age < 7200 || age > 7205 {
			t.Fatalf("failed_at read back %ds old, want 7200", age)
		}
		if _, err := s.Flush(ctx, -time.Second); err == nil {
			t.Fatal("negative age accepted")
		}
		if n, err := s.Flush(ctx, time.Hour); err != nil || n != 1 {
			t.Fatalf("flush older than 1h: %d, %v; want 1", n, err)
		}
		if left := list(t, s, failed.Filter{}); !slices.Equal(left, []string{fresh, mid}) {
			t.Fatalf("left %v", left)
		}
		if n, err := s.Flush(ctx, 10*time.Minute); err != nil || n != 1 {
			t.Fatalf("flush older than 10m: %d, %v; want 1", n, err)
		}
		failJob(t, q, dbqueue.NewJob{Name: "another"})
		if n, err := s.Flush(ctx, 0); err != nil || n != 2 {
			t.Fatalf("flush all: %d, %v; want 2", n, err)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM failed_jobs"); n != 0 {
			t.Fatalf("%d left after flushing all", n)
		}
	})
}

func TestPrune(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		s := newStore(t, q)
		now := dbNow(t, db)
		old := failJob(t, q, dbqueue.NewJob{Name: "old"}).Payload.UUID
		edge := failJob(t, q, dbqueue.NewJob{Name: "edge"}).Payload.UUID
		fresh := failJob(t, q, dbqueue.NewJob{Name: "fresh"}).Payload.UUID
		setFailedAt(t, db, old, "?", now-7200)
		setFailedAt(t, db, edge, "?", now-3600)

		if n, err := s.Prune(ctx, time.Unix(now-3600, 0)); err != nil || n != 1 {
			t.Fatalf("prune before the edge: %d, %v; want only the older job", n, err)
		}
		if left := list(t, s, failed.Filter{}); !slices.Equal(left, []string{fresh, edge}) {
			t.Fatalf("left %v", left)
		}
		if n, err := s.Prune(ctx, time.Unix(now-3600, int64(500*time.Millisecond))); err != nil || n != 1 {
			t.Fatalf("prune half a second after the edge: %d, %v; want 1", n, err)
		}
		if left := list(t, s, failed.Filter{}); !slices.Equal(left, []string{fresh}) {
			t.Fatalf("left %v", left)
		}
		if n, err := s.Prune(ctx, time.Time{}); err != nil || n != 0 {
			t.Fatalf("prune before year 1: %d, %v", n, err)
		}
	})
}

func TestMissingTableSaysMigrate(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		s := newStore(t, db.Queue(t))
		db.Exec(t, "DROP TABLE failed_jobs")
		_, err := s.List(ctx, failed.Filter{})
		if !errors.Is(err, sqldb.ErrNoTables) || !strings.Contains(err.Error(), "migrate") {
			t.Fatalf("list without the table: %v, want ErrNoTables", err)
		}
		if _, err := s.RetryAll(ctx); !errors.Is(err, sqldb.ErrNoTables) {
			t.Fatalf("retry without the table: %v, want ErrNoTables", err)
		}
	})
}

func newStore(t testing.TB, q *dbqueue.Queue) *failed.Store {
	t.Helper()
	s, err := failed.New(q)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNewRefusesNilQueue(t *testing.T) {
	if s, err := failed.New(nil); err == nil || s != nil {
		t.Fatalf("failed.New(nil) = %v, %v; want an error", s, err)
	}
}
