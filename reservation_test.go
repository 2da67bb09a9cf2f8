package dbqueue_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// A give-back whose reply was lost is retried by its worker. Meanwhile the
// job was claimed again. The retried give-back must not take the new
// holder's run away, nor may two holders end up with the same reservation.
func TestRetriedGiveBackLeavesTheNextClaimAlone(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		push(t, q, dbqueue.NewJob{Name: "once"})
		a := reserve(t, q, 1)[0]
		stale := *a // what worker A holds while its give-back is in doubt
		if err := dbqueue.Unreserve(ctx, q, a); err != nil {
			t.Fatal(err) // committed; A never saw the reply
		}
		b := reserve(t, q, 1)
		if len(b) != 1 || b[0].ID != a.ID {
			t.Fatalf("worker B reserved %v, want job %d", b, a.ID)
		}
		// A retries its give-back, and later its delete, on what it holds.
		if err := dbqueue.Unreserve(ctx, q, &stale); !errors.Is(err, dbqueue.ErrNotHeld) {
			t.Fatalf("retried give-back of a reservation already given back: %v, want ErrNotHeld", err)
		}
		if err := q.Delete(ctx, &stale); !errors.Is(err, dbqueue.ErrNotHeld) {
			t.Fatalf("delete by a stale holder: %v, want ErrNotHeld", err)
		}
		if again := reserve(t, q, 1); len(again) != 0 {
			t.Fatalf("job %d was claimed a second time while B holds it", again[0].ID)
		}
		if err := q.Delete(ctx, b[0]); err != nil {
			t.Fatalf("B's delete of its own run: %v", err)
		}
	})
}

// A PHP worker's claim counts attempts but knows nothing of tokens: a Go
// give-back retried after such a claim must still see it is not the holder.
func TestRetriedGiveBackLeavesALaravelClaimAlone(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		id := push(t, q, dbqueue.NewJob{Name: "shared"})
		a := reserve(t, q, 1)[0]
		stale := *a
		if err := dbqueue.Unreserve(ctx, q, a); err != nil {
			t.Fatal(err)
		}
		// Laravel's DatabaseQueue::markJobAsReserved.
		db.Exec(t, "UPDATE jobs SET reserved_at = 1900000000, attempts = attempts + 1 WHERE id = ?", id)
		if err := dbqueue.Unreserve(ctx, q, &stale); !errors.Is(err, dbqueue.ErrNotHeld) {
			t.Fatalf("retried give-back over a Laravel claim: %v, want ErrNotHeld", err)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE id = ? AND reserved_at IS NOT NULL", id); n != 1 {
			t.Fatal("the Laravel worker's reservation was given back by a stale Go holder")
		}
	})
}

// The same for the batched paths: a stale holder's DeleteMany and
// ReleaseMany leave the new holder's run alone.
func TestStaleBatchesLeaveTheNextClaimAlone(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		push(t, q, dbqueue.NewJob{Name: "batched"})
		a := reserve(t, q, 1)[0]
		stale := *a
		if err := dbqueue.Unreserve(ctx, q, a); err != nil {
			t.Fatal(err)
		}
		b := reserve(t, q, 1)[0]
		if lost, err := dbqueue.ReleaseMany(ctx, q, []dbqueue.Releasing{{Job: &stale}}); err != nil || len(lost) != 1 {
			t.Fatalf("stale ReleaseMany: lost %d, %v; want the stale job reported lost", len(lost), err)
		}
		if lost, err := dbqueue.DeleteMany(ctx, q, []*dbqueue.Job{&stale}); err != nil || len(lost) != 1 {
			t.Fatalf("stale DeleteMany: lost %d, %v; want the stale job reported lost", len(lost), err)
		}
		// Beside jobs of its own, the stale one is still the only one lost,
		// and the others are deleted.
		push(t, q, dbqueue.NewJob{Name: "mine"})
		mine := reserve(t, q, 1)[0]
		if lost, err := dbqueue.DeleteMany(ctx, q, []*dbqueue.Job{mine, &stale}); err != nil || len(lost) != 1 || lost[0] != &stale {
			t.Fatalf("DeleteMany of a held and a stale job: lost %v, %v; want only the stale one", lost, err)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE id = ?", mine.ID); n != 0 {
			t.Fatal("the held job beside the stale one was not deleted")
		}
		if lost, err := dbqueue.DeleteMany(ctx, q, []*dbqueue.Job{b}); err != nil || len(lost) != 0 {
			t.Fatalf("B's DeleteMany of its own run: lost %d, %v", len(lost), err)
		}
	})
}

// A Fail whose reply was lost is retried: it finds its own work done and
// reports success, so the worker's failure hooks still run.
func TestRetriedFailAfterLostReplySucceeds(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		push(t, q, dbqueue.NewJob{Name: "doomed"})
		j := reserve(t, q, 1)[0]
		retry := *j
		cause := errors.New("boom")
		if err := q.Fail(ctx, j, cause); err != nil {
			t.Fatal(err)
		}
		if err := q.Fail(ctx, &retry, cause); err != nil {
			t.Fatalf("retried Fail of a job it already failed: %v, want nil", err)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM failed_jobs WHERE uuid = ?", j.Payload.UUID); n != 1 {
			t.Fatalf("failed_jobs holds %d rows for the job, want 1", n)
		}
		// Another failure text is not this Fail's work: still not held.
		if err := q.Fail(ctx, &retry, errors.New("other")); !errors.Is(err, dbqueue.ErrNotHeld) {
			t.Fatalf("Fail with another cause on a gone job: %v, want ErrNotHeld", err)
		}
	})
}

// A job reserved as often as attempts can count is failed with a clear
// cause instead of overflowing the column (which stops the whole queue on
// MySQL in strict mode, or sticks the count so no finish ever matches).
func TestAttemptsNeverOverflow(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		worn := push(t, q, dbqueue.NewJob{Name: "worn"})
		fresh := push(t, q, dbqueue.NewJob{Name: "fresh"})
		db.Exec(t, "UPDATE jobs SET attempts = ? WHERE id = ?", math.MaxInt32-1, worn)
		jobs, err := q.Reserve(ctx, 2)
		if err != nil {
			t.Fatalf("reserve: %v", err)
		}
		if len(jobs) != 1 || jobs[0].ID != fresh {
			t.Fatalf("reserved %d jobs, want only job %d (the worn one failed)", len(jobs), fresh)
		}
		var exception string
		if err := db.SQL.QueryRow("SELECT exception FROM failed_jobs").Scan(&exception); err != nil {
			t.Fatalf("the worn job is not in failed_jobs: %v", err)
		}
		if !strings.Contains(exception, "attempts column") {
			t.Errorf("failed_jobs.exception = %q, want it to say the attempts column is full", exception)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE id = ?", worn); n != 0 {
			t.Error("the worn job is still in jobs")
		}
	})
}

// When other claimers hold every job the MySQL claim's first candidates
// name, the claim looks further instead of reporting an empty queue.
func TestClaimLooksPastLockedJobs(t *testing.T) {
	for _, d := range []dbqueue.Dialect{dbqueue.Postgres, dbqueue.MySQL} {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			db := dbtest.New(t, d)
			q := db.Queue(t)
			const n = 5
			jobs := make([]dbqueue.NewJob, 4*n)
			for i := range jobs {
				jobs[i] = dbqueue.NewJob{Name: "locked"}
			}
			ids, err := q.PushMany(ctx, jobs)
			if err != nil {
				t.Fatal(err)
			}
			holdJobs(t, db, ids[3*n-1]) // another claimer holds the first 3n
			got := reserve(t, q, n)
			if len(got) != n {
				t.Fatalf("reserved %d jobs while %d unlocked ones are ready, want %d", len(got), n, n)
			}
			for _, j := range got {
				if j.ID <= ids[3*n-1] {
					t.Errorf("reserved job %d, which another transaction holds", j.ID)
				}
			}
		})
	}
}

// Pushes that run at once each get their rows' own ids back. MariaDB
// counts a statement's ids from the first where innodb_autoinc_lock_mode
// promises them consecutive, rather than reading them back: a count that
// interleaved with another push's rows would hand out another job's id.
func TestPushManyIdsUnderConcurrentPushes(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		const pushers, pushes, perPush = 6, 8, 50
		names := make(map[int64]string, pushers*pushes*perPush)
		var (
			mu   sync.Mutex
			wg   sync.WaitGroup
			errs = make(chan error, pushers)
		)
		for p := range pushers {
			wg.Go(func() {
				for n := range pushes {
					jobs := make([]dbqueue.NewJob, perPush)
					for i := range jobs {
						jobs[i] = dbqueue.NewJob{Name: fmt.Sprintf("p%d-%d-%d", p, n, i)}
					}
					ids, err := q.PushMany(ctx, jobs)
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					for i, id := range ids {
						if prev, dup := names[id]; dup {
							errs <- fmt.Errorf("id %d returned for %s and for %s", id, prev, jobs[i].Name)
						}
						names[id] = jobs[i].Name
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		seen := 0
		for {
			got := reserve(t, q, 1000)
			if len(got) == 0 {
				break
			}
			for _, j := range got {
				seen++
				if want := names[j.ID]; j.Name() != want {
					t.Fatalf("job %d holds %q, but PushMany returned its id for %q", j.ID, j.Name(), want)
				}
			}
		}
		if seen != pushers*pushes*perPush {
			t.Fatalf("reserved %d jobs, pushed %d", seen, pushers*pushes*perPush)
		}
	})
}

// Durations too large for Laravel's seconds arithmetic saturate or are
// refused; they never wrap into the past.
func TestHugeDurationsNeverWrap(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		if _, err := dbqueue.Open(context.Background(), db.DSN, dbqueue.WithRetryAfter(math.MaxInt64)); err == nil ||
			!strings.Contains(err.Error(), "at most") {
			t.Errorf("WithRetryAfter(MaxInt64): %v, want a refusal saying the limit", err)
		}
		q := db.Queue(t)
		push(t, q, dbqueue.NewJob{Name: "far", Delay: math.MaxInt64})
		if got := reserve(t, q, 1); len(got) != 0 {
			t.Fatalf("a job delayed by %v ran now: its delay wrapped", time.Duration(math.MaxInt64))
		}
		push(t, q, dbqueue.NewJob{Name: "near"})
		j := reserve(t, q, 1)[0]
		if err := q.Release(ctx, j, math.MaxInt64); err != nil {
			t.Fatal(err)
		}
		if got := reserve(t, q, 1); len(got) != 0 {
			t.Fatalf("a job released for %v ran now: its delay wrapped", time.Duration(math.MaxInt64))
		}
	})
}

// When a MySQL claim's first candidates are all it finds and other
// claimers hold some of them, the rows it did lock must still be marked
// reserved before they are handed out: a claim that returned them
// unmarked let another worker take the same jobs, and each ran twice.
func TestClaimMarksWhatItLockedWhenCandidatesRunOut(t *testing.T) {
	db := dbtest.New(t, dbqueue.MySQL)
	q := db.Queue(t)
	const n = 5
	jobs := make([]dbqueue.NewJob, 2*n) // exactly one full set of candidates
	for i := range jobs {
		jobs[i] = dbqueue.NewJob{Name: "contended"}
	}
	ids, err := q.PushMany(ctx, jobs)
	if err != nil {
		t.Fatal(err)
	}
	// Another claimer holds n+1 of them, so the first round locks n-1 and
	// a second round finds no other candidate.
	holdJobs(t, db, ids[n])
	got := reserve(t, q, n)
	if len(got) != n-1 {
		t.Fatalf("reserved %d jobs, want the %d nobody else holds", len(got), n-1)
	}
	for _, j := range got {
		if c := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE id = ? AND reserved_at IS NOT NULL", j.ID); c != 1 {
			t.Fatalf("job %d was handed out but is not reserved in the table: another worker can take it too", j.ID)
		}
		if err := q.Delete(ctx, j); err != nil {
			t.Fatalf("delete job %d after running it: %v", j.ID, err)
		}
	}
}

// holdJobs locks the jobs with ids up to upTo in a transaction of another
// claimer's, open until the test ends: READ COMMITTED, as claims run, so
// InnoDB locks no row past them.
func holdJobs(t *testing.T, db *dbtest.DB, upTo int64) {
	t.Helper()
	tx, err := db.SQL.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	rows, err := tx.Query(db.Dialect.Rebind("SELECT id FROM jobs WHERE id <= ? FOR UPDATE"), upTo)
	if err != nil {
		t.Fatal(err)
	}
	rows.Close()
}

// MySQL's claim reads candidates from a cursor that moves past what it
// read. Rows it skipped because another transaction held them must still
// be claimed once that transaction lets them go, from the cursor moved
// back or by a look from the start; an empty claim must mean an empty
// queue; and no claim hands a row out twice.
func TestCursorClaimComesBackForSkippedRows(t *testing.T) {
	db := dbtest.New(t, dbqueue.MySQL)
	q := db.Queue(t)
	jobs := make([]dbqueue.NewJob, 10)
	for i := range jobs {
		jobs[i] = dbqueue.NewJob{Name: "skipped"}
	}
	ids, err := q.PushMany(ctx, jobs)
	if err != nil {
		t.Fatal(err)
	}
	// Another transaction holds the first three, as a claim of another
	// process or a delete reading past them would.
	tx, err := db.SQL.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query("SELECT id FROM jobs WHERE id <= ? FOR UPDATE", ids[2])
	if err != nil {
		t.Fatal(err)
	}
	rows.Close()
	seen := map[int64]bool{}
	take := func(want int) {
		t.Helper()
		got := reserve(t, q, 10)
		for _, j := range got {
			if seen[j.ID] {
				t.Fatalf("job %d handed out twice", j.ID)
			}
			seen[j.ID] = true
		}
		if len(got) != want {
			t.Fatalf("reserved %d jobs, want %d", len(got), want)
		}
	}
	// No looks on short claims: the cursor alone must come back.
	defer dbqueue.SetLookBurst(0)()
	take(7)
	take(0) // held: not this claim's to take
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	push(t, q, dbqueue.NewJob{Name: "after"})
	push(t, q, dbqueue.NewJob{Name: "after"})
	take(5) // the three let go, behind the new ones: the cursor went back for them
	take(0)
	// An empty claim always looks from the start: rows behind the cursor
	// are found, and StopWhenEmpty stops only on an empty queue. Here
	// they are the jobs of a transaction that committed after later jobs
	// were claimed.
	late, err := db.SQL.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.PushTx(ctx, late, jobs[:3]...); err != nil {
		t.Fatal(err)
	}
	push(t, q, dbqueue.NewJob{Name: "early"})
	take(1)
	if err := late.Commit(); err != nil {
		t.Fatal(err)
	}
	take(3)
	// Many claims at once over many rows: each row goes to one of them.
	more := make([]dbqueue.NewJob, 3000)
	for i := range more {
		more[i] = dbqueue.NewJob{Name: "skipped"}
	}
	if _, err := q.PushMany(ctx, more); err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		total int
		wg    sync.WaitGroup
	)
	// Meanwhile another transaction keeps taking brief locks on rows
	// ahead of the claims, so they skip some and move their cursor back.
	stop := make(chan struct{})
	held := make(chan struct{})
	go func() {
		defer close(held)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			tx, err := db.SQL.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
			if err != nil {
				t.Error(err)
				return
			}
			rows, err := tx.Query("SELECT id FROM jobs WHERE reserved_at IS NULL ORDER BY id LIMIT 20 FOR UPDATE SKIP LOCKED")
			if err == nil {
				rows.Close()
			}
			_ = tx.Rollback()
		}
	}()
	// Until every job is taken: an empty claim may only mean the holder
	// has the rest for the moment.
	claimCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for range 6 {
		wg.Go(func() {
			for claimCtx.Err() == nil {
				got, err := q.Reserve(claimCtx, 100)
				if err != nil {
					if claimCtx.Err() == nil {
						t.Error(err)
					}
					return
				}
				mu.Lock()
				for _, j := range got {
					if seen[j.ID] {
						t.Errorf("job %d handed out twice", j.ID)
					}
					seen[j.ID] = true
				}
				total += len(got)
				done := total >= len(more)
				mu.Unlock()
				if done {
					cancel()
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	<-held
	if total != len(more) {
		t.Fatalf("concurrent claims took %d of %d jobs", total, len(more))
	}
}
