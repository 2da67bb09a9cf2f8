package dbqueue_test

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/internal/dialect"
)

// FuzzFailureText fails a job with an error of any bytes, and releases
// one with it, on SQLite (PostgreSQL and MariaDB refuse what
// dialect.StorableText escapes; TestFailureTextsAreStorable runs the
// worst cases there). Whatever the bytes, the fail and the release are
// written, failed_jobs and the error history read back exactly the
// escaped, capped text, and that text is valid UTF-8 without NUL, within
// its cap, and the input itself when the input was already storable.
func FuzzFailureText(f *testing.F) {
	for _, s := range []string{"", "plain", "\x00", "\xff\xfe", "é\xc3", `\x00 literal`, "\xed\xa0\x80", strings.Repeat("\x00", 5000)} {
		f.Add(s)
	}
	db := dbtest.New(f, dbqueue.SQLite)
	q := db.Queue(f)
	f.Fuzz(func(t *testing.T, text string) {
		db.Exec(t, "DELETE FROM jobs")
		db.Exec(t, "DELETE FROM failed_jobs")
		db.Exec(t, "DELETE FROM dbqueue_job_errors")
		push(t, q, dbqueue.NewJob{Name: "fuzzed"})
		job := reserve(t, q, 1)[0]
		if err := q.ReleaseAfterError(ctx, job, 0, errors.New(text)); err != nil {
			t.Fatalf("release: %v", err)
		}
		hist := errorsOf(t, q, job.ID)
		if len(hist) != 1 {
			t.Fatalf("%d errors in the history, want 1", len(hist))
		}
		checkStored(t, text, hist[0].Error, dbqueue.ErrorHistoryBytes)
		job = reserve(t, q, 1)[0]
		if err := q.Fail(ctx, job, errors.New(text)); err != nil {
			t.Fatalf("fail: %v", err)
		}
		checkStored(t, text, failedException(t, db, job.Payload.UUID), dbqueue.FailureTextBytes)
	})
}

// checkStored checks the text stored for input under limit.
func checkStored(t *testing.T, input, got string, limit int) {
	t.Helper()
	if want := dialect.StorableText(input, limit); got != want {
		t.Fatalf("stored %q, want %q", got, want)
	}
	if !utf8.ValidString(got) || strings.IndexByte(got, 0) >= 0 || len(got) > limit {
		t.Fatalf("stored text %q is not storable (or over %d bytes)", got, limit)
	}
	if utf8.ValidString(input) && strings.IndexByte(input, 0) < 0 && len(input) <= limit && got != input {
		t.Fatalf("a storable text %q came back as %q", input, got)
	}
}
