package dbqueue_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/driver/dbqmysql"
	"github.com/dbqueue/dbqueue/driver/dbqpgx"
	"github.com/dbqueue/dbqueue/driver/dbqsqlite"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// On PostgreSQL a push of a job that is due now wakes the listeners of its
// queue through NOTIFY, sent inside the push's own transaction: a rolled-back
// push, a delayed job, or a job on another queue wakes nobody.
func TestPushWakesListeners(t *testing.T) {
	pool, q := pgxQueue(t)
	// Other tests share the database and the channel: a queue of our own.
	queue := fmt.Sprintf("wake-%d", time.Now().UnixNano())
	wake, stop := dbqueue.Wakeups(q, queue)
	defer stop()
	expect := func(want bool, what string) {
		t.Helper()
		// The code under test lets one notification per queue through
		// every 2 ms: this lets that window pass, so the push below is not
		// merged into the last one. No other goroutine is waited for.
		time.Sleep(5 * time.Millisecond)
		expectWake(t, wake, want, what)
	}
	expect(true, "starting to listen") // one wake-up for what came before

	if _, err := q.Push(ctx, dbqueue.NewJob{Name: "later", Queue: queue, Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	expect(false, "a job delayed by an hour")
	if _, err := q.Push(ctx, dbqueue.NewJob{Name: "elsewhere", Queue: queue + "-other"}); err != nil {
		t.Fatal(err)
	}
	expect(false, "a job on another queue")
	if _, err := q.Push(ctx, dbqueue.NewJob{Name: "now", Queue: queue}); err != nil {
		t.Fatal(err)
	}
	expect(true, "a job due now")

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dbqpgx.PushTx(ctx, q, tx, dbqueue.NewJob{Name: "rolled-back", Queue: queue}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	expect(false, "a rolled-back push")
	tx, err = pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dbqpgx.PushTx(ctx, q, tx, dbqueue.NewJob{Name: "committed", Queue: queue}); err != nil {
		t.Fatal(err)
	}
	expect(false, "a push whose transaction is still open")
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	expect(true, "the commit of a push")

	// A push of many INSERTs in one transaction notifies the same way.
	big := make([]dbqueue.NewJob, 10_000)
	for i := range big {
		big[i] = dbqueue.NewJob{Name: "bulk", Queue: queue}
	}
	if _, err := q.PushMany(ctx, big); err != nil {
		t.Fatal(err)
	}
	expect(true, "a bulk push of ten INSERTs")
}

// Without LISTEN (MySQL, SQLite), a push made by this process still wakes
// this process's workers of that queue at once; a delayed push does not.
func TestPushWakesLocalWorkersWithoutListen(t *testing.T) {
	for _, d := range []dbqueue.Dialect{dbqueue.MySQL, dbqueue.SQLite} {
		t.Run(string(d), func(t *testing.T) {
			q := dbtest.New(t, d).Queue(t)
			wake, stop := dbqueue.Wakeups(q, "local")
			defer stop()
			other, stopOther := dbqueue.Wakeups(q, "elsewhere")
			defer stopOther()
			if _, err := q.Push(ctx, dbqueue.NewJob{Name: "later", Queue: "local", Delay: time.Hour}); err != nil {
				t.Fatal(err)
			}
			select {
			case <-wake:
				t.Fatal("a delayed push woke the worker")
			default:
			}
			if _, err := q.Push(ctx, dbqueue.NewJob{Name: "now", Queue: "local"}); err != nil {
				t.Fatal(err)
			}
			select {
			case <-wake:
			default:
				t.Fatal("a due push did not wake this process's worker of its queue")
			}
			select {
			case <-other:
				t.Fatal("a push woke a worker of another queue")
			default:
			}
		})
	}
}

// A push wakes this process's workers that hold another Queue on the same
// database — a second Open of the DSN, or a second New on the same pool —
// and not those of a Queue on another database.
func TestPushWakesOtherQueuesOfTheProcessOnTheSameDatabase(t *testing.T) {
	for _, d := range []dbqueue.Dialect{dbqueue.MySQL, dbqueue.SQLite} {
		t.Run(string(d), func(t *testing.T) {
			db := dbtest.New(t, d)
			pusher := db.Queue(t)
			sameDSN := db.Queue(t)
			elsewhere := dbtest.New(t, d).Queue(t)

			var onPool [2]*dbqueue.Queue
			for i := range onPool {
				var drv dbqueue.Driver = dbqsqlite.New(db.SQL)
				if d == dbqueue.MySQL {
					drv = dbqmysql.New(db.SQL)
				}
				q, err := dbqueue.New(ctx, drv)
				if err != nil {
					t.Fatal(err)
				}
				defer q.Close()
				onPool[i] = q
			}

			wakeDSN, stop1 := dbqueue.Wakeups(sameDSN, "shared")
			defer stop1()
			wakePool, stop2 := dbqueue.Wakeups(onPool[1], "shared")
			defer stop2()
			wakeElsewhere, stop3 := dbqueue.Wakeups(elsewhere, "shared")
			defer stop3()

			if _, err := pusher.Push(ctx, dbqueue.NewJob{Name: "now", Queue: "shared"}); err != nil {
				t.Fatal(err)
			}
			select {
			case <-wakeDSN:
			default:
				t.Fatal("a push through one Open of the DSN did not wake a worker on another Open of it")
			}
			if _, err := onPool[0].Push(ctx, dbqueue.NewJob{Name: "now", Queue: "shared"}); err != nil {
				t.Fatal(err)
			}
			select {
			case <-wakePool:
			default:
				t.Fatal("a push through one New on a pool did not wake a worker on another New of the same pool")
			}
			select {
			case <-wakeElsewhere:
				t.Fatal("a push woke a worker of a queue on another database")
			default:
			}
		})
	}
}
