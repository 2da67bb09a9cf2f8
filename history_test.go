package dbqueue_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/failed"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// errorsOf reads a job's error history texts.
func errorsOf(t *testing.T, q *dbqueue.Queue, id int64) []dbqueue.AttemptError {
	t.Helper()
	info, err := q.Job(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return info.Errors
}

func texts(errs []dbqueue.AttemptError) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error)
	}
	return out
}

// releaseWith reserves the one job of the queue and releases it with
// cause, due at once.
func releaseWith(t *testing.T, q *dbqueue.Queue, queue, cause string) *dbqueue.Job {
	t.Helper()
	var queues []string
	if queue != "" {
		queues = []string{queue}
	}
	jobs := reserve(t, q, 1, queues...)
	if len(jobs) != 1 {
		t.Fatalf("reserved %d jobs, want 1", len(jobs))
	}
	if err := q.ReleaseAfterError(ctx, jobs[0], 0, errors.New(cause)); err != nil {
		t.Fatal(err)
	}
	return jobs[0]
}

// A job that fails twice and is then retried shows both errors in order,
// with their attempts; the history goes with it into failed_jobs, comes
// back when it is retried, and goes when it finally succeeds.
func TestErrorHistoryFollowsTheJob(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		queue := strings.Repeat("q\u202e<", 51) // 255 bytes, bidi control and markup
		id := push(t, q, dbqueue.NewJob{Name: "flaky", Queue: queue})
		releaseWith(t, q, queue, "first: upstream 503")
		releaseWith(t, q, queue, "second: <script>alert(1)</script>")
		got := errorsOf(t, q, id)
		if strings.Join(texts(got), "|") != "first: upstream 503|second: <script>alert(1)</script>" {
			t.Fatalf("history %q, want the two errors in order", texts(got))
		}
		if got[0].Attempt != 1 || got[1].Attempt != 2 || got[0].Worker == "" || got[1].At.Before(got[0].At) {
			t.Fatalf("history %+v: want attempts 1 and 2, a worker, times in order", got)
		}

		// The third attempt fails for good: the history moves with it.
		job := reserve(t, q, 1, queue)[0]
		if err := q.Fail(ctx, job, errors.New("third: gave up")); err != nil {
			t.Fatal(err)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM dbqueue_job_errors WHERE job_id IS NOT NULL"); n != 0 {
			t.Fatalf("%d history rows still keyed by job id after the fail", n)
		}
		store, err := failed.New(q)
		if err != nil {
			t.Fatal(err)
		}
		fj, err := store.Find(ctx, job.Payload.UUID)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(texts(fj.Errors), "|") != "first: upstream 503|second: <script>alert(1)</script>" || fj.Exception != "third: gave up" {
			t.Fatalf("failed job: history %q, exception %q", texts(fj.Errors), fj.Exception)
		}

		// Retried: the new row has the history, with the failure's own
		// error as its newest (its attempt, 3, from the failed payload's
		// mark), and adds to it.
		if n, err := store.Retry(ctx, fj.UUID); err != nil || n != 1 {
			t.Fatalf("retry: %d, %v", n, err)
		}
		page, err := q.Jobs(ctx, dbqueue.JobFilter{Queue: queue})
		if err != nil || len(page) != 1 {
			t.Fatalf("jobs after retry: %v, %v", page, err)
		}
		again := page[0].ID
		back := errorsOf(t, q, again)
		if len(back) != 3 || back[2].Error != "third: gave up" || back[2].Attempt != 3 || back[2].At.Before(back[1].At) {
			t.Fatalf("history after retry %+v, want the failure's error as attempt 3, newest", back)
		}
		releaseWith(t, q, queue, "fourth: after retry")
		if got := texts(errorsOf(t, q, again)); strings.Join(got, "|") != "first: upstream 503|second: <script>alert(1)</script>|third: gave up|fourth: after retry" {
			t.Fatalf("history after retry %q", got)
		}

		// Success deletes the history with the job.
		done := reserve(t, q, 1, queue)[0]
		if err := q.Delete(ctx, done); err != nil {
			t.Fatal(err)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM dbqueue_job_errors"); n != 0 {
			t.Fatalf("%d history rows left after the job succeeded", n)
		}
	})
}

// A worker whose reservation ran out and whose job another worker took
// writes nothing into the new holder's history when its release fails.
func TestStaleReleaseWritesNoHistory(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		id := push(t, q, dbqueue.NewJob{Name: "slow"})
		stale := reserve(t, q, 1)[0]
		db.Exec(t, "UPDATE jobs SET reserved_at = reserved_at - 100000 WHERE id = ?", id)
		current := reserve(t, q, 1)
		if len(current) != 1 {
			t.Fatal("the expired reservation was not reclaimed")
		}
		if err := q.ReleaseAfterError(ctx, stale, 0, errors.New("stale holder's error")); !errors.Is(err, dbqueue.ErrNotHeld) {
			t.Fatalf("stale release: %v, want ErrNotHeld", err)
		}
		if got := errorsOf(t, q, id); len(got) != 0 {
			t.Fatalf("stale holder wrote %q into the new holder's history", texts(got))
		}
		if err := q.ReleaseAfterError(ctx, current[0], 0, errors.New("holder's error")); err != nil {
			t.Fatal(err)
		}
		if got := texts(errorsOf(t, q, id)); len(got) != 1 || got[0] != "holder's error" {
			t.Fatalf("history %q, want only the holder's error", got)
		}
	})
}

// A job keeps its newest ErrorHistoryKeep errors, each cut to
// ErrorHistoryBytes at a rune boundary.
func TestErrorHistoryIsBounded(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		id := push(t, q, dbqueue.NewJob{Name: "flaky"})
		for i := range dbqueue.ErrorHistoryKeep + 3 {
			// An error's text is anyone's: a NUL and a byte that is not
			// UTF-8 (neither fits PostgreSQL's text) must not stop the release.
			releaseWith(t, q, "", "\x00\xff"+strings.Repeat("é", dbqueue.ErrorHistoryBytes)+string(rune('a'+i)))
		}
		got := errorsOf(t, q, id)
		if len(got) != dbqueue.ErrorHistoryKeep {
			t.Fatalf("%d errors kept, want %d", len(got), dbqueue.ErrorHistoryKeep)
		}
		if got[0].Attempt != 4 || got[len(got)-1].Attempt != dbqueue.ErrorHistoryKeep+3 {
			t.Fatalf("kept attempts %d..%d, want the newest", got[0].Attempt, got[len(got)-1].Attempt)
		}
		for _, e := range got {
			if len(e.Error) > dbqueue.ErrorHistoryBytes || !utf8.ValidString(e.Error) || !strings.Contains(e.Error, "[cut from") {
				t.Fatalf("error of %d bytes (valid UTF-8: %v) not cut as promised", len(e.Error), utf8.ValidString(e.Error))
			}
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM dbqueue_job_errors"); n != dbqueue.ErrorHistoryKeep {
			t.Fatalf("%d history rows stored, want %d", n, dbqueue.ErrorHistoryKeep)
		}
	})
}

// A job that never failed carries no mark, and a cancelled job or a
// cleared queue takes its history along; PruneErrorHistory removes what a
// delete that knew nothing of it (Laravel's worker) left.
func TestErrorHistoryLeavesWithTheJob(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		a := push(t, q, dbqueue.NewJob{Name: "a", Queue: "cancel"})
		releaseWith(t, q, "cancel", "a failed")
		db.Exec(t, "UPDATE jobs SET available_at = available_at + 3600 WHERE id = ?", a)
		if err := q.Cancel(ctx, a); err != nil {
			t.Fatal(err)
		}
		push(t, q, dbqueue.NewJob{Name: "b", Queue: "clear"})
		releaseWith(t, q, "clear", "b failed")
		if _, err := q.Clear(ctx, "clear"); err != nil {
			t.Fatal(err)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM dbqueue_job_errors"); n != 0 {
			t.Fatalf("%d history rows outlived a cancelled job and a cleared queue", n)
		}
		c := push(t, q, dbqueue.NewJob{Name: "c"})
		releaseWith(t, q, "", "c failed")
		db.Exec(t, "DELETE FROM jobs WHERE id = ?", c) // as Laravel's worker deletes
		if n, err := q.PruneErrorHistory(ctx, 10); err != nil || n != 1 {
			t.Fatalf("PruneErrorHistory: %d, %v; want 1", n, err)
		}
	})
}

// A database that migration 00010 has not reached (a rolling deploy runs
// this code before `migrate up`) keeps no history, and everything else
// works: releases, fails, retries, finishes and the lookups.
func TestNoHistoryTableKeepsNoHistory(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		db.Exec(t, "DROP TABLE dbqueue_job_errors")
		q := db.Queue(t)
		id := push(t, q, dbqueue.NewJob{Name: "flaky"})
		releaseWith(t, q, "", "lost: no table")
		if got := errorsOf(t, q, id); len(got) != 0 {
			t.Fatalf("history without its table: %v", got)
		}
		job := reserve(t, q, 1)[0]
		if err := q.Fail(ctx, job, errors.New("failed")); err != nil {
			t.Fatal(err)
		}
		store, err := failed.New(q)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := store.Retry(ctx, job.Payload.UUID); err != nil || n != 1 {
			t.Fatalf("retry: %d, %v", n, err)
		}
		done := reserve(t, q, 1)[0]
		if err := q.Delete(ctx, done); err != nil {
			t.Fatal(err)
		}
		if n, err := q.PruneErrorHistory(ctx, 10); err != nil || n != 0 {
			t.Fatalf("PruneErrorHistory without its table: %d, %v", n, err)
		}
	})
}

// A job that failed on its first attempt has no history of releases;
// retried from failed_jobs, it brings its failure's error back, and
// failing again keeps both attempts' errors: the lookup (`jobs show`, the
// dashboard's job page) of the retried job shows the first failure, and
// the failed job's history after the second failure shows it too, with
// the second in its exception. A failure retried twice keeps every
// failure, within ErrorHistoryKeep, with escaped and cut text.
func TestRetryKeepsTheFailuresError(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		store, err := failed.New(q)
		if err != nil {
			t.Fatal(err)
		}
		push(t, q, dbqueue.NewJob{Name: "once"})
		first := reserve(t, q, 1)[0]
		if err := q.Fail(ctx, first, errors.New("first failure \x00\xff")); err != nil {
			t.Fatal(err)
		}
		uuid := first.Payload.UUID
		if n, err := store.Retry(ctx, uuid); err != nil || n != 1 {
			t.Fatalf("retry: %d, %v", n, err)
		}
		second := reserve(t, q, 1)[0]
		info, err := q.Job(ctx, second.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(info.Errors) != 1 || info.Errors[0].Error != `first failure \x00\xff` || info.Errors[0].Attempt != 1 {
			t.Fatalf("retried job's history %+v, want its first failure, attempt 1", info.Errors)
		}
		if err := q.Fail(ctx, second, errors.New(strings.Repeat("second failure ", 1000))); err != nil {
			t.Fatal(err)
		}
		fj, err := store.Find(ctx, uuid)
		if err != nil {
			t.Fatal(err)
		}
		if len(fj.Errors) != 1 || fj.Errors[0].Error != `first failure \x00\xff` || !strings.HasPrefix(fj.Exception, "second failure") {
			t.Fatalf("failed again: history %q, exception %.40q", texts(fj.Errors), fj.Exception)
		}
		if n, err := store.Retry(ctx, uuid); err != nil || n != 1 {
			t.Fatalf("retry again: %d, %v", n, err)
		}
		third := reserve(t, q, 1)[0]
		got := errorsOf(t, q, third.ID)
		if len(got) != 2 || got[0].Error != `first failure \x00\xff` || !strings.HasPrefix(got[1].Error, "second failure") ||
			len(got[1].Error) > dbqueue.ErrorHistoryBytes || !strings.HasSuffix(got[1].Error, "[cut from 15000 bytes]") {
			t.Fatalf("history after two failures %.60q", texts(got))
		}
		// Failures beyond ErrorHistoryKeep push the oldest out.
		for i := range dbqueue.ErrorHistoryKeep {
			if err := q.Fail(ctx, third, fmt.Errorf("failure %d", i+3)); err != nil {
				t.Fatal(err)
			}
			if n, err := store.Retry(ctx, uuid); err != nil || n != 1 {
				t.Fatalf("retry: %d, %v", n, err)
			}
			third = reserve(t, q, 1)[0]
		}
		got = errorsOf(t, q, third.ID)
		if len(got) != dbqueue.ErrorHistoryKeep || got[len(got)-1].Error != fmt.Sprintf("failure %d", dbqueue.ErrorHistoryKeep+2) {
			t.Fatalf("history after %d failures %q, want the newest %d", dbqueue.ErrorHistoryKeep+2, texts(got), dbqueue.ErrorHistoryKeep)
		}
	})
}
