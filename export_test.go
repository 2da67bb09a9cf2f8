package dbqueue

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dbqueue/dbqueue/internal/dialect"
)

// StatementsText is the claim SQL a queue of dialect d would run, for
// explain_test.go to check that the claim SELECTs it EXPLAINs are still the
// ones in use.
func StatementsText(d Dialect, mariaDB bool) string {
	sd, err := dialect.For(string(d), dialect.DefaultTables, dialect.MySQLServer{MariaDB: mariaDB})
	if err != nil {
		panic(err)
	}
	return dialect.ClaimText(sd)
}

// PostgresClaims are PostgreSQL's full claim and its claim from the
// cursor ($1… parameters), and the statement that sets the planner for
// them in the claim's transaction.
func PostgresClaims() (full, fromCursor, planner string) {
	full, fromCursor = dialect.PostgresClaims()
	return full, fromCursor, dialect.PostgresClaimPlanner
}

// PostgresHeldText is PostgreSQL's batched delete and release SQL.
func PostgresHeldText() []string { return dialect.PostgresHeldText() }

// SessionIsolation reports the isolation level of a connection from q's
// own pool (MySQL: transaction_isolation, or MariaDB's tx_isolation).
func SessionIsolation(ctx context.Context, q *Queue) (string, error) {
	var level string
	err := q.db.QueryRow(ctx, "SELECT @@SESSION.transaction_isolation").Scan(&level)
	if err != nil {
		err = q.db.QueryRow(ctx, "SELECT @@SESSION.tx_isolation").Scan(&level)
	}
	return level, err
}

// The worker-side operations, for this package's tests.
func Unreserve(ctx context.Context, q *Queue, job *Job) error { return q.unreserve(ctx, job) }
func DeleteMany(ctx context.Context, q *Queue, jobs []*Job) ([]*Job, error) {
	return q.deleteMany(ctx, jobs)
}
func ReleaseMany(ctx context.Context, q *Queue, rs []Releasing) ([]*Job, error) {
	return q.releaseMany(ctx, rs)
}
func Wakeups(q *Queue, queues ...string) (<-chan struct{}, func()) { return q.wakeups(queues...) }
func WithKey(raw []byte, key string, value any) ([]byte, error)    { return withKey(raw, key, value) }

// NowSQL is d's SQL for the database clock in Unix seconds.
func NowSQL(d Dialect) string {
	sd, err := dialect.For(string(d), dialect.DefaultTables, dialect.MySQLServer{})
	if err != nil {
		panic(err)
	}
	return sd.Now()
}

// FinishLinked is the worker's end of a chained or batched job.
func FinishLinked(ctx context.Context, q *Queue, job *Job, cause error) (before, after *Batch, err error) {
	return q.finishLinked(ctx, job, cause)
}

// SetLookBurst sets how much look time MySQL's claim cursor may save up
// (0: short claims never look); it returns the undo.
func SetLookBurst(d time.Duration) (restore func()) { return dialect.SetLookBurst(d) }

// claimCounts holds the claim counters CountClaims handed out, by Queue.
var claimCounts sync.Map

func init() {
	afterClaim = func(q *Queue, _ string) {
		if c, ok := claimCounts.Load(q); ok {
			c.(*atomic.Int64).Add(1)
		}
	}
}

// CountClaims counts the claim statements q runs from now on, one per
// queue a reserve reads.
func CountClaims(q *Queue) *atomic.Int64 {
	c := new(atomic.Int64)
	claimCounts.Store(q, c)
	return c
}

// ReadyText is the statement a queue of dialect d runs to read which
// queues hold ready jobs, with '?' or '$n' placeholders.
func ReadyText(d Dialect) string {
	sd, err := dialect.For(string(d), dialect.DefaultTables, dialect.MySQLServer{MariaDB: true})
	if err != nil {
		panic(err)
	}
	return dialect.ReadyText(sd)
}

// WorkerSide is the worker side a Queue carries, for the external tests
// that reach it as package worker does: core.WorkerSideOf[dbqueue.WorkerSide](q).
type WorkerSide = workerSide
