package dbqueue_test

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/driver/dbqpgx"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// WithListenDSN and WithoutListen refuse what cannot work, saying why, and
// never show a password.
func TestListenOptionsRefuseBadInput(t *testing.T) {
	pg := dbtest.New(t, dbqueue.Postgres)
	lite := dbtest.New(t, dbqueue.SQLite)
	for _, c := range []struct {
		name string
		dsn  string
		opts []dbqueue.Option
		want string
	}{
		{"empty", pg.DSN, []dbqueue.Option{dbqueue.WithListenDSN("")}, "empty DSN"},
		{"both", pg.DSN, []dbqueue.Option{dbqueue.WithListenDSN(pg.DSN), dbqueue.WithoutListen()}, "choose one"},
		{"sqlite", lite.DSN, []dbqueue.Option{dbqueue.WithListenDSN(pg.DSN)}, "only PostgreSQL"},
		{"bad", pg.DSN, []dbqueue.Option{dbqueue.WithListenDSN("postgres://u:s3cret@127.0.0.1:notaport/db")}, "WithListenDSN"},
	} {
		t.Run(c.name, func(t *testing.T) {
			q, err := dbqueue.Open(ctx, c.dsn, c.opts...)
			if err == nil {
				q.Close()
				t.Fatal("opened")
			}
			t.Log(err)
			if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error %q: want it to say %q, and no password", err, c.want)
			}
		})
	}
}

// A queue on a database/sql pool, which cannot LISTEN itself, gets
// wake-ups from pushes of other queues through WithListenDSN.
func TestListenDSNWakesSQLQueue(t *testing.T) {
	db := dbtest.New(t, dbqueue.Postgres)
	parsed, err := dbqueue.ParseDSN(db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	sqlDB, err := sql.Open(parsed.Driver, parsed.Conn)
	if err != nil {
		t.Fatal(err)
	}
	defer sqlDB.Close()
	q, err := dbqueue.New(ctx, dbqpgx.NewSQL(sqlDB), dbqueue.WithListenDSN(db.DSN))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	other := db.Queue(t)
	queue := fmt.Sprintf("listen-dsn-%d", time.Now().UnixNano())
	wake, stop := dbqueue.Wakeups(q, queue)
	defer stop()
	expectWake(t, wake, true, "starting to listen")
	if _, err := other.Push(ctx, dbqueue.NewJob{Name: "now", Queue: queue}); err != nil {
		t.Fatal(err)
	}
	expectWake(t, wake, true, "another queue's push")
}

// With WithoutListen a queue's own pushes, and those of the process's other
// Queues on the same DSN, still wake its subscribers; pushes from elsewhere
// (here a Queue on a pool of its own, as another process would have) do
// not, as nothing listens.
func TestWithoutListenWakesOnOwnPushes(t *testing.T) {
	db := dbtest.New(t, dbqueue.Postgres)
	q := db.Queue(t, dbqueue.WithoutListen())
	sameDSN := db.Queue(t)
	pool, err := pgxpool.New(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	elsewhere, err := dbqueue.New(ctx, dbqpgx.New(pool))
	if err != nil {
		t.Fatal(err)
	}
	defer elsewhere.Close()
	queue := fmt.Sprintf("no-listen-%d", time.Now().UnixNano())
	wake, stop := dbqueue.Wakeups(q, queue)
	defer stop()
	if _, err := elsewhere.Push(ctx, dbqueue.NewJob{Name: "now", Queue: queue}); err != nil {
		t.Fatal(err)
	}
	expectWake(t, wake, false, "a push from elsewhere")
	if _, err := q.Push(ctx, dbqueue.NewJob{Name: "now", Queue: queue}); err != nil {
		t.Fatal(err)
	}
	expectWake(t, wake, true, "the queue's own push")
	if _, err := sameDSN.Push(ctx, dbqueue.NewJob{Name: "now", Queue: queue}); err != nil {
		t.Fatal(err)
	}
	expectWake(t, wake, true, "a push through another Queue of the process on the same DSN")
}

func expectWake(t *testing.T, wake <-chan struct{}, want bool, what string) {
	t.Helper()
	wait := 300 * time.Millisecond
	if want {
		wait = 10 * time.Second
	}
	select {
	case <-wake:
		if !want {
			t.Fatalf("%s woke the subscriber", what)
		}
	case <-time.After(wait):
		if want {
			t.Fatalf("%s did not wake the subscriber within %v", what, wait)
		}
	}
}
