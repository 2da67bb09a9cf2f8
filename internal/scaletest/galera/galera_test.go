//go:build linux

// Package galera runs dbqueue on a private three-node MariaDB Galera
// cluster, writing to all three nodes at once. Row locks (SELECT … FOR
// UPDATE SKIP LOCKED) are local to a node, so two nodes may claim the same
// job; Galera lets the first to commit win and fails the other's commit
// certification with error 1213, which dbqueue retries. These tests prove
// that the loser never runs the job, that nothing is lost, and that the ids
// PushMany returns are the rows' ids although auto_increment steps by the
// node count.
package galera

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/internal/sqldb"
	"github.com/dbqueue/dbqueue/worker"
)

func init() {
	// Killed nodes at the end of the test make the driver log closed
	// connections; they are noise here.
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
}

// TestGalera starts one cluster (about 35s) and runs every case on it,
// each in a database of its own.
func TestGalera(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node Galera cluster")
	}
	start := time.Now()
	c := dbtest.StartGalera(t)
	t.Logf("three-node cluster ready in %v", time.Since(start).Round(time.Millisecond))
	t.Run("CertificationConflictIsRetryable", func(t *testing.T) { testCertificationConflict(t, c) })
	t.Run("PushManyIDs", func(t *testing.T) { testPushManyIDs(t, c) })
	t.Run("ConcurrentClaimsOneWinner", func(t *testing.T) { testOneWinner(t, c) })
	t.Run("ExactlyOnceLedger", func(t *testing.T) { testLedger(t, c) })
	if os.Getenv("DBQUEUE_GALERA_BENCH") != "" {
		t.Run("Throughput", func(t *testing.T) { testThroughput(t, c) })
	}
}

// certStats sums the nodes' certification failures and brute-force aborts:
// the conflicts Galera resolved by rolling a transaction back.
func certStats(c *dbtest.Cluster) (cert, bf int) {
	for i := range c.Nodes {
		st := c.Status(i)
		n, _ := strconv.Atoi(st["wsrep_local_cert_failures"])
		m, _ := strconv.Atoi(st["wsrep_local_bf_aborts"])
		cert += n
		bf += m
	}
	return cert, bf
}

// testCertificationConflict shows the mechanism the queue has to survive,
// step by step: two nodes both lock the same job row FOR UPDATE (each lock
// is local, so neither waits), both mark it reserved, the first commit wins
// and the second fails certification with an error dbqueue classifies as
// retryable, its update rolled back.
func testCertificationConflict(t *testing.T, c *dbtest.Cluster) {
	ctx := context.Background()
	dbs := c.NewDB(t)
	q := queueOn(t, dbs[0])
	id, err := q.Push(ctx, dbqueue.NewJob{Name: "conflict"})
	if err != nil {
		t.Fatal(err)
	}
	waitVisible(t, dbs, id)
	txs := make([]*sql.Tx, 2)
	for i := range txs {
		tx, err := dbs[i].SQL.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		var got int64
		if err := tx.QueryRowContext(ctx, "SELECT id FROM jobs WHERE id = ? AND reserved_at IS NULL FOR UPDATE SKIP LOCKED", id).Scan(&got); err != nil {
			t.Fatalf("node %d: lock the job: %v", i+1, err)
		}
		if _, err := tx.ExecContext(ctx, "UPDATE jobs SET reserved_at = UNIX_TIMESTAMP(), attempts = attempts + 1, reservation_token = reservation_token + 1 WHERE id = ?", id); err != nil {
			t.Fatalf("node %d: mark the job reserved: %v", i+1, err)
		}
		txs[i] = tx
	}
	if err := txs[0].Commit(); err != nil {
		t.Fatalf("node 1, the first to commit: %v", err)
	}
	err = txs[1].Commit()
	var my *mysql.MySQLError
	if !errors.As(err, &my) || my.Number != 1213 {
		t.Fatalf("node 2's commit of the same row: got %v, want error 1213 (certification failure)", err)
	}
	if !sqldb.IsRetryable(err) {
		t.Errorf("certification failure %v is not classified retryable", err)
	}
	t.Logf("second committer: %v", err)
	for i, db := range dbs {
		if n := syncedCount(t, db, "SELECT attempts FROM jobs WHERE id = ?", id); n != 1 {
			t.Errorf("node %d: job attempts = %d, want 1 (only the winner's claim)", i+1, n)
		}
	}
}

// testPushManyIDs pushes batches on every node, single rows and chunks
// above the queue's insert chunk, and checks that each returned id names
// the row with that job's payload: with wsrep_auto_increment_control the
// ids of one INSERT step by the node count from a per-node offset.
func testPushManyIDs(t *testing.T, c *dbtest.Cluster) {
	ctx := context.Background()
	dbs := c.NewDB(t)
	var inc int
	if err := dbs[0].SQL.QueryRow("SELECT @@auto_increment_increment").Scan(&inc); err != nil {
		t.Fatal(err)
	}
	if inc != len(c.Nodes) {
		t.Errorf("auto_increment_increment = %d, want %d (wsrep_auto_increment_control)", inc, len(c.Nodes))
	}
	var wg sync.WaitGroup
	for node, db := range dbs {
		q := queueOn(t, db)
		for _, n := range []int{1, 7, 250, 2500} {
			wg.Go(func() {
				jobs := make([]dbqueue.NewJob, n)
				for i := range jobs {
					jobs[i] = dbqueue.NewJob{Name: "ids", Data: fmt.Sprintf("%d-%d-%d", node, n, i)}
				}
				ids, err := q.PushMany(ctx, jobs)
				if err != nil {
					t.Errorf("node %d: PushMany(%d): %v", node+1, n, err)
					return
				}
				if len(ids) != n {
					t.Errorf("node %d: PushMany(%d) returned %d ids", node+1, n, len(ids))
					return
				}
				got := map[int64]string{}
				rows, err := db.SQL.QueryContext(ctx, "SELECT id, JSON_UNQUOTE(JSON_EXTRACT(payload, '$.data')) FROM jobs WHERE id IN ("+sqldb.Ints(ids)+")")
				if err != nil {
					t.Error(err)
					return
				}
				defer rows.Close()
				for rows.Next() {
					var id int64
					var data string
					if err := rows.Scan(&id, &data); err != nil {
						t.Error(err)
						return
					}
					got[id] = data
				}
				for i, id := range ids {
					if want := fmt.Sprintf("%d-%d-%d", node, n, i); got[id] != want {
						t.Errorf("node %d: PushMany(%d)[%d] = id %d holding %q, want the row holding %q", node+1, n, i, id, got[id], want)
						return
					}
				}
			})
		}
	}
	wg.Wait()
}

// testOneWinner pushes one job at a time and has all three nodes claim it
// at the same instant, many times: exactly one claim may get it. The
// certification failures counted show the claims did collide.
func testOneWinner(t *testing.T, c *dbtest.Cluster) {
	ctx := context.Background()
	dbs := c.NewDB(t)
	qs := make([]*dbqueue.Queue, len(dbs))
	for i, db := range dbs {
		qs[i] = queueOn(t, db)
	}
	cert0, bf0 := certStats(c)
	const rounds = 60
	wins := make([]int, len(qs))
	for round := range rounds {
		id, err := qs[round%len(qs)].Push(ctx, dbqueue.NewJob{Name: "race"})
		if err != nil {
			t.Fatal(err)
		}
		waitVisible(t, dbs, id)
		var (
			wg     sync.WaitGroup
			start  = make(chan struct{})
			mu     sync.Mutex
			winner []int
		)
		for i, q := range qs {
			wg.Go(func() {
				<-start
				jobs, err := q.Reserve(ctx, 1)
				if err != nil {
					t.Errorf("round %d, node %d: Reserve: %v", round, i+1, err)
					return
				}
				for _, j := range jobs {
					if j.ID != id {
						t.Errorf("round %d, node %d: claimed job %d, want %d or none", round, i+1, j.ID, id)
						continue
					}
					mu.Lock()
					winner = append(winner, i)
					mu.Unlock()
					if err := q.Delete(ctx, j); err != nil {
						t.Errorf("round %d, node %d: Delete: %v", round, i+1, err)
					}
				}
			})
		}
		close(start)
		wg.Wait()
		if len(winner) != 1 {
			t.Fatalf("round %d: job %d was claimed by nodes %v, want exactly one", round, id, winner)
		}
		wins[winner[0]]++
	}
	cert1, bf1 := certStats(c)
	t.Logf("%d rounds, wins per node %v; certification failures %d, brute-force aborts %d", rounds, wins, cert1-cert0, bf1-bf0)
	if n := dbs[0].Count(t, "SELECT COUNT(*) FROM jobs"); n != 0 {
		t.Errorf("%d jobs left", n)
	}
}

// waitVisible waits until every node has applied the push of job id
// (replication applies asynchronously after the commit returns).
func waitVisible(t *testing.T, dbs []*dbtest.DB, id int64) {
	t.Helper()
	for i, db := range dbs {
		dbtest.WaitFor(t, 10*time.Second, fmt.Sprintf("job %d reaches node %d", id, i+1), func() bool {
			return db.Count(t, "SELECT COUNT(*) FROM jobs WHERE id = ?", id) > 0
		})
	}
}

// syncedCount is db.Count on a session with wsrep_sync_wait = 1: the read
// waits until the node has applied every write the cluster committed
// before it, so a commit on another node a moment ago is seen.
func syncedCount(t *testing.T, db *dbtest.DB, query string, args ...any) int {
	t.Helper()
	ctx := context.Background()
	conn, err := db.SQL.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET SESSION wsrep_sync_wait = 1"); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(ctx, "SET SESSION wsrep_sync_wait = 0")
	var n int
	if err := conn.QueryRowContext(ctx, query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func queueOn(t testing.TB, db *dbtest.DB, opts ...dbqueue.Option) *dbqueue.Queue {
	t.Helper()
	return db.Queue(t, opts...)
}

// ledgerRun is one row of the ledger: one run of a job.
type ledgerRun struct {
	job      int64
	node     int
	attempts int
}

// testLedger is the exactly-once ledger on three writers: a Queue and a
// worker of several goroutines per node, pushes spread over all nodes
// while the workers run, and every run of a job written to a ledger table
// on the node that ran it. No fault is injected, so no reply is ever lost:
// a job with two ledger rows ran twice, which is the queue's bug (a claim
// that lost certification handed out its job, or a reservation was taken
// over). Every pushed id must appear once, and the queue must end empty.
func testLedger(t *testing.T, c *dbtest.Cluster) {
	const (
		batches   = 30
		perBatch  = 100
		perWorker = 6
	)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dbs := c.NewDB(t)
	dbs[0].Exec(t, "CREATE TABLE ledger (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, job_id BIGINT NOT NULL, node INT NOT NULL, attempts INT NOT NULL) ENGINE=InnoDB")
	for i, db := range dbs[1:] {
		dbtest.WaitFor(t, 10*time.Second, fmt.Sprintf("the ledger table reaches node %d", i+2), func() bool {
			return db.Count(t, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = 'ledger'") > 0
		})
	}
	cert0, bf0 := certStats(c)
	logger := slog.New(slog.DiscardHandler)
	var (
		handlerErrs atomic.Int64
		runs        atomic.Int64
	)
	wctx, stopWorkers := context.WithCancel(ctx)
	var workers sync.WaitGroup
	qs := make([]*dbqueue.Queue, len(dbs))
	for node, db := range dbs {
		q := queueOn(t, db)
		qs[node] = q
		w, err := worker.New(q, worker.Options{
			Concurrency: perWorker,
			Tries:       worker.Unlimited,
			Sleep:       50 * time.Millisecond,
			Logger:      logger,
		})
		if err != nil {
			t.Fatal(err)
		}
		w.Handle("ledger", func(ctx context.Context, job *dbqueue.Job) error {
			// The ledger row is the run's effect, written on this node and
			// retried like the queue's own writes; an error would release
			// the job to run again, which this test counts as a failure.
			err := sqldb.Retry(ctx, func() error {
				_, err := db.SQL.ExecContext(ctx, "INSERT INTO ledger (job_id, node, attempts) VALUES (?, ?, ?)", job.ID, node+1, job.Attempts)
				return err
			})
			if err != nil {
				handlerErrs.Add(1)
				return fmt.Errorf("ledger: %w", err)
			}
			runs.Add(1)
			return nil
		})
		workers.Go(func() {
			if err := w.Run(wctx); err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("node %d worker: %v", node+1, err)
			}
		})
	}
	// Pushes spread over the nodes, concurrent with the claims.
	var (
		pushers sync.WaitGroup
		mu      sync.Mutex
		pushed  []int64
	)
	start := time.Now()
	for b := range batches {
		pushers.Go(func() {
			q := qs[rand.IntN(len(qs))]
			jobs := make([]dbqueue.NewJob, perBatch)
			for i := range jobs {
				jobs[i] = dbqueue.NewJob{Name: "ledger", Data: b*perBatch + i}
			}
			ids, err := q.PushMany(ctx, jobs)
			if err != nil {
				t.Errorf("push batch %d: %v", b, err)
				return
			}
			mu.Lock()
			pushed = append(pushed, ids...)
			mu.Unlock()
		})
	}
	pushers.Wait()
	total := batches * perBatch
	// Both waits end by the test's deadline at the latest; the counts are
	// checked below.
	end, _ := ctx.Deadline()
	dbtest.Until(time.Until(end), func() bool { return runs.Load() >= int64(total) })
	took := time.Since(start)
	// Wait for the last deletes, then stop the workers.
	dbtest.Until(time.Until(end), func() bool { return dbs[0].Count(t, "SELECT COUNT(*) FROM jobs") == 0 })
	stopWorkers()
	workers.Wait()
	cert1, bf1 := certStats(c)
	t.Logf("%d jobs through 3 nodes × %d goroutines in %v (%.0f jobs/s); certification failures %d, brute-force aborts %d, handler errors %d",
		total, perWorker, took.Round(time.Millisecond), float64(total)/took.Seconds(), cert1-cert0, bf1-bf0, handlerErrs.Load())

	if len(pushed) != total {
		t.Fatalf("pushed %d ids, want %d", len(pushed), total)
	}
	if slices.Sort(pushed); len(slices.Compact(slices.Clone(pushed))) != total {
		t.Errorf("PushMany returned duplicate ids")
	}
	rows, err := dbs[0].SQL.Query("SELECT job_id, node, attempts FROM ledger ORDER BY job_id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	ran := map[int64][]ledgerRun{}
	for rows.Next() {
		var r ledgerRun
		if err := rows.Scan(&r.job, &r.node, &r.attempts); err != nil {
			t.Fatal(err)
		}
		ran[r.job] = append(ran[r.job], r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	lost, twice := 0, 0
	for _, id := range pushed {
		switch rs := ran[id]; {
		case len(rs) == 0:
			if lost++; lost <= 5 {
				t.Errorf("job %d never ran", id)
			}
		case len(rs) > 1:
			if twice++; twice <= 5 {
				t.Errorf("job %d ran %d times: %+v", id, len(rs), rs)
			}
		}
		delete(ran, id)
	}
	for id := range ran {
		t.Errorf("the ledger has runs of job %d, which PushMany never returned", id)
	}
	if lost+twice > 0 {
		t.Errorf("%d jobs lost, %d ran more than once, of %d", lost, twice, total)
	}
	for i, db := range dbs {
		if n := db.Count(t, "SELECT COUNT(*) FROM failed_jobs"); n != 0 {
			t.Errorf("node %d: %d failed jobs", i+1, n)
		}
	}
}
