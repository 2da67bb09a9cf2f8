package dbqueue_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/driver/dbqmysql"
	"github.com/dbqueue/dbqueue/driver/dbqpgx"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/internal/dialect"
)

var ctx = context.Background()

func push(t *testing.T, q *dbqueue.Queue, job dbqueue.NewJob) int64 {
	t.Helper()
	id, err := q.Push(ctx, job)
	if err != nil {
		t.Fatalf("push %s: %v", job.Name, err)
	}
	return id
}

func reserve(t *testing.T, q *dbqueue.Queue, n int, queues ...string) []*dbqueue.Job {
	t.Helper()
	jobs, err := q.Reserve(ctx, n, queues...)
	if err != nil {
		t.Fatalf("reserve: %v", err)
	}
	return jobs
}

func TestPushReserveDelete(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		type mail struct {
			To string `json:"to"`
		}
		id := push(t, q, dbqueue.NewJob{
			Name: "send-mail", Data: mail{To: "a@example.com"},
			MaxTries: 3, MaxExceptions: 2, Backoff: []time.Duration{time.Second, 5 * time.Second},
			Timeout: 30 * time.Second, FailOnTimeout: true,
		})
		if id <= 0 {
			t.Fatalf("push returned id %d", id)
		}
		jobs := reserve(t, q, 5)
		if len(jobs) != 1 {
			t.Fatalf("reserved %d jobs, want 1", len(jobs))
		}
		j := jobs[0]
		if j.ID != id || j.Queue != "default" || j.Attempts != 1 || j.Name() != "send-mail" {
			t.Fatalf("reserved %+v, want id %d on default with attempts 1", j, id)
		}
		p := j.Payload
		if p.UUID == "" || *p.MaxTries != 3 || *p.MaxExceptions != 2 || !p.FailOnTimeout ||
			p.Timeout.Duration() != 30*time.Second || len(p.Backoff) != 2 || p.Backoff[1] != 5 {
			t.Fatalf("payload options lost: %s", j.RawPayload)
		}
		if !strings.Contains(string(j.RawPayload), `"backoff":"1,5"`) {
			t.Errorf("backoff not in Laravel's string form: %s", j.RawPayload)
		}
		var m mail
		if err := j.Decode(&m); err != nil || m.To != "a@example.com" {
			t.Fatalf("decode data: %v %+v", err, m)
		}
		if j.ReservedAt.IsZero() || j.CreatedAt.IsZero() {
			t.Errorf("times not set: %+v", j)
		}
		if again := reserve(t, q, 5); len(again) != 0 {
			t.Fatalf("a held job was reserved again: %+v", again[0])
		}
		if err := q.Delete(ctx, j); err != nil {
			t.Fatal(err)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 0 {
			t.Fatalf("%d rows left after delete", n)
		}
		if err := q.Delete(ctx, j); !errors.Is(err, dbqueue.ErrNotHeld) {
			t.Fatalf("second delete: %v, want ErrNotHeld", err)
		}
	})
}

func TestDatabaseClock(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		push(t, q, dbqueue.NewJob{Name: "clock"})
		var dbNow int64
		if err := db.SQL.QueryRow("SELECT " + db.Now()).Scan(&dbNow); err != nil {
			t.Fatal(err)
		}
		var created, available int64
		if err := db.SQL.QueryRow("SELECT created_at, available_at FROM jobs").Scan(&created, &available); err != nil {
			t.Fatal(err)
		}
		if created > dbNow || dbNow-created > 2 || available != created {
			t.Fatalf("created_at %d, available_at %d; database now %d", created, available, dbNow)
		}
	})
}

func TestDelayedJobs(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		push(t, q, dbqueue.NewJob{Name: "later", Delay: time.Hour})
		push(t, q, dbqueue.NewJob{Name: "future", RunAt: time.Now().Add(time.Hour)})
		past := push(t, q, dbqueue.NewJob{Name: "past", RunAt: time.Now().Add(-time.Hour)})
		jobs := reserve(t, q, 10)
		if len(jobs) != 1 || jobs[0].ID != past {
			t.Fatalf("reserved %d jobs, want only the one due an hour ago", len(jobs))
		}
		s, err := q.Size(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		if s.Pending != 0 || s.Delayed != 2 || s.Reserved != 1 || s.Total() != 3 {
			t.Fatalf("sizes %+v, want 0 pending, 2 delayed, 1 reserved", s)
		}
		// Make the delayed jobs due, as if an hour passed.
		db.Exec(t, "UPDATE jobs SET available_at = available_at - 7200 WHERE reserved_at IS NULL")
		s, _ = q.Size(ctx, "")
		if s.Pending != 2 || s.OldestPending < time.Hour-time.Minute {
			t.Fatalf("sizes %+v, want 2 pending, the oldest due about an hour ago", s)
		}
		if jobs := reserve(t, q, 10); len(jobs) != 2 {
			t.Fatalf("reserved %d due jobs, want 2", len(jobs))
		}
	})
}

func TestPushManyKeepsOrder(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		batch := make([]dbqueue.NewJob, 2500) // more than one INSERT chunk
		for i := range batch {
			batch[i] = dbqueue.NewJob{Name: "bulk", Data: map[string]int{"i": i}}
		}
		ids, err := q.PushMany(ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) != len(batch) {
			t.Fatalf("got %d ids for %d jobs", len(ids), len(batch))
		}
		for i := 0; i < len(batch); i += 250 {
			var raw string
			if err := db.SQL.QueryRow(db.Dialect.Rebind("SELECT payload FROM jobs WHERE id = ?"), ids[i]).Scan(&raw); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(raw, fmt.Sprintf(`"data":{"i":%d}`, i)) {
				t.Fatalf("id %d (index %d) holds %s", ids[i], i, raw)
			}
		}
		jobs := reserve(t, q, 100)
		for i, j := range jobs {
			if j.ID != ids[i] {
				t.Fatalf("claim order: job %d is id %d, want %d", i, j.ID, ids[i])
			}
		}
	})
}

func TestPushInTransaction(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		tx, err := db.SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.PushTx(ctx, tx, dbqueue.NewJob{Name: "rolled-back"}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 0 {
			t.Fatalf("rolled-back push left %d jobs", n)
		}
		tx, _ = db.SQL.BeginTx(ctx, nil)
		ids, err := q.PushTx(ctx, tx, dbqueue.NewJob{Name: "committed"}, dbqueue.NewJob{Name: "committed"})
		if err != nil || len(ids) != 2 {
			t.Fatalf("push in tx: %v %v", ids, err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if jobs := reserve(t, q, 10); len(jobs) != 2 || jobs[0].ID != ids[0] {
			t.Fatalf("committed jobs not visible at once: %d", len(jobs))
		}
	})
}

// pgxQueue opens a pgx pool on a fresh PostgreSQL test database and a queue
// on it, both closed when the test ends.
func pgxQueue(t *testing.T) (*pgxpool.Pool, *dbqueue.Queue) {
	t.Helper()
	db := dbtest.New(t, dbqueue.Postgres)
	pool, err := pgxpool.New(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	q, err := dbqueue.New(ctx, dbqpgx.New(pool))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return pool, q
}

func TestPushInPgxTransaction(t *testing.T) {
	pool, q := pgxQueue(t)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dbqpgx.PushTx(ctx, q, tx, dbqueue.NewJob{Name: "rolled-back"}); err != nil {
		t.Fatal(err)
	}
	_ = tx.Rollback(ctx)
	tx, _ = pool.Begin(ctx)
	ids, err := dbqpgx.PushTx(ctx, q, tx, dbqueue.NewJob{Name: "committed"})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	jobs := reserve(t, q, 10)
	if len(jobs) != 1 || jobs[0].ID != ids[0] || jobs[0].Name() != "committed" {
		t.Fatalf("want only the committed job, got %d", len(jobs))
	}
	my := dbtest.New(t, dbqueue.SQLite).Queue(t)
	if _, err := dbqpgx.PushTx(ctx, my, tx, dbqueue.NewJob{Name: "x"}); err == nil || !strings.Contains(err.Error(), "PushTx") {
		t.Fatalf("pgx tx on a SQLite queue: %v", err)
	}
}

func TestReleaseUpdatesInPlace(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		id := push(t, q, dbqueue.NewJob{Name: "flaky"})
		j := reserve(t, q, 1)[0]
		if err := q.Release(ctx, j, time.Hour); err != nil {
			t.Fatal(err)
		}
		if got := reserve(t, q, 1); len(got) != 0 {
			t.Fatal("a job released for an hour was reserved at once")
		}
		s, _ := q.Size(ctx, "")
		if s.Delayed != 1 {
			t.Fatalf("released job not delayed: %+v", s)
		}
		if err := q.Release(ctx, j, 0); !errors.Is(err, dbqueue.ErrNotHeld) {
			t.Fatalf("release of a released job: %v, want ErrNotHeld", err)
		}
		db.Exec(t, "UPDATE jobs SET available_at = available_at - 7200")
		again := reserve(t, q, 1)
		if len(again) != 1 || again[0].ID != id || again[0].Attempts != 2 {
			t.Fatalf("release must keep the row: got %+v, want id %d attempt 2", again, id)
		}
	})
}

func TestFailMovesToFailedJobs(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t, dbqueue.WithConnectionName("pgsql-jobs"))
		push(t, q, dbqueue.NewJob{Name: "doomed", Queue: "mail"})
		j := reserve(t, q, 1, "mail")[0]
		if err := q.Fail(ctx, j, errors.New("smtp: 550 mailbox unavailable")); err != nil {
			t.Fatal(err)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 0 {
			t.Fatalf("failed job still in jobs (%d rows)", n)
		}
		var uuid, conn, queue, exc, payload string
		err := db.SQL.QueryRow("SELECT uuid, connection, queue, exception, payload FROM failed_jobs").Scan(&uuid, &conn, &queue, &exc, &payload)
		if err != nil {
			t.Fatal(err)
		}
		if uuid != j.Payload.UUID || conn != "pgsql-jobs" || queue != "mail" || !strings.Contains(exc, "550") {
			t.Fatalf("failed_jobs row: %s %s %s %q", uuid, conn, queue, exc)
		}
		// The payload is the job's, with the mark of the reservation that
		// failed it appended (dbqueue's reads take it off again).
		if string(dialect.UnmarkFailed([]byte(payload))) != string(j.RawPayload) || !strings.Contains(payload, `"`+dialect.FailedByKey+`":`) {
			t.Fatalf("failed_jobs payload %s, want the job's %s with its reservation's mark", payload, j.RawPayload)
		}
		if err := q.Fail(ctx, j, errors.New("again")); !errors.Is(err, dbqueue.ErrNotHeld) {
			t.Fatalf("failing twice: %v, want ErrNotHeld", err)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM failed_jobs"); n != 1 {
			t.Fatalf("%d failed_jobs rows, want 1", n)
		}
	})
}

// TestReclaimAfterRetryAfter simulates a holder that died: once its
// reservation is older than retry_after, the job is claimed again with its
// attempts counted, and the old holder can no longer touch it.
func TestReclaimAfterRetryAfter(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t, dbqueue.WithRetryAfter(60*time.Second))
		id := push(t, q, dbqueue.NewJob{Name: "slow"})
		dead := reserve(t, q, 1)[0]
		db.Exec(t, "UPDATE jobs SET reserved_at = reserved_at - 30")
		if got := reserve(t, q, 1); len(got) != 0 {
			t.Fatal("a reservation younger than retry_after was taken over")
		}
		db.Exec(t, "UPDATE jobs SET reserved_at = reserved_at - 31")
		got := reserve(t, q, 1)
		if len(got) != 1 || got[0].ID != id || got[0].Attempts != 2 {
			t.Fatalf("expired reservation: got %+v, want id %d on attempt 2", got, id)
		}
		for name, err := range map[string]error{
			"delete":  q.Delete(ctx, dead),
			"release": q.Release(ctx, dead, 0),
			"fail":    q.Fail(ctx, dead, errors.New("late")),
		} {
			if !errors.Is(err, dbqueue.ErrNotHeld) {
				t.Errorf("old holder's %s: %v, want ErrNotHeld", name, err)
			}
		}
		lost, err := dbqueue.DeleteMany(ctx, q, []*dbqueue.Job{dead, got[0]})
		if err != nil || len(lost) != 1 || lost[0] != dead {
			t.Fatalf("DeleteMany: lost %v, %v; want only the stale reservation", lost, err)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs") + db.Count(t, "SELECT COUNT(*) FROM failed_jobs"); n != 0 {
			t.Fatalf("%d rows left", n)
		}
	})
}

func TestPriorityQueues(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		for i := 0; i < 3; i++ {
			push(t, q, dbqueue.NewJob{Name: "low", Queue: "default"})
		}
		push(t, q, dbqueue.NewJob{Name: "high", Queue: "high"})
		jobs := reserve(t, q, 2, "high", "default")
		if len(jobs) != 2 || jobs[0].Queue != "high" || jobs[1].Queue != "default" {
			t.Fatalf("want the high job first then one default, got %d", len(jobs))
		}
		jobs = reserve(t, q, 5, "high", "default")
		if len(jobs) != 2 {
			t.Fatalf("want the 2 remaining default jobs, got %d", len(jobs))
		}
	})
}

func TestMalformedPayloadIsFailedNotBlocking(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		first := push(t, q, dbqueue.NewJob{Name: "good"})
		insert := "INSERT INTO jobs (queue, payload, attempts, available_at, created_at) VALUES ('default', ?, 0, 0, 0)"
		db.Exec(t, insert, "{not json")
		db.Exec(t, insert, `{"uuid":"3f1e1c1a-0000-4000-8000-000000000001","data":1}`)
		last := push(t, q, dbqueue.NewJob{Name: "good"})
		jobs, err := q.Reserve(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) != 2 || jobs[0].ID != first && jobs[1].ID != first || jobs[0].ID != last && jobs[1].ID != last {
			t.Fatalf("want the two good jobs, got %d", len(jobs))
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM failed_jobs WHERE exception LIKE '%malformed payload%'"); n != 2 {
			t.Fatalf("%d malformed rows in failed_jobs, want 2", n)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM failed_jobs WHERE uuid = '3f1e1c1a-0000-4000-8000-000000000001'"); n != 1 {
			t.Fatal("a malformed row's own uuid was not kept")
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 2 {
			t.Fatalf("%d jobs rows, want the 2 reserved good ones", n)
		}
	})
}

func TestSizesAndClear(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		for i := 0; i < 4; i++ {
			push(t, q, dbqueue.NewJob{Name: "n"})
		}
		push(t, q, dbqueue.NewJob{Name: "n", Delay: time.Minute})
		push(t, q, dbqueue.NewJob{Name: "other", Queue: "other"})
		reserve(t, q, 1)
		s, err := q.Size(ctx, "default")
		if err != nil {
			t.Fatal(err)
		}
		if (s != dbqueue.Sizes{Pending: 3, Delayed: 1, Reserved: 1, OldestPending: s.OldestPending}) {
			t.Fatalf("sizes %+v", s)
		}
		n, err := q.Clear(ctx, "default")
		if err != nil || n != 5 {
			t.Fatalf("clear removed %d (%v), want 5", n, err)
		}
		if s, _ := q.Size(ctx, "other"); s.Pending != 1 {
			t.Fatalf("clear touched another queue: %+v", s)
		}
	})
}

// TestConcurrentReserveExactlyOnce: 16 goroutines, each with its own
// connection pool, reserve and delete from one queue. No job is held by two
// at once and every job is reserved exactly once.
func TestConcurrentReserveExactlyOnce(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		const jobs, workers = 3000, 16
		seed := db.Queue(t)
		batch := make([]dbqueue.NewJob, jobs)
		for i := range batch {
			batch[i] = dbqueue.NewJob{Name: "count"}
		}
		if _, err := seed.PushMany(ctx, batch); err != nil {
			t.Fatal(err)
		}
		var (
			mu   sync.Mutex
			seen = map[int64]int{}
			wg   sync.WaitGroup
		)
		errs := make(chan error, workers)
		for w := 0; w < workers; w++ {
			q := db.Queue(t)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					got, err := q.Reserve(ctx, 10)
					if err != nil {
						errs <- err
						return
					}
					if len(got) == 0 {
						return
					}
					mu.Lock()
					for _, j := range got {
						seen[j.ID]++
					}
					mu.Unlock()
					if lost, err := dbqueue.DeleteMany(ctx, q, got); err != nil || len(lost) > 0 {
						errs <- fmt.Errorf("delete: %d lost, %v", len(lost), err)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if len(seen) != jobs {
			t.Fatalf("%d distinct jobs reserved, want %d", len(seen), jobs)
		}
		for id, n := range seen {
			if n != 1 {
				t.Fatalf("job %d reserved %d times", id, n)
			}
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 0 {
			t.Fatalf("%d jobs left", n)
		}
	})
}

// TestNewSQLOnPostgres runs the queue over database/sql with pgx's stdlib
// driver, the path for apps that hold a *sql.DB rather than a pgx pool.
func TestNewSQLOnPostgres(t *testing.T) {
	db := dbtest.New(t, dbqueue.Postgres)
	q, err := dbqueue.New(ctx, dbqpgx.NewSQL(db.SQL))
	if err != nil {
		t.Fatal(err)
	}
	ids, err := q.PushMany(ctx, []dbqueue.NewJob{{Name: "a"}, {Name: "b"}, {Name: "c"}})
	if err != nil || len(ids) != 3 {
		t.Fatalf("push: %v %v", ids, err)
	}
	jobs := reserve(t, q, 3)
	if len(jobs) != 3 {
		t.Fatalf("reserved %d", len(jobs))
	}
	if err := q.Release(ctx, jobs[2], 0); err != nil {
		t.Fatal(err)
	}
	lost, err := dbqueue.DeleteMany(ctx, q, jobs)
	if err != nil || len(lost) != 1 || lost[0] != jobs[2] {
		t.Fatalf("DeleteMany: lost %v, %v; want only the released job", lost, err)
	}
	if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 1 {
		t.Fatalf("%d jobs left, want the released one", n)
	}
}

// A queue opened from a MySQL DSN owns its pool and runs every session in
// READ COMMITTED, so claims skip a SET TRANSACTION each; a pool the caller
// hands over keeps its own isolation, and claims still work on it.
func TestMySQLSessionIsolation(t *testing.T) {
	db := dbtest.New(t, dbqueue.MySQL)
	own := db.Queue(t)
	if level, err := dbqueue.SessionIsolation(ctx, own); err != nil || level != "READ-COMMITTED" {
		t.Fatalf("Open's session isolation = %q, %v; want READ-COMMITTED", level, err)
	}
	theirs, err := dbqueue.New(ctx, dbqmysql.New(db.SQL))
	if err != nil {
		t.Fatal(err)
	}
	if level, err := dbqueue.SessionIsolation(ctx, theirs); err != nil || level != "REPEATABLE-READ" {
		t.Fatalf("NewSQL's session isolation = %q, %v; want the caller's REPEATABLE-READ untouched", level, err)
	}
	if _, err := own.PushMany(ctx, []dbqueue.NewJob{{Name: "a"}, {Name: "b"}}); err != nil {
		t.Fatal(err)
	}
	a, b := reserve(t, own, 1), reserve(t, theirs, 1)
	if len(a) != 1 || len(b) != 1 || a[0].ID == b[0].ID {
		t.Fatalf("claims on both pools = %v, %v; want one different job each", a, b)
	}
	if lost, err := dbqueue.DeleteMany(ctx, theirs, append(a, b...)); err != nil || len(lost) != 0 {
		t.Fatalf("DeleteMany: lost %v, %v", lost, err)
	}
}

// Queues names every queue that holds a job, sorted, and no other.
func TestQueuesListsQueuesWithJobs(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		push(t, q, dbqueue.NewJob{Name: "x", Queue: "mail"})
		push(t, q, dbqueue.NewJob{Name: "x", Queue: "audio", Delay: time.Hour})
		push(t, q, dbqueue.NewJob{Name: "x", Queue: "mail"})
		names, err := q.Queues(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(names, ",") != "audio,mail" {
			t.Fatalf("Queues() = %v, want [audio mail]", names)
		}
		if _, err := q.Clear(ctx, "audio"); err != nil {
			t.Fatal(err)
		}
		if names, _ := q.Queues(ctx); strings.Join(names, ",") != "mail" {
			t.Fatalf("after clearing audio, Queues() = %v, want [mail]", names)
		}
	})
}
