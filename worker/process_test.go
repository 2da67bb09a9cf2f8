package worker_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/worker"
)

// The test binary doubles as a worker process: with DBQUEUE_CHILD set it
// runs childMain instead of the tests, so tests can start real worker
// processes and kill them.
func TestMain(m *testing.M) {
	// The MySQL driver logs every connection the reconnect test cuts.
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
	if mode := os.Getenv("DBQUEUE_CHILD"); mode != "" {
		os.Exit(childMain(mode))
	}
	dbtest.SetParallel()
	os.Exit(m.Run())
}

func childMain(mode string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	dsn := os.Getenv("DBQUEUE_CHILD_DSN")
	retryAfter, _ := strconv.Atoi(os.Getenv("DBQUEUE_CHILD_RETRY_AFTER"))
	q, err := dbqueue.Open(ctx, dsn, dbqueue.WithRetryAfter(time.Duration(retryAfter)*time.Second))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer q.Close()
	parsed, _ := dbqueue.ParseDSN(dsn)
	ledger, err := sql.Open(parsed.Driver, parsed.Conn)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer ledger.Close()
	// 8 processes, each with this, the queue's pool (4, all in use with two
	// claims in flight, deletes and releases) and its LISTEN connection,
	// must leave room under PostgreSQL's default 100 for the tests running
	// beside them: 8 × (4+4+1) = 72.
	ledger.SetMaxOpenConns(4)
	record := func(ctx context.Context, job *dbqueue.Job) error {
		_, err := ledger.ExecContext(ctx, parsed.Dialect.Rebind("INSERT INTO ledger (job_id, attempt, pid) VALUES (?, ?, ?)"), job.ID, job.Attempts, os.Getpid())
		return err
	}
	concurrency, _ := strconv.Atoi(os.Getenv("DBQUEUE_CHILD_CONCURRENCY"))
	timeout := 30 * time.Second // a loaded 2-core machine must not time jobs out
	if mode == "hang" {
		timeout = time.Second
	}
	o := worker.Options{
		Concurrency: concurrency, StopWhenEmpty: mode == "ledger", Timeout: timeout,
		Tries: 3, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if mode == "defaults" {
		// The library's defaults, as a user who sets nothing runs them.
		o = worker.Options{Concurrency: concurrency, Logger: o.Logger}
	}
	w, err := worker.New(q, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	w.Handle("ledger", record)
	w.Handle("hang", func(ctx context.Context, job *dbqueue.Job) error {
		if err := record(ctx, job); err != nil {
			return err
		}
		select {} // killed mid-job
	})
	if err := w.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func startChild(t *testing.T, db *dbtest.DB, mode string, retryAfter, concurrency int) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		"DBQUEUE_CHILD="+mode, "DBQUEUE_CHILD_DSN="+db.DSN,
		"DBQUEUE_CHILD_RETRY_AFTER="+strconv.Itoa(retryAfter),
		"DBQUEUE_CHILD_CONCURRENCY="+strconv.Itoa(concurrency))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

func createLedger(t *testing.T, db *dbtest.DB) {
	db.Exec(t, "CREATE TABLE ledger (job_id BIGINT NOT NULL, attempt INTEGER NOT NULL, pid INTEGER NOT NULL)")
}

// TestKilledWorkerLosesNothing kills a worker process with SIGKILL in the
// middle of a job: the job comes back after retry_after, attempts counted.
func TestKilledWorkerLosesNothing(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		createLedger(t, db)
		const retryAfter = 7
		q := db.Queue(t, dbqueue.WithRetryAfter(retryAfter*time.Second))
		id := pushN(t, q, 1, dbqueue.NewJob{Name: "hang"})[0]
		child := startChild(t, db, "hang", retryAfter, 2)
		dbtest.WaitFor(t, 30*time.Second, "the child starts the job", func() bool { return db.Count(t, "SELECT COUNT(*) FROM ledger") > 0 })
		if err := child.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = child.Wait()
		killedAt := time.Now()

		var attempt atomic.Int64
		w, _ := newWorker(t, q, worker.Options{Timeout: time.Second, Tries: 3})
		ctx, cancel := context.WithTimeout(bg, 30*time.Second)
		defer cancel()
		w.Handle("hang", func(_ context.Context, job *dbqueue.Job) error {
			if job.ID == id {
				attempt.Store(int64(job.Attempts))
				cancel()
			}
			return nil
		})
		if err := w.Run(ctx); err != nil {
			t.Fatal(err)
		}
		if attempt.Load() != 2 {
			t.Fatalf("the killed worker's job came back on attempt %d, want 2", attempt.Load())
		}
		if waited := time.Since(killedAt); waited < (retryAfter-2)*time.Second {
			t.Fatalf("job came back after %v, before retry_after", waited)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs") + db.Count(t, "SELECT COUNT(*) FROM failed_jobs"); n != 0 {
			t.Fatalf("%d rows left after the rerun", n)
		}
	})
}

// TestExactlyOnceAcrossProcesses: worker processes × 16 goroutines drain
// one queue; every job runs exactly once.
func TestExactlyOnceAcrossProcesses(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		dbtest.Heavy(t, db.Dialect)
		jobs, procs := 50000, 8
		if db.Dialect == dbqueue.SQLite {
			jobs, procs = 5000, 2 // one file, one writer at a time
		}
		if testing.Short() {
			jobs /= 10
		}
		createLedger(t, db)
		q := db.Queue(t)
		pushN(t, q, jobs, dbqueue.NewJob{Name: "ledger"})
		start := time.Now()
		var children []*exec.Cmd
		for range procs {
			children = append(children, startChild(t, db, "ledger", 90, 16))
		}
		for _, c := range children {
			if err := c.Wait(); err != nil {
				t.Fatalf("worker process: %v", err)
			}
		}
		t.Logf("%d processes ran %d jobs in %v", procs, jobs, time.Since(start))
		if n := db.Count(t, "SELECT COUNT(*) FROM ledger"); n != jobs {
			t.Errorf("ledger has %d runs for %d jobs", n, jobs)
		}
		if n := db.Count(t, "SELECT COUNT(DISTINCT job_id) FROM ledger"); n != jobs {
			t.Errorf("ledger has %d distinct jobs, want %d", n, jobs)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM (SELECT job_id FROM ledger GROUP BY job_id HAVING COUNT(*) > 1) d"); n != 0 {
			t.Errorf("%d jobs ran more than once", n)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs") + db.Count(t, "SELECT COUNT(*) FROM failed_jobs"); n != 0 {
			t.Errorf("%d rows left in jobs and failed_jobs", n)
		}
		if n := db.Count(t, "SELECT COUNT(DISTINCT pid) FROM ledger"); n < 2 {
			t.Errorf("only %d process did the work", n)
		}
	})
}
