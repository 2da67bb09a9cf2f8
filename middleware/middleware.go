// Package middleware has the worker middleware people reach for, after
// Laravel's job middleware: RateLimited, WithoutOverlapping,
// ThrottlesExceptions, SkipIf and SkipUnless. Each is a worker.Middleware,
// set for a whole worker (worker.Options.Middleware) or for one handler
// (worker.WithMiddleware).
//
// RateLimited, WithoutOverlapping and ThrottlesExceptions keep their
// counts and locks in the queue's own database — the <jobs>_limits and
// <jobs>_locks tables of migration 00005 — so they hold across every
// worker process of the queue, with the database's clock, as the jobs
// themselves do. Run `migrate up` to create the tables; until then these
// middleware fail the jobs they wrap with an error saying so.
//
// A job held back by RateLimited, WithoutOverlapping or
// ThrottlesExceptions is released (worker.ReleaseAfter): that is no
// exception, but the attempt still counts towards its tries, as in
// Laravel, and a job held back on its last try fails at its next claim
// (worker.ErrMaxAttempts) without running. Give such jobs enough tries
// (worker.Unlimited) or a RetryUntil.
package middleware

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/core"
	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/internal/sqldb"
	"github.com/dbqueue/dbqueue/worker"
)

// KeyFunc names what a job is limited, locked or throttled by: the job's
// name, a user, a tenant, an API. Jobs with the same key share one limit.
// A nil KeyFunc keys by the job's name; a KeyFunc that returns "" leaves
// that job unlimited.
type KeyFunc func(job *dbqueue.Job) string

// ByName keys jobs by the name their handler is registered under, like
// Laravel's default (the job's class).
func ByName(job *dbqueue.Job) string { return job.Name() }

// maxKey is the width of the name columns of the limits and locks tables.
const maxKey = 255

// store is the queue's connection and the limits SQL of its dialect.
type store struct {
	db  sqldb.DB
	sql dialect.Limits
}

func storeOf(what string, q *dbqueue.Queue) store {
	if q == nil {
		panic("middleware: " + what + " with a nil queue")
	}
	c := core.Of(q)
	return store{db: c.DB, sql: c.Dialect}
}

// name is the row name of key in one middleware's namespace: keys longer
// than the column are replaced by their SHA-256, so they still differ.
func name(prefix, key string) string {
	n := prefix + key
	if len(n) <= maxKey {
		return n
	}
	sum := sha256.Sum256([]byte(key))
	return prefix + "sha256:" + hex.EncodeToString(sum[:])
}

func keyOf(key KeyFunc, job *dbqueue.Job) string {
	if key == nil {
		return job.Name()
	}
	return key(job)
}

// seconds rounds d up to whole seconds, the unit of every time the
// database keeps.
func seconds(d time.Duration) int64 {
	s := int64(d / time.Second)
	if d%time.Second > 0 {
		s++
	}
	return s
}

// dbErr names the middleware and key in a database error, and turns a
// missing table into the advice to migrate.
func dbErr(what, key string, err error) error {
	return sqldb.Wrap(fmt.Sprintf("middleware %s (key %q)", what, key), err)
}

// waitSeconds is a release delay of s seconds, at least one: a window's
// last second still counts as open.
func waitSeconds(s int64) time.Duration { return time.Duration(max(s, 1)) * time.Second }

// RateLimited lets at most limit jobs of a key start in each window of
// per, across every worker of the queue (Laravel's RateLimited job
// middleware). A window opens with its first job and lasts per, by the
// database's clock; a job over the limit does not run and is released
// until the window ends (worker.ReleaseAfter: no exception, but an
// attempt). Each job costs one atomic upsert on the limits table.
//
// per is counted in whole seconds, rounded up. RateLimited panics on a nil
// queue, a limit below 1 or a per below 1s: those are programming errors.
// A database error fails the check and is returned as the job's error (the
// job is retried with its backoff).
func RateLimited(q *dbqueue.Queue, key KeyFunc, limit int, per time.Duration) worker.Middleware {
	s := storeOf("RateLimited", q)
	if limit < 1 {
		panic(fmt.Sprintf("middleware: RateLimited with limit %d: allow at least 1 job per window", limit))
	}
	if per < time.Second || per > dbqueue.MaxDelay {
		panic(fmt.Sprintf("middleware: RateLimited with per %v: use a window from 1s to 100 years", per))
	}
	window := seconds(per)
	return func(next worker.HandlerFunc) worker.HandlerFunc {
		return func(ctx context.Context, job *dbqueue.Job) error {
			k := keyOf(key, job)
			if k == "" {
				return next(ctx, job)
			}
			var hits, left int64
			err := sqldb.Retry(ctx, func() (err error) {
				hits, left, err = s.sql.Hit(ctx, s.db, name("rate:", k), window)
				return err
			})
			if err != nil {
				return dbErr("RateLimited", k, err)
			}
			if hits > int64(limit) {
				return worker.ReleaseAfter(waitSeconds(left))
			}
			return next(ctx, job)
		}
	}
}

// LockOption configures WithoutOverlapping.
type LockOption func(*lockConfig)

type lockConfig struct {
	releaseAfter time.Duration
	discard      bool
}

// LockedReleaseAfter sets how long a job whose key is locked waits before
// it is tried again (Laravel's releaseAfter). Default 0: released to run
// again at once, which costs an attempt each time, so give the job enough
// tries or a delay here.
func LockedReleaseAfter(d time.Duration) LockOption {
	return func(c *lockConfig) { c.releaseAfter, c.discard = d, false }
}

// LockedDiscard deletes a job whose key is locked instead of releasing it
// (Laravel's dontRelease): for work that only needs doing once at a time,
// such as a refresh another run is already doing.
func LockedDiscard() LockOption {
	return func(c *lockConfig) { c.discard = true }
}

// WithoutOverlapping runs at most one job of a key at a time, across every
// worker of the queue (Laravel's WithoutOverlapping job middleware). The
// lock is a row of the locks table, taken atomically — inserted, or taken
// over when its holder's lock has expired — before the job runs and
// deleted when it returns. A job whose key is locked does not run: it is
// released (LockedReleaseAfter) or deleted (LockedDiscard).
//
// expire bounds how long a lock holds if its worker dies without letting
// go. A lock never expires while its job runs: when expire is shorter
// than the time the job may run (its timeout: the deadline of the job's
// context), the lock is taken for that time instead, and while the
// handler runs (even past its timeout, ignoring its context) the lock is
// renewed every half of its length, so a second job of the key cannot
// start beside it. It is counted in whole seconds, rounded up, and a lock
// lasts at least that long. Unlike Laravel's, a lock always expires: a
// crashed worker must not block its key for good. WithoutOverlapping
// panics on a nil queue or an expire below 1s.
func WithoutOverlapping(q *dbqueue.Queue, key KeyFunc, expire time.Duration, opts ...LockOption) worker.Middleware {
	s := storeOf("WithoutOverlapping", q)
	if expire < time.Second || expire > dbqueue.MaxDelay {
		panic(fmt.Sprintf("middleware: WithoutOverlapping with expire %v: use from 1s to 100 years (the lock lasts at least the job's timeout anyway)", expire))
	}
	var c lockConfig
	for _, o := range opts {
		o(&c)
	}
	ttl := seconds(expire)
	return func(next worker.HandlerFunc) worker.HandlerFunc {
		return func(ctx context.Context, job *dbqueue.Job) error {
			k := keyOf(key, job)
			if k == "" {
				return next(ctx, job)
			}
			lock, owner, ttl := name("", k), newOwner(), ttl
			if d, ok := ctx.Deadline(); ok {
				// The lock must outlast the job's timeout, and the second
				// its database clock may round away.
				ttl = max(ttl, min(seconds(time.Until(d))+1, maxSeconds))
			}
			var taken bool
			err := sqldb.Retry(ctx, func() (err error) {
				taken, err = s.sql.TakeLock(ctx, s.db, lock, owner, ttl)
				return err
			})
			if err != nil {
				return dbErr("WithoutOverlapping", k, err)
			}
			if !taken {
				if c.discard {
					return worker.Discard()
				}
				return worker.ReleaseAfter(c.releaseAfter)
			}
			stopRenew := renewLock(context.WithoutCancel(ctx), s, lock, owner, ttl)
			defer func() {
				stopRenew()
				// Let go even when the job's context has ended (a timeout)
				// or the handler panicked: otherwise the key stays locked
				// until the lock expires. A failure to let go is not the
				// job's: its work is done, and the lock expires by itself.
				rctx := context.WithoutCancel(ctx)
				_ = sqldb.Retry(rctx, func() error {
					_, err := s.sql.ReleaseLock(rctx, s.db, lock, owner)
					return err
				})
			}()
			return next(ctx, job)
		}
	}
}

// maxSeconds is dbqueue.MaxDelay in seconds: the longest lock taken.
const maxSeconds = int64(dbqueue.MaxDelay / time.Second)

// renewLock moves owner's lock to expire ttl seconds later every ttl/2
// until the returned stop is called (the handler returned): a handler
// that runs past its timeout, ignoring its context, keeps its key locked,
// while a worker that dies stops renewing and its lock expires. A renewal
// that fails is tried again at the next one; the lock still holds ttl from
// the last that worked.
func renewLock(ctx context.Context, s store, lock, owner string, ttl int64) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		every := time.Duration(ttl) * time.Second / 2
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				rctx, cancel := context.WithTimeout(ctx, every)
				_ = s.sql.ExtendLock(rctx, s.db, lock, owner, ttl)
				cancel()
			}
		}
	}()
	return func() {
		close(done)
		<-finished // no renewal after the release
	}
}

// newOwner draws the token that marks one run's lock, so only that run
// lets go of it.
func newOwner() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ThrottleOption configures ThrottlesExceptions.
type ThrottleOption func(*throttleConfig)

type throttleConfig struct {
	when func(error) bool
}

// ThrottleWhen counts only the errors for which fn is true (Laravel's
// when()): throttle on a remote API's errors, not on bad input.
func ThrottleWhen(fn func(error) bool) ThrottleOption {
	return func(c *throttleConfig) { c.when = fn }
}

// ThrottlesExceptions stops running jobs of a key for a while once they
// keep failing, to spare a service that is down (Laravel's
// ThrottlesExceptions job middleware). After maxExceptions errors within
// decay of the first, further jobs of the key are released until decay has
// passed since that first error, without running; a success clears the
// count of errors.
//
// The count is kept in the database, in the limits table, so it is shared
// by every worker of the queue, and never lets more than maxExceptions
// runs through, however many workers start jobs of the key at once: a run
// takes its place in the count (one atomic upsert) before it starts, a run
// that cannot is released to the end of the window, a run that ends in an
// exception leaves its place as that exception, and any other run gives
// its place back. The count holds the runs under way and the exceptions
// apart (dialect.ThrottleUnit), so a success forgets the exceptions but
// not the runs still under way: maxExceptions bounds the runs of a key
// under way at once, plus the exceptions of its window, within each
// window; set it at least to the key's concurrency. Each run costs the
// upsert before it (two statements on MySQL) and two after it (an update,
// and the delete of a row left holding nothing); a refused one, the same.
// Errors the handler returns are still returned (the job is retried
// with its backoff or failed, as without the middleware; Laravel instead
// releases it); ReleaseAfter, FailNow and Discard are no exceptions and
// are not counted, nor is a job cancelled because its worker is stopping.
//
// decay is counted in whole seconds, rounded up. ThrottlesExceptions panics
// on a nil queue, a maxExceptions below 1 or a decay below 1s.
func ThrottlesExceptions(q *dbqueue.Queue, key KeyFunc, maxExceptions int, decay time.Duration, opts ...ThrottleOption) worker.Middleware {
	s := storeOf("ThrottlesExceptions", q)
	if maxExceptions < 1 {
		panic(fmt.Sprintf("middleware: ThrottlesExceptions with maxExceptions %d: allow at least 1", maxExceptions))
	}
	if decay < time.Second || decay > dbqueue.MaxDelay {
		panic(fmt.Sprintf("middleware: ThrottlesExceptions with decay %v: use from 1s to 100 years", decay))
	}
	var c throttleConfig
	for _, o := range opts {
		o(&c)
	}
	window := seconds(decay)
	return func(next worker.HandlerFunc) worker.HandlerFunc {
		return func(ctx context.Context, job *dbqueue.Job) error {
			k := keyOf(key, job)
			if k == "" {
				return next(ctx, job)
			}
			row := name("throttle:", k)
			// Check and count in one step: the run takes its place before
			// it starts, so concurrent runs can never all see room for one
			// more.
			var hits, left int64
			err := sqldb.Retry(ctx, func() (err error) {
				hits, left, err = s.sql.Hit(ctx, s.db, row, window)
				return err
			})
			if err != nil {
				return dbErr("ThrottlesExceptions", k, err)
			}
			rctx := context.WithoutCancel(ctx)
			end := func(place, exception, clear bool) error {
				if err := sqldb.Retry(rctx, func() error { return s.sql.EndRun(rctx, s.db, row, place, exception, clear) }); err != nil {
					return dbErr("ThrottlesExceptions", k, err)
				}
				return nil
			}
			if runs, exceptions := hits%dialect.ThrottleUnit, hits/dialect.ThrottleUnit; runs+exceptions > int64(maxExceptions) {
				// Refused: its place goes back at once. If that fails, the
				// count holds one run too many until the window ends.
				_ = end(true, false, false)
				return worker.ReleaseAfter(waitSeconds(left))
			}
			windowEnd := time.Now().Add(time.Duration(left) * time.Second)
			err = next(ctx, job)
			// A run whose window passed while it ran has no place left: a
			// new window was opened without it.
			place := !time.Now().After(windowEnd)
			switch {
			case err == nil:
				// Laravel's success clears the count of exceptions; the
				// runs still under way keep their places. If the write
				// fails the job still succeeded; the count decays by itself.
				_ = end(place, false, true)
				return nil
			case worker.IsOutcome(err),
				errors.Is(err, context.Canceled) && ctx.Err() != nil,
				c.when != nil && !c.when(err):
				// No exception: give the place back.
				if place {
					if derr := end(true, false, false); derr != nil {
						return errors.Join(err, derr)
					}
				}
				return err
			case place:
				// The exception stays in the count, where the run was.
				if derr := end(true, true, false); derr != nil {
					return errors.Join(err, derr)
				}
			default:
				// The window the run was counted in passed while it ran:
				// count the exception in the current one.
				herr := sqldb.Retry(rctx, func() error {
					_, _, err := s.sql.HitBy(rctx, s.db, row, window, dialect.ThrottleUnit)
					return err
				})
				if herr != nil {
					return errors.Join(err, dbErr("ThrottlesExceptions", k, herr))
				}
			}
			return err
		}
	}
}

// SkipIf deletes a job without running it when skip reports true (Laravel's
// Skip::when): for work that has become moot, such as a mail to an account
// since closed. The job is discarded (worker.Discard), not failed.
func SkipIf(skip func(ctx context.Context, job *dbqueue.Job) bool) worker.Middleware {
	if skip == nil {
		panic("middleware: SkipIf with a nil function")
	}
	return func(next worker.HandlerFunc) worker.HandlerFunc {
		return func(ctx context.Context, job *dbqueue.Job) error {
			if skip(ctx, job) {
				return worker.Discard()
			}
			return next(ctx, job)
		}
	}
}

// SkipUnless deletes a job without running it unless run reports true
// (Laravel's Skip::unless).
func SkipUnless(run func(ctx context.Context, job *dbqueue.Job) bool) worker.Middleware {
	if run == nil {
		panic("middleware: SkipUnless with a nil function")
	}
	return SkipIf(func(ctx context.Context, job *dbqueue.Job) bool { return !run(ctx, job) })
}

// Prune deletes rate-limit and throttle windows opened more than olderThan
// ago and locks that have expired, and returns how many rows it deleted.
// The tables hold one row per key ever used; run Prune now and then (say
// daily, with olderThan longer than your longest window) when keys are
// many and short-lived, such as one per user.
func Prune(ctx context.Context, q *dbqueue.Queue, olderThan time.Duration) (int64, error) {
	s := storeOf("Prune", q)
	if olderThan < 0 || olderThan > dbqueue.MaxDelay {
		return 0, fmt.Errorf("middleware: Prune(%v): olderThan must be from 0 to 100 years", olderThan)
	}
	var n int64
	err := sqldb.Retry(ctx, func() (err error) {
		n, err = s.sql.PruneLimits(ctx, s.db, seconds(olderThan))
		return err
	})
	if err != nil {
		return 0, sqldb.Wrap("middleware prune", err)
	}
	return n, nil
}
