package dbqueue_test

import (
	"strings"
	"testing"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// dsnVariants are the DSNs a user may open the test database with: as it
// is and, on MySQL/MariaDB, with the go-sql-driver settings that change
// what the server reports (clientFoundRows: rows matched rather than
// changed) or how values and statements travel.
func dsnVariants(db *dbtest.DB) map[string]string {
	out := map[string]string{"plain": db.DSN}
	if db.Dialect != dbqueue.MySQL {
		return out
	}
	for _, params := range []string{
		"clientFoundRows=true",
		"clientFoundRows=true&interpolateParams=false",
		"clientFoundRows=true&parseTime=true&loc=Local",
		"interpolateParams=false",
	} {
		out[params] = withParams(db.DSN, params)
	}
	return out
}

func withParams(dsn, params string) string {
	if strings.Contains(dsn, "?") {
		return dsn + "&" + params
	}
	return dsn + "?" + params
}

// A user opens two processes' queues with clientFoundRows=true in the
// MySQL DSN and pushes one unique job from each, one after the other and
// then 16 at once: the second push, and all but one of the racers, are
// told it is a duplicate, and one job is queued per key.
func TestPushUniqueDSNFlags(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		for name, dsn := range dsnVariants(db) {
			t.Run(name, func(t *testing.T) {
				db.Exec(t, "DELETE FROM jobs")
				qs := make([]*dbqueue.Queue, 2)
				for i := range qs {
					qs[i] = (&dbtest.DB{Dialect: db.Dialect, DSN: dsn}).Queue(t)
				}
				job := dbqueue.NewJob{Name: "report", Data: report{Account: 1}}
				u := dbqueue.Unique{Key: "flags-" + name}
				first, dup := pushUnique(t, qs[0], job, u)
				if dup {
					t.Fatalf("first push of a new key reported a duplicate of %d", first)
				}
				again, dup := pushUnique(t, qs[1], job, u)
				if !dup || again != first {
					t.Fatalf("second push from another pool: id %d, duplicate %v; want duplicate of %d", again, dup, first)
				}
				ids, pushed := raceUnique(t, qs, 8, job, dbqueue.Unique{Key: "race-" + name})
				if pushed != 1 || len(ids) != 1 {
					t.Fatalf("16 racers: %d pushed, ids %v; want one job, one id", pushed, ids)
				}
				if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 2 {
					t.Fatalf("%d rows in jobs, want 2 (one per key)", n)
				}
			})
		}
	})
}
