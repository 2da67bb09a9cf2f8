package dbqueue_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

type report struct {
	Account int `json:"account"`
}

func pushUnique(t *testing.T, q *dbqueue.Queue, job dbqueue.NewJob, u dbqueue.Unique) (int64, bool) {
	t.Helper()
	id, dup, err := q.PushUnique(ctx, job, u)
	if err != nil {
		t.Fatalf("PushUnique %s: %v", job.Name, err)
	}
	return id, dup
}

// raceUnique pushes job from pushers goroutines on each queue at once and
// returns the ids they got and how many were told they pushed it.
func raceUnique(t *testing.T, qs []*dbqueue.Queue, pushers int, job dbqueue.NewJob, u dbqueue.Unique) (map[int64]int, int) {
	t.Helper()
	var (
		mu     sync.Mutex
		ids    = map[int64]int{}
		pushed int
		start  = make(chan struct{})
		wg     sync.WaitGroup
	)
	for _, q := range qs {
		for range pushers {
			wg.Go(func() {
				<-start
				id, dup, err := q.PushUnique(ctx, job, u)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					t.Errorf("PushUnique: %v", err)
					return
				}
				ids[id]++
				if !dup {
					pushed++
				}
			})
		}
	}
	close(start)
	wg.Wait()
	return ids, pushed
}

// 4 queues (each its own pool, as 4 processes would have) × 16 goroutines
// push one unique job at once: exactly one row, and all 64 pushers get its
// id. When it finishes, the same 64 race again over the ended lock: again
// exactly one new job.
func TestPushUniqueConcurrent(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		qs := make([]*dbqueue.Queue, 4)
		for i := range qs {
			qs[i] = db.Queue(t)
		}
		job := dbqueue.NewJob{Name: "report", Data: report{Account: 7}}
		var first int64
		for round := range 2 {
			ids, pushed := raceUnique(t, qs, 16, job, dbqueue.Unique{})
			if pushed != 1 || len(ids) != 1 {
				t.Fatalf("round %d: %d pushers pushed, ids %v; want exactly one job and one id", round, pushed, ids)
			}
			var id int64
			for id = range ids {
			}
			if n := ids[id]; n != 64 {
				t.Fatalf("round %d: %d of 64 pushers got id %d", round, n, id)
			}
			if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 1 {
				t.Fatalf("round %d: %d rows in jobs, want 1", round, n)
			}
			if round == 1 && id == first {
				t.Fatalf("round 1 got the finished job's id %d again", id)
			}
			first = id
			jobs := reserve(t, qs[0], 10)
			if len(jobs) != 1 || jobs[0].ID != id {
				t.Fatalf("reserved %d jobs, want job %d", len(jobs), id)
			}
			if err := qs[0].Delete(ctx, jobs[0]); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestPushUniqueUntil(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		job := func(account int) dbqueue.NewJob {
			return dbqueue.NewJob{Name: "report", Data: report{Account: account}}
		}
		mustDup := func(t *testing.T, j dbqueue.NewJob, u dbqueue.Unique, holder int64, when string) {
			t.Helper()
			if id, dup := pushUnique(t, q, j, u); !dup || id != holder {
				t.Fatalf("%s: push gave id %d, duplicate %v; want duplicate of %d", when, id, dup, holder)
			}
		}
		mustPush := func(t *testing.T, j dbqueue.NewJob, u dbqueue.Unique, when string) int64 {
			t.Helper()
			id, dup := pushUnique(t, q, j, u)
			if dup || id == 0 {
				t.Fatalf("%s: push gave id %d, duplicate %v; want a new job", when, id, dup)
			}
			return id
		}

		t.Run("finished", func(t *testing.T) {
			u := dbqueue.Unique{} // UntilFinished, no time limit
			id := mustPush(t, job(1), u, "first")
			mustDup(t, job(1), u, id, "queued")
			mustPush(t, job(2), u, "other data") // unique by data
			j := reserve(t, q, 1)[0]
			mustDup(t, job(1), u, id, "running")
			if err := q.Release(ctx, j, 0); err != nil {
				t.Fatal(err)
			}
			mustDup(t, job(1), u, id, "released for a retry")
			// The released job(1) and job(2) are both ready, in either
			// order: its release made job(1) available when a second may
			// have passed since job(2)'s push. Job(1) succeeds, job(2)
			// goes back.
			deleted := false
			for _, j := range reserve(t, q, 2) {
				var err error
				if j.ID == id {
					err, deleted = q.Delete(ctx, j), true
				} else {
					err = q.Release(ctx, j, 0)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if !deleted {
				t.Fatalf("the released job %d was not reserved again", id)
			}
			id2 := mustPush(t, job(1), u, "after it succeeded")
			failed := false
			for _, j := range reserve(t, q, 2) { // job(2) and the new job(1)
				if j.ID == id2 {
					if err := q.Fail(ctx, j, errors.New("boom")); err != nil {
						t.Fatal(err)
					}
					failed = true
				}
			}
			if !failed {
				t.Fatalf("job %d was not reserved", id2)
			}
			mustPush(t, job(1), u, "after it failed")
			if _, err := q.Clear(ctx, "default"); err != nil {
				t.Fatal(err)
			}
			mustPush(t, job(1), u, "after Clear removed it")
		})

		t.Run("started", func(t *testing.T) {
			u := dbqueue.Unique{Until: dbqueue.UntilStarted}
			j := dbqueue.NewJob{Name: "sync", Queue: "started"}
			id := mustPush(t, j, u, "first")
			mustDup(t, j, u, id, "queued")
			got := reserve(t, q, 1, "started")
			if len(got) != 1 || got[0].ID != id {
				t.Fatalf("reserved %v, want job %d", got, id)
			}
			id2 := mustPush(t, j, u, "once started")
			mustDup(t, j, u, id2, "the second queued")
		})

		t.Run("expired", func(t *testing.T) {
			u := dbqueue.Unique{Key: "debounce:7", Until: dbqueue.UntilExpired, For: time.Hour}
			id := mustPush(t, dbqueue.NewJob{Name: "mail", Data: 1, Queue: "expired"}, u, "first")
			// An explicit key ignores the data.
			mustDup(t, dbqueue.NewJob{Name: "mail", Data: 2, Queue: "expired"}, u, id, "same key")
			j := reserve(t, q, 1, "expired")[0]
			if err := q.Delete(ctx, j); err != nil {
				t.Fatal(err)
			}
			mustDup(t, dbqueue.NewJob{Name: "mail", Queue: "expired"}, u, id, "finished, not expired")
			// An hour passes, by the database's clock.
			db.Exec(t, "UPDATE dbqueue_unique SET expires_at = "+db.Now()+" WHERE job_id = ?", id)
			mustPush(t, dbqueue.NewJob{Name: "mail", Queue: "expired"}, u, "expired")
		})

		t.Run("for", func(t *testing.T) {
			u := dbqueue.Unique{For: time.Minute, PerQueue: true}
			j := dbqueue.NewJob{Name: "stuck", Queue: "for-a"}
			id := mustPush(t, j, u, "first")
			mustPush(t, dbqueue.NewJob{Name: "stuck", Queue: "for-b"}, u, "other queue")
			if n := db.Count(t, "SELECT COUNT(*) FROM dbqueue_unique WHERE job_id = ? AND expires_at BETWEEN "+db.Now()+" + 59 AND "+db.Now()+" + 60", id); n != 1 {
				t.Fatalf("lock of job %d does not end a minute from now", id)
			}
			db.Exec(t, "UPDATE dbqueue_unique SET expires_at = "+db.Now()+" - 1 WHERE job_id = ?", id)
			mustPush(t, j, u, "a stuck job's lock expired")
		})

		t.Run("invalid", func(t *testing.T) {
			for _, u := range []dbqueue.Unique{{Until: dbqueue.UntilExpired}, {For: -time.Second}, {Until: 9}} {
				if _, _, err := q.PushUnique(ctx, dbqueue.NewJob{Name: "x"}, u); err == nil || !strings.Contains(err.Error(), "Unique.") {
					t.Errorf("%+v: err %v, want one naming the Unique field", u, err)
				}
			}
		})
	})
}

// Push and PushMany never touch the lock table: uniqueness costs nothing
// when unused.
func TestPushWithoutUniqueWritesNoLock(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		push(t, q, dbqueue.NewJob{Name: "plain"})
		if _, err := q.PushMany(ctx, []dbqueue.NewJob{{Name: "a"}, {Name: "a"}}); err != nil {
			t.Fatal(err)
		}
		// With no lock table, plain pushes still work.
		db.Exec(t, "DROP TABLE dbqueue_unique")
		push(t, q, dbqueue.NewJob{Name: "plain"})
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 4 {
			t.Fatalf("%d jobs, want 4", n)
		}
		_, _, err := q.PushUnique(ctx, dbqueue.NewJob{Name: "u"}, dbqueue.Unique{})
		if !errors.Is(err, sqldb.ErrNoTables) {
			t.Fatalf("PushUnique without the lock table: %v, want ErrNoTables (run migrate up)", err)
		}
	})
}

// In the caller's transaction: a rollback leaves no lock, a commit does.
func TestPushUniqueTx(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		j := dbqueue.NewJob{Name: "invoice", Data: report{Account: 1}}
		tx, err := db.SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, dup, err := q.PushUniqueTx(ctx, tx, j, dbqueue.Unique{}); err != nil || dup {
			t.Fatalf("PushUniqueTx: dup %v, %v", dup, err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		id, dup := pushUnique(t, q, j, dbqueue.Unique{})
		if dup {
			t.Fatal("a rolled-back push left its lock")
		}
		tx, err = db.SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, dup, err := q.PushUniqueTx(ctx, tx, j, dbqueue.Unique{})
		if err != nil || !dup || got != id {
			t.Fatalf("PushUniqueTx of a queued job: %d, dup %v, %v; want duplicate of %d", got, dup, err, id)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	})
}

// PruneUnique deletes the locks that ended and keeps the live ones.
func TestPruneUnique(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		live, _ := pushUnique(t, q, dbqueue.NewJob{Name: "live"}, dbqueue.Unique{})
		pushUnique(t, q, dbqueue.NewJob{Name: "live-expiring"}, dbqueue.Unique{For: time.Hour, Until: dbqueue.UntilExpired})
		done, _ := pushUnique(t, q, dbqueue.NewJob{Name: "done", Queue: "p"}, dbqueue.Unique{})
		pushUnique(t, q, dbqueue.NewJob{Name: "started", Queue: "p"}, dbqueue.Unique{Until: dbqueue.UntilStarted})
		expired, _ := pushUnique(t, q, dbqueue.NewJob{Name: "expired"}, dbqueue.Unique{For: time.Hour})
		db.Exec(t, "UPDATE dbqueue_unique SET expires_at = "+db.Now()+" - 1 WHERE job_id = ?", expired)
		for _, j := range reserve(t, q, 2, "p") {
			if j.ID == done {
				if err := q.Delete(ctx, j); err != nil {
					t.Fatal(err)
				}
			}
		}
		n, err := q.PruneUnique(ctx)
		if err != nil || n != 3 {
			t.Fatalf("PruneUnique: %d, %v; want 3 (finished, started, expired)", n, err)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM dbqueue_unique"); n != 2 {
			t.Fatalf("%d locks left, want the 2 live ones", n)
		}
		if _, dup := pushUnique(t, q, dbqueue.NewJob{Name: "live"}, dbqueue.Unique{}); !dup {
			t.Fatalf("job %d's lock was pruned while it was queued", live)
		}
	})
}
