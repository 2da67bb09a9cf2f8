package interop

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/failed"
	"github.com/dbqueue/dbqueue/internal/queueside"
	"github.com/dbqueue/dbqueue/migrations"
	"github.com/dbqueue/dbqueue/worker"
)

// wantIndexes are the indexes the jobs and failed_jobs tables must have
// after migrations.Up on Laravel's tables: Laravel's own (kept) and
// dbqueue's (added).
var wantIndexes = map[dbqueue.Dialect][]string{
	dbqueue.Postgres: {"jobs_queue_index", "jobs_queue_ready_idx", "jobs_queue_reserved_idx", "failed_jobs_failed_at_idx"},
	dbqueue.MySQL:    {"jobs_queue_index", "jobs_queue_available_idx"},
	dbqueue.SQLite:   {"jobs_queue_index", "jobs_queue_ready_idx", "jobs_queue_reserved_idx", "failed_jobs_failed_at_idx"},
}

func (s *side) hasIndex(t testing.TB, name string) bool {
	t.Helper()
	switch s.Dialect {
	case dbqueue.Postgres:
		return s.Count(t, "SELECT COUNT(*) FROM pg_indexes WHERE schemaname = current_schema() AND indexname = ?", name) == 1
	case dbqueue.MySQL:
		return s.Count(t, "SELECT COUNT(DISTINCT index_name) FROM information_schema.statistics WHERE table_schema = DATABASE() AND index_name = ?", name) == 1
	default:
		return s.Count(t, "SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name = ?", name) == 1
	}
}

// An application that already has Laravel's tables runs migrations.Up: it
// keeps the tables (and a job Laravel queued), adds dbqueue's signals
// table and indexes, and every queue operation and the worker then work on
// Laravel's column types.
func TestDbqueueOnLaravelTables(t *testing.T) {
	t.Parallel()
	each(t, true, func(t *testing.T, s *side) {
		ctx := context.Background()
		s.runPHP(t, nil, "schema.php")
		s.pushPHP(t, "string", "1", "--key=before-migration")
		if err := migrations.Up(ctx, s.SQL, s.Dialect); err != nil {
			t.Fatalf("migrations.Up on the tables Laravel created: %v", err)
		}
		for _, idx := range wantIndexes[s.Dialect] {
			if !s.hasIndex(t, idx) {
				t.Errorf("after migrations.Up on Laravel's tables: index %s is missing", idx)
			}
		}
		if n := s.Count(t, "SELECT COUNT(*) FROM dbqueue_signals"); n != 0 {
			t.Errorf("dbqueue_signals has %d rows, want a new empty table", n)
		}
		if rows := s.jobRows(t); len(rows) != 1 || rows[0].Key != "before-migration" {
			t.Fatalf("jobs after migrations.Up = %+v, want the one Laravel queued before", rows)
		}

		q := s.Queue(t)
		id, err := q.Push(ctx, dbqueue.NewJob{Name: `Go\Report@run`, Data: map[string]string{"key": "go-1"}, MaxTries: 2})
		if err != nil {
			t.Fatal(err)
		}
		held, err := q.Reserve(ctx, 5)
		if err != nil {
			t.Fatal(err)
		}
		if len(held) != 2 || held[0].Name() != recorderHandle || held[1].ID != id || held[1].Attempts != 1 {
			t.Fatalf("Reserve on Laravel's table = %v, want Laravel's job then job %d at attempt 1", jobNames(held), id)
		}
		laravelJob, goJob := held[0], held[1]
		// Give Laravel's job back untouched; release Go's in place.
		if err := unreserve(ctx, q, laravelJob); err != nil {
			t.Fatal(err)
		}
		if err := q.Release(ctx, goJob, 0); err != nil {
			t.Fatal(err)
		}
		rows := s.jobRows(t)
		if len(rows) != 2 || rows[0].Attempts != 0 || rows[0].Reserved || rows[1].ID != id || rows[1].Attempts != 1 || rows[1].Reserved {
			t.Fatalf("after Unreserve and Release: jobs = %+v, want Laravel's at 0 attempts and job %d released in place at 1", rows, id)
		}
		// Both again: Laravel's first (oldest), Go's at its second attempt.
		both, err := q.Reserve(ctx, 2)
		if err != nil || len(both) != 2 || both[0].ID != laravelJob.ID || both[0].Attempts != 1 || both[1].ID != id || both[1].Attempts != 2 {
			t.Fatalf("second Reserve = %v, %v; want Laravel's job %d at attempt 1, then job %d at attempt 2", jobNames(both), err, laravelJob.ID, id)
		}
		if err := unreserve(ctx, q, both[0]); err != nil {
			t.Fatal(err)
		}
		if err := q.Fail(ctx, both[1], errors.New("interop: boom")); err != nil {
			t.Fatal(err)
		}

		store := newStore(t, q)
		list, err := store.List(ctx, failed.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 1 || list[0].UUID != goJob.Payload.UUID || list[0].Exception != "interop: boom" ||
			list[0].Name() != `Go\Report@run` || list[0].Connection != "database" || list[0].Queue != "default" {
			t.Fatalf("failed.List = %+v, want the Go job failed with interop: boom", list)
		}
		if since := time.Since(list[0].FailedAt); since < -time.Minute || since > time.Minute {
			t.Errorf("failed_at of a job failed just now reads %v (%v ago)", list[0].FailedAt, since)
		}
		if php := s.phpFailedList(t); len(php) != 1 || php[0].UUID != goJob.Payload.UUID || php[0].Exception != "interop: boom" {
			t.Errorf("php failed.php list = %+v, want the job Go failed", php)
		}
		if n, err := store.Retry(ctx, goJob.Payload.UUID); err != nil || n != 1 {
			t.Fatalf("failed.Retry = %d, %v", n, err)
		}
		rows = s.jobRows(t)
		if len(rows) != 2 || rows[1].UUID != goJob.Payload.UUID || rows[1].Attempts != 0 || rows[1].Reserved {
			t.Fatalf("after failed.Retry: jobs = %+v, want the Go job back at 0 attempts", rows)
		}

		// The worker runs both, Laravel's string job and Go's.
		w, err := worker.New(q, worker.Options{StopWhenEmpty: true, Sleep: 100 * time.Millisecond, Logger: quietLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		recordKey := func(ctx context.Context, job *dbqueue.Job, data struct{ Key string }) error {
			return s.record(ctx, data.Key)
		}
		worker.HandleJSON(w, `Go\Report@run`, recordKey)
		worker.HandleJSON(w, recorderHandle, recordKey)
		if err := w.Run(ctx); err != nil {
			t.Fatal(err)
		}
		runs := s.runs(t)
		if len(runs) != 2 || !slices.Equal(runs["before-migration"], []string{"go"}) || !slices.Equal(runs["go-1"], []string{"go"}) {
			t.Errorf("ledger = %v, want before-migration and go-1 run once each by Go", runs)
		}
		if n := s.Count(t, "SELECT COUNT(*) FROM jobs") + s.Count(t, "SELECT COUNT(*) FROM failed_jobs"); n != 0 {
			t.Errorf("%d rows left in jobs and failed_jobs, want none", n)
		}
	})
}

func jobNames(jobs []*dbqueue.Job) string {
	var b strings.Builder
	for i, j := range jobs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(j.Name())
	}
	return "[" + b.String() + "]"
}

// On the tables dbqueue's migrations create, Laravel pushes string and
// object jobs and its worker runs, releases and fails them; Go sees the
// failure, retries it, and Laravel runs the retried job from the payload Go
// moved back byte for byte.
func TestLaravelOnDbqueueTables(t *testing.T) {
	t.Parallel()
	each(t, false, func(t *testing.T, s *side) {
		ctx := context.Background()
		s.pushPHP(t, "string", "5", "--key=s", `--data={"n":42,"name":"Zoë"}`)
		s.pushPHP(t, "object", "2", "--key=o")
		s.pushPHP(t, "object", "1", "--key=bad", "--throw", "--tries=2", "--backoff=0")
		s.pushPHP(t, "string", "1", "--key=later", "--delay=3600")

		s.startPHPWorker(t, nil, "--tries=1").wait(t)

		runs := s.runs(t)
		want := []string{"o-1", "o-2", "s-1", "s-2", "s-3", "s-4", "s-5"}
		if got := sortedKeys(runs); !slices.Equal(got, want) {
			t.Errorf("ledger keys = %v, want %v", got, want)
		}
		for key, runners := range runs {
			if !slices.Equal(runners, []string{"php"}) {
				t.Errorf("job %s ran %v, want once by php", key, runners)
			}
		}
		rows := s.jobRows(t)
		if len(rows) != 1 || rows[0].Key != "later" || rows[0].Attempts != 0 || rows[0].AvailableAt-rows[0].CreatedAt != 3600 {
			t.Errorf("jobs = %+v, want only the delayed job, due in 3600s", rows)
		}
		fails := s.failedRows(t)
		bad, ok := fails["bad"]
		if len(fails) != 1 || !ok || bad.Job != interopJob || bad.Connection != "database" || bad.Queue != "default" ||
			!strings.HasPrefix(bad.Exception, "RuntimeException: interop: deliberate object-job failure for key bad") {
			t.Fatalf("failed_jobs = %+v, want the throwing object job failed by Laravel", fails)
		}

		q := s.Queue(t)
		store := newStore(t, q)
		job, err := store.Find(ctx, bad.UUID)
		if err != nil {
			t.Fatal(err)
		}
		if job.Name() != interopJob {
			t.Errorf("failed.Find(%s).Name() = %q, want %q", bad.UUID, job.Name(), interopJob)
		}
		if since := time.Since(job.FailedAt); since < -time.Minute || since > time.Minute {
			t.Errorf("failed_at Laravel wrote reads as %v (%v ago) through failed.Store", job.FailedAt, since)
		}
		if n, err := store.Retry(ctx, bad.UUID); err != nil || n != 1 {
			t.Fatalf("failed.Retry of Laravel's failed job = %d, %v", n, err)
		}
		if n := s.Count(t, "SELECT COUNT(*) FROM failed_jobs"); n != 0 {
			t.Fatalf("failed_jobs has %d rows after the retry", n)
		}
		s.startPHPWorker(t, nil, "--tries=1").wait(t)
		fails = s.failedRows(t)
		if again, ok := fails["bad"]; len(fails) != 1 || !ok || again.UUID != bad.UUID ||
			!strings.HasPrefix(again.Exception, "RuntimeException: interop: deliberate object-job failure for key bad") {
			t.Errorf("after Go retried it, Laravel's worker left failed_jobs = %+v, want the job run and failed again under uuid %s", fails, bad.UUID)
		}
		if n := s.Count(t, "SELECT COUNT(*) FROM jobs"); n != 1 {
			t.Errorf("jobs has %d rows, want only the delayed one", n)
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

// unreserve gives a held job back as a worker does with one it never
// started (the worker side of dbqueue, reached through internal/core).
func unreserve(ctx context.Context, q *dbqueue.Queue, job *dbqueue.Job) error {
	return queueside.Of(q).Unreserve(ctx, job)
}
