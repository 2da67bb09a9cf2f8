package failed_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/internal/queueside"
)

// On PostgreSQL a retry wakes the workers listening on the queues its jobs
// return to, as a push does, and only those.
func TestRetryWakesListeners(t *testing.T) {
	db := dbtest.New(t, dbqueue.Postgres)
	q := db.Queue(t)
	s := newStore(t, q)
	// Other tests share the database and its notification channel: queues
	// of our own.
	mail := fmt.Sprintf("retry-wake-mail-%d", time.Now().UnixNano())
	other := mail + "-other"
	// Failed before anyone listens: their pushes wake nobody later.
	mailJob := failJob(t, q, dbqueue.NewJob{Name: "m", Queue: mail}).Payload.UUID
	otherJob := failJob(t, q, dbqueue.NewJob{Name: "o", Queue: other}).Payload.UUID

	// The failure bound of each wait; a wake-up normally takes milliseconds.
	const bound = 10 * time.Second
	await := func(ch <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(bound):
			t.Fatalf("%s: no wake-up within %v", what, bound)
		}
	}
	mailWake, stopMail := wakeups(q, mail)
	defer stopMail()
	// Starting to listen wakes the subscribers once, for what came before.
	await(mailWake, "starting to listen")
	// The listener is up now: a second subscriber shares it and gets no
	// such wake-up.
	otherWake, stopOther := wakeups(q, other)
	defer stopOther()

	if n, err := s.Retry(ctx, otherJob); err != nil || n != 1 {
		t.Fatalf("retry the other queue's job: %d, %v", n, err)
	}
	await(otherWake, "a retry onto the other queue")
	// One listening connection delivers notifications in order and wakes
	// every subscriber of one before the next: by now the retry's
	// notification has reached the mail subscriber too, if it was for it.
	select {
	case <-mailWake:
		t.Fatal("a retry onto another queue woke the mail listener")
	default:
	}

	// A retry that rolls back after moving its job wakes nobody: a trigger
	// refuses to delete the failed row once the job is back in jobs.
	db.Exec(t, `CREATE FUNCTION refuse_delete() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused'; END $$`)
	db.Exec(t, "CREATE TRIGGER refuse_delete BEFORE DELETE ON failed_jobs FOR EACH ROW EXECUTE FUNCTION refuse_delete()")
	if n, err := s.Retry(ctx, mailJob); err == nil || !strings.Contains(err.Error(), "refused") || n != 0 {
		t.Fatalf("retry refused by the trigger: %d, %v; want the trigger's error", n, err)
	}
	if n := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE queue = ?", mail); n != 0 {
		t.Fatalf("%d jobs on mail after a rolled-back retry", n)
	}
	// A push onto the other queue comes after any notification of the
	// rolled-back retry: once it has arrived, that one would have too.
	if _, err := q.Push(ctx, dbqueue.NewJob{Name: "barrier", Queue: other}); err != nil {
		t.Fatal(err)
	}
	await(otherWake, "a push onto the other queue")
	select {
	case <-mailWake:
		t.Fatal("a rolled-back retry woke the mail listener")
	default:
	}
	db.Exec(t, "DROP TRIGGER refuse_delete ON failed_jobs")

	if n, err := s.Retry(ctx, mailJob); err != nil || n != 1 {
		t.Fatalf("retry the mail job: %d, %v", n, err)
	}
	await(mailWake, "a retry onto mail")

	// RetryQueue and RetryAll wake alike.
	failJob(t, q, dbqueue.NewJob{Name: "m2", Queue: mail})
	await(mailWake, "the push of the next mail job") // drain the push's own wake-up
	if n, err := s.RetryQueue(ctx, mail); err != nil || n != 1 {
		t.Fatalf("retry queue mail: %d, %v", n, err)
	}
	await(mailWake, "RetryQueue onto mail")
}

// wakeups subscribes to a queue's wake-ups as a worker does (the worker side
// of dbqueue, reached through internal/core).
func wakeups(q *dbqueue.Queue, queues ...string) (<-chan struct{}, func()) {
	return queueside.Of(q).Wakeups(queues...)
}
