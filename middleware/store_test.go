package middleware

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// Concurrent hits on one key from many connections each count exactly
// once: the counts returned are 1..n with none repeated or lost, which a
// read-then-write would not give.
func TestHitIsAtomic(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		s := storeOf("test", db.Queue(t))
		const n = 24
		got := make([]int64, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				err := sqldb.Retry(context.Background(), func() (err error) {
					got[i], _, err = s.sql.Hit(context.Background(), s.db, "k", 3600)
					return err
				})
				if err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		slices.Sort(got)
		for i, h := range got {
			if h != int64(i+1) {
				t.Fatalf("hit counts %v, want 1..%d each once", got, n)
			}
		}
		hits, left, err := s.sql.Hits(context.Background(), s.db, "k", 3600)
		if err != nil || hits != n || left < 3598 || left > 3600 {
			t.Fatalf("Hits = %d, %d left, %v; want %d, about 3600", hits, left, err, n)
		}
		// A passed window: the next hit opens a new one, counted from 1.
		db.Exec(t, "UPDATE jobs_limits SET window_start = window_start - 3600 WHERE name = 'k'")
		if hits, _, err := s.sql.Hits(context.Background(), s.db, "k", 3600); err != nil || hits != 0 {
			t.Fatalf("Hits of a passed window = %d, %v; want 0", hits, err)
		}
		hits, left, err = s.sql.Hit(context.Background(), s.db, "k", 3600)
		if err != nil || hits != 1 || left < 3598 {
			t.Fatalf("Hit after the window passed = %d, %d left, %v; want 1, about 3600", hits, left, err)
		}
		if err := s.sql.ClearHits(context.Background(), s.db, "k"); err != nil {
			t.Fatal(err)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs_limits"); n != 0 {
			t.Fatalf("%d rows after ClearHits", n)
		}
	})
}

// Of many owners taking one lock at once exactly one gets it; an expired
// lock is taken over; only the holder lets go.
func TestTakeLockIsExclusive(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		ctx := context.Background()
		s := storeOf("test", db.Queue(t))
		const n = 16
		taken := make([]bool, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				err := sqldb.Retry(ctx, func() (err error) {
					taken[i], err = s.sql.TakeLock(ctx, s.db, "k", fmt.Sprint("owner", i), 60)
					return err
				})
				if err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		winner := slices.Index(taken, true)
		if winner < 0 || slices.Index(taken[winner+1:], true) >= 0 {
			t.Fatalf("taken %v, want exactly one", taken)
		}
		if ok, err := s.sql.ReleaseLock(ctx, s.db, "k", "someone else"); err != nil || ok {
			t.Fatalf("ReleaseLock by a non-holder = %v, %v; want false", ok, err)
		}
		if ok, err := s.sql.TakeLock(ctx, s.db, "k", "late", 60); err != nil || ok {
			t.Fatalf("TakeLock of a held lock = %v, %v; want false", ok, err)
		}
		// Expired (one second past expires_at): taken over.
		db.Exec(t, "UPDATE jobs_locks SET expires_at = "+db.Now()+" - 1 WHERE name = 'k'")
		if ok, err := s.sql.TakeLock(ctx, s.db, "k", "heir", 60); err != nil || !ok {
			t.Fatalf("TakeLock of an expired lock = %v, %v; want true", ok, err)
		}
		if ok, err := s.sql.ReleaseLock(ctx, s.db, "k", fmt.Sprint("owner", winner)); err != nil || ok {
			t.Fatalf("ReleaseLock by the expired holder = %v, %v; want false", ok, err)
		}
		if ok, err := s.sql.ReleaseLock(ctx, s.db, "k", "heir"); err != nil || !ok {
			t.Fatalf("ReleaseLock by the holder = %v, %v; want true", ok, err)
		}
		if ok, err := s.sql.TakeLock(ctx, s.db, "k", "next", 60); err != nil || !ok {
			t.Fatalf("TakeLock after release = %v, %v; want true", ok, err)
		}
		// Prune: an expired lock and an old window go, the rest stay.
		db.Exec(t, "UPDATE jobs_locks SET expires_at = "+db.Now()+" - 1")
		if _, _, err := s.sql.Hit(ctx, s.db, "fresh", 60); err != nil {
			t.Fatal(err)
		}
		db.Exec(t, "INSERT INTO jobs_limits (name, window_start, hits) VALUES ('old', 0, 5)")
		if n, err := Prune(ctx, db.Queue(t), time.Hour); err != nil || n != 2 {
			t.Fatalf("Prune = %d, %v; want 2", n, err)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs_limits WHERE name = 'fresh'"); n != 1 {
			t.Fatal("Prune deleted a current window")
		}
	})
}
