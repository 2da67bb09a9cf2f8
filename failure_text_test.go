package dbqueue_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/failed"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/internal/dialect"
)

// hostileTexts are error texts no database stores as they are: bytes that
// are not UTF-8 (PostgreSQL, MariaDB), a NUL (PostgreSQL), and 20 MB,
// more than MariaDB's max_allowed_packet.
var hostileTexts = map[string]string{
	"invalid UTF-8": "upstream said \xff\xfe\xc3(",
	"NUL":           "c string\x00tail",
	"20 MB":         strings.Repeat("stack frame\n", 20<<20/12),
	"all three":     "\x00\xff" + strings.Repeat("é", 10<<20),
}

// failedException reads the exception failed_jobs holds for uuid.
func failedException(t *testing.T, db *dbtest.DB, uuid string) string {
	t.Helper()
	var exc string
	if err := db.SQL.QueryRow(db.Dialect.Rebind("SELECT exception FROM failed_jobs WHERE uuid = ?"), uuid).Scan(&exc); err != nil {
		t.Fatalf("failed_jobs row of %s: %v", uuid, err)
	}
	return exc
}

// A failure whose text the database would refuse is written once, with
// the text escaped and cut as dialect.StorableText says: by Fail, by a
// Cancel reason, by the fail of a chained job (finishLinked), and by a
// release into the error history. None of them waits: the database's
// refusal is never retried.
func TestFailureTextsAreStorable(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		for name, text := range hostileTexts {
			t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
				c, cancel := context.WithTimeout(ctx, 20*time.Second)
				defer cancel()
				queue := "q-" + strings.ReplaceAll(name, " ", "-")
				push(t, q, dbqueue.NewJob{Name: "plain", Queue: queue})
				if _, err := q.PushChain(ctx, dbqueue.NewJob{Name: "link", Queue: queue}, dbqueue.NewJob{Name: "next", Queue: queue}); err != nil {
					t.Fatal(err)
				}
				push(t, q, dbqueue.NewJob{Name: "cancelled", Queue: queue})
				jobs := reserve(t, q, 3, queue)
				if len(jobs) != 3 {
					t.Fatalf("reserved %d jobs, want 3", len(jobs))
				}
				// The first is released with the text first: the error
				// history holds it too.
				if err := q.ReleaseAfterError(c, jobs[0], 0, errors.New(text)); err != nil {
					t.Fatalf("release with the text: %v", err)
				}
				if got := errorsOf(t, q, jobs[0].ID); len(got) != 1 || got[0].Error != dialect.StorableText(text, dbqueue.ErrorHistoryBytes) {
					t.Fatalf("history %.80q, want the text escaped and cut", texts(got))
				}
				again := reserve(t, q, 1, queue)
				if len(again) != 1 || again[0].ID != jobs[0].ID {
					t.Fatalf("the released job did not come back: %v", again)
				}
				for i, cause := range []error{errors.New(text), errors.New(text), dbqueue.Cancelled(text)} {
					job := jobs[i]
					if i == 0 {
						job = again[0]
					}
					if err := q.Fail(c, job, cause); err != nil {
						t.Fatalf("fail %s: %v", job.Name(), err)
					}
					want := dialect.StorableText(cause.Error(), dbqueue.FailureTextBytes)
					if got := failedException(t, db, job.Payload.UUID); got != want {
						t.Fatalf("%s: failed_jobs.exception %d bytes %.80q…, want %d bytes %.80q…", job.Name(), len(got), got, len(want), want)
					}
				}
				if c.Err() != nil {
					t.Fatal("the failures took as long as a retry loop")
				}
				if n := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE queue = ?", queue); n != 0 {
					t.Fatalf("%d jobs left in %s (the chain's next link must not be pushed)", n, queue)
				}
				store, err := failed.New(q)
				if err != nil {
					t.Fatal(err)
				}
				fj, err := store.Find(ctx, jobs[0].Payload.UUID)
				if err != nil {
					t.Fatal(err)
				}
				if len(fj.Errors) != 1 || fj.Errors[0].Error != dialect.StorableText(text, dbqueue.ErrorHistoryBytes) {
					t.Fatalf("failed job's history %.80q", texts(fj.Errors))
				}
			})
		}
	})
}

// A failure the database refuses even escaped and cut — a column of
// another character set than dbqueue's migrations create, a payload copy
// over a column's or the server's limit — is still written once: with
// its text in ASCII, then with a stub in place of the payload, which
// names the job but cannot run if retried. Before, Fail was retried until
// the reservation ran out, and the job came back to fail the same way.
func TestRefusedFailureFallsBack(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		if db.Dialect == dbqueue.SQLite {
			t.Skip("SQLite stores any text up to a gigabyte: nothing to refuse")
		}
		// An exception column that cannot hold the text: a Laravel table
		// of utf8mb3 (no emoji) on MariaDB, a narrow one on PostgreSQL;
		// and a payload column narrower than a payload (on MariaDB,
		// TestRefusedPayloadOverMaxAllowedPacket meets the server's own
		// limit).
		if db.Dialect == dbqueue.MySQL {
			db.Exec(t, "ALTER TABLE failed_jobs MODIFY exception longtext CHARACTER SET utf8mb3 NOT NULL, MODIFY payload varchar(2000) NOT NULL")
		} else {
			db.Exec(t, "ALTER TABLE failed_jobs ALTER COLUMN exception TYPE varchar(5000), ALTER COLUMN payload TYPE varchar(2000)")
		}
		q := db.Queue(t)
		store, err := failed.New(q)
		if err != nil {
			t.Fatal(err)
		}
		c, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		text := "quota 🙂 exceeded " + strings.Repeat("x", 6000)
		push(t, q, dbqueue.NewJob{Name: "narrow", Queue: "narrow", Data: map[string]string{"keep": "me"}})
		job := reserve(t, q, 1, "narrow")[0]
		if err := q.Fail(c, job, errors.New(text)); err != nil {
			t.Fatalf("fail into a narrow exception column: %v", err)
		}
		exc := failedException(t, db, job.Payload.UUID)
		if !strings.HasPrefix(exc, "dbqueue: the database refused this failure as written (") ||
			!strings.Contains(exc, `quota \U0001f642 exceeded xxx`) || len(exc) > dbqueue.ErrorHistoryBytes {
			t.Fatalf("fallback exception %.200q (%d bytes)", exc, len(exc))
		}
		fj, err := store.Find(ctx, job.Payload.UUID)
		if err != nil {
			t.Fatal(err)
		}
		if string(fj.Payload) != string(job.RawPayload) {
			t.Fatalf("the payload copy was not kept when only the text was refused: %s", fj.Payload)
		}

		// A payload copy failed_jobs refuses.
		push(t, q, dbqueue.NewJob{Name: "wide", Queue: "wide", Data: strings.Repeat("d", 3000)})
		wide := reserve(t, q, 1, "wide")[0]
		if err := q.Fail(c, wide, errors.New("boom")); err != nil {
			t.Fatalf("fail with a payload failed_jobs refuses: %v", err)
		}
		if c.Err() != nil {
			t.Fatal("the fallbacks took as long as a retry loop")
		}
		fw, err := store.Find(ctx, wide.Payload.UUID)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(fw.Payload), `"dbqueuePayloadLost"`) || fw.Name() != "" || !strings.Contains(fw.Exception, `in ASCII: "boom"`) ||
			!strings.Contains(fw.Exception, "bytes) was refused too") {
			t.Fatalf("stub row: payload %s, exception %q", fw.Payload, fw.Exception)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 0 {
			t.Fatalf("%d jobs left reserved", n)
		}
		// Retrying the stub cannot run a handler without its data: the
		// claim fails it again as malformed.
		if n, err := store.Retry(ctx, wide.Payload.UUID); err != nil || n != 1 {
			t.Fatalf("retry the stub: %d, %v", n, err)
		}
		if got := reserve(t, q, 1, "wide"); len(got) != 0 {
			t.Fatalf("the stub was handed out to run: %s", got[0].RawPayload)
		}
	})
}

// On MariaDB, a payload the jobs table holds but whose copy into
// failed_jobs, with the failure's text beside it, is over the server's
// own max_allowed_packet is refused; the job is failed once, with a stub
// that names it. The server's limit is
// read, not lowered: it is a global other tests share.
func TestRefusedPayloadOverMaxAllowedPacket(t *testing.T) {
	db := dbtest.New(t, dbqueue.MySQL)
	var limit int
	if err := db.SQL.QueryRow("SELECT @@max_allowed_packet").Scan(&limit); err != nil {
		t.Fatal(err)
	}
	if limit > 64<<20 {
		t.Skipf("max_allowed_packet is %d bytes: too large a payload to build here", limit)
	}
	head, tail := `{"uuid":"u-big","displayName":"big","job":"big","data":"`, `"}`
	payload := head + strings.Repeat("d", limit-len(head)-len(tail)-10) + tail // 10 bytes under the limit
	db.Exec(t, "INSERT INTO jobs (queue, payload, attempts, reserved_at, available_at, created_at) VALUES ('big', ?, 0, NULL, 0, 0)", payload)
	q := db.Queue(t)
	job := reserve(t, q, 1, "big")[0]
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := q.Fail(c, job, errors.New("too big to keep "+strings.Repeat("!", 2000))); err != nil {
		t.Fatalf("fail: %v", err)
	}
	store, err := failed.New(q)
	if err != nil {
		t.Fatal(err)
	}
	fj, err := store.Find(ctx, "u-big")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(fj.Payload), `"dbqueuePayloadLost"`) || !strings.Contains(fj.Exception, "max_allowed_packet") ||
		!strings.Contains(fj.Exception, `"too big to keep !!!`) {
		t.Fatalf("stub row: payload %d bytes %.100s, exception %.300q", len(fj.Payload), fj.Payload, fj.Exception)
	}
	if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 0 {
		t.Fatalf("%d jobs left", n)
	}
}
