package dbqueue_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/driver/dbqpgx"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

func TestJobReadsStateByID(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		pending := push(t, q, dbqueue.NewJob{Name: "now", Data: map[string]int{"n": 1}})
		delayed := push(t, q, dbqueue.NewJob{Name: "later", Delay: time.Hour})
		held := push(t, q, dbqueue.NewJob{Name: "held", Queue: "other"})
		jobs := reserve(t, q, 1, "other")
		if len(jobs) != 1 || jobs[0].ID != held {
			t.Fatalf("reserved %v, want job %d", jobs, held)
		}
		for id, want := range map[int64]dbqueue.JobState{pending: dbqueue.JobPending, delayed: dbqueue.JobDelayed, held: dbqueue.JobReserved} {
			info, err := q.Job(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if info.ID != id || info.State != want {
				t.Errorf("job %d: state %q, want %q", id, info.State, want)
			}
			if (want == dbqueue.JobReserved) != !info.ReservedAt.IsZero() {
				t.Errorf("job %d (%s): reserved_at %v", id, want, info.ReservedAt)
			}
		}
		info, _ := q.Job(ctx, pending)
		if info.Name() != "now" || string(info.Payload.Data) != `{"n":1}` || info.Queue != "default" || info.PayloadErr != nil {
			t.Errorf("job %d read as %+v", pending, info)
		}
		if info, _ := q.Job(ctx, delayed); info.AvailableAt.Sub(info.CreatedAt) != time.Hour {
			t.Errorf("delayed job available %v after creation, want 1h", info.AvailableAt.Sub(info.CreatedAt))
		}
		if info, _ := q.Job(ctx, held); info.Attempts != 1 {
			t.Errorf("reserved job has %d attempts, want 1", info.Attempts)
		}
		if err := q.Delete(ctx, jobs[0]); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Job(ctx, held); !errors.Is(err, dbqueue.ErrJobNotFound) {
			t.Fatalf("finished job: %v, want ErrJobNotFound", err)
		}
	})
}

func TestJobsPagesByKeyset(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		var all, mail, delayed []int64
		for i := range 25 {
			j := dbqueue.NewJob{Name: "page", Data: i}
			if i%3 == 0 {
				j.Queue = "mail"
			}
			if i%4 == 0 {
				j.Delay = time.Hour
			}
			id := push(t, q, j)
			all = append(all, id)
			if j.Queue == "mail" {
				mail = append(mail, id)
			}
			if j.Delay > 0 {
				delayed = append(delayed, id)
			}
		}
		pages := func(f dbqueue.JobFilter) (ids []int64, sizes []int) {
			t.Helper()
			for {
				page, err := q.Jobs(ctx, f)
				if err != nil {
					t.Fatal(err)
				}
				if len(page) == 0 {
					return ids, sizes
				}
				sizes = append(sizes, len(page))
				for _, j := range page {
					if f.State != "" && j.State != f.State || f.Queue != "" && j.Queue != f.Queue {
						t.Fatalf("filter %+v listed job %d in %s, %s", f, j.ID, j.Queue, j.State)
					}
					ids = append(ids, j.ID)
				}
				f.AfterID = page[len(page)-1].ID
			}
		}
		ids, sizes := pages(dbqueue.JobFilter{Limit: 10})
		if fmt.Sprint(ids) != fmt.Sprint(all) || fmt.Sprint(sizes) != "[10 10 5]" {
			t.Fatalf("pages of 10 listed %v in pages %v, want %v", ids, sizes, all)
		}
		if ids, _ := pages(dbqueue.JobFilter{Queue: "mail", Limit: 2}); fmt.Sprint(ids) != fmt.Sprint(mail) {
			t.Fatalf("mail listed %v, want %v", ids, mail)
		}
		if ids, _ := pages(dbqueue.JobFilter{State: dbqueue.JobDelayed, Limit: 3}); fmt.Sprint(ids) != fmt.Sprint(delayed) {
			t.Fatalf("delayed listed %v, want %v", ids, delayed)
		}
		// A job claimed between two pages moves to reserved; paging on
		// from the last id neither skips nor repeats another.
		first, _ := q.Jobs(ctx, dbqueue.JobFilter{State: dbqueue.JobPending, Limit: 5})
		got := reserve(t, q, 1)
		rest, _ := pages(dbqueue.JobFilter{State: dbqueue.JobPending, AfterID: first[len(first)-1].ID})
		if len(first)+len(rest) != len(all)-len(delayed)-1+boolInt(got[0].ID <= first[len(first)-1].ID) {
			t.Fatalf("pending pages across a claim: %d + %d", len(first), len(rest))
		}
		reserved, _ := pages(dbqueue.JobFilter{State: dbqueue.JobReserved})
		if fmt.Sprint(reserved) != fmt.Sprint([]int64{got[0].ID}) {
			t.Fatalf("reserved listed %v, want [%d]", reserved, got[0].ID)
		}

		for _, f := range []dbqueue.JobFilter{{State: "running"}, {Limit: -1}, {Limit: 1001}} {
			if _, err := q.Jobs(ctx, f); err == nil {
				t.Errorf("Jobs(%+v) accepted", f)
			}
		}
		if page, _ := q.Jobs(ctx, dbqueue.JobFilter{}); len(page) != 25 {
			t.Errorf("default page: %d jobs, want all 25", len(page))
		}
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestCancelOnlyWaitingJobs(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		pending := push(t, q, dbqueue.NewJob{Name: "pending"})
		delayed := push(t, q, dbqueue.NewJob{Name: "delayed", Delay: time.Hour})
		held := push(t, q, dbqueue.NewJob{Name: "held", Queue: "busy"})
		jobs := reserve(t, q, 1, "busy")

		if err := q.Cancel(ctx, pending); err != nil {
			t.Fatal(err)
		}
		if err := q.Cancel(ctx, delayed); err != nil {
			t.Fatal(err)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE id IN (?, ?)", pending, delayed); n != 0 {
			t.Fatalf("%d cancelled rows left", n)
		}
		if err := q.Cancel(ctx, pending); !errors.Is(err, dbqueue.ErrJobNotFound) {
			t.Fatalf("second cancel: %v, want ErrJobNotFound", err)
		}
		err := q.Cancel(ctx, held)
		if !errors.Is(err, dbqueue.ErrJobReserved) {
			t.Fatalf("cancel of a held job: %v, want ErrJobReserved", err)
		}
		// The holder still owns its job and finishes it as usual.
		if err := q.Delete(ctx, jobs[0]); err != nil {
			t.Fatalf("the holder's delete after a refused cancel: %v", err)
		}
		if err := q.Cancel(ctx, 1<<40); !errors.Is(err, dbqueue.ErrJobNotFound) {
			t.Fatalf("cancel of an unknown id: %v", err)
		}
	})
}

func TestRunNowMakesDelayedJobsDue(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		later := push(t, q, dbqueue.NewJob{Name: "later", Delay: time.Hour})
		at := push(t, q, dbqueue.NewJob{Name: "at", RunAt: time.Now().Add(24 * time.Hour)})
		if got := reserve(t, q, 10); len(got) != 0 {
			t.Fatalf("delayed jobs reserved early: %d", len(got))
		}
		if err := q.RunNow(ctx, later); err != nil {
			t.Fatal(err)
		}
		got := reserve(t, q, 10)
		if len(got) != 1 || got[0].ID != later {
			t.Fatalf("after RunNow reserved %v, want job %d alone", got, later)
		}
		if err := q.RunNow(ctx, later); !errors.Is(err, dbqueue.ErrJobReserved) {
			t.Fatalf("RunNow of a held job: %v, want ErrJobReserved", err)
		}
		if err := q.RunNow(ctx, at); err != nil {
			t.Fatal(err)
		}
		if err := q.RunNow(ctx, at); err != nil {
			t.Fatalf("RunNow of a job already due: %v, want nil", err)
		}
		if info, _ := q.Job(ctx, at); info.State != dbqueue.JobPending {
			t.Fatalf("job %d is %s after RunNow", at, info.State)
		}
		if err := q.RunNow(ctx, 1<<40); !errors.Is(err, dbqueue.ErrJobNotFound) {
			t.Fatalf("RunNow of an unknown id: %v", err)
		}
	})
}

// On PostgreSQL, RunNow wakes the queue's listeners in other processes
// (another Queue on its own pool stands for one), as a push does.
func TestRunNowWakesOtherProcesses(t *testing.T) {
	pool, q := pgxQueue(t)
	other, err := dbqueue.New(ctx, dbqpgx.New(pool))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	queue := fmt.Sprintf("runnow-%d", time.Now().UnixNano())
	id := push(t, q, dbqueue.NewJob{Name: "later", Queue: queue, Delay: time.Hour})
	wake, stop := dbqueue.Wakeups(other, queue)
	defer stop()
	select { // the wake-up that says the listener is up
	case <-wake:
	case <-time.After(10 * time.Second):
		t.Fatal("the listener did not start")
	}
	if err := q.RunNow(ctx, id); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
	case <-time.After(10 * time.Second):
		t.Fatal("RunNow did not wake a listener of another Queue")
	}
}
