//go:build linux

package failover_test

import (
	"context"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// watchdogMargin is Patroni's watchdog safety_margin default: with a
// watchdog, a leader whose Patroni stops sending keepalives is reset
// ttl − safety_margin after the last one, before its leader key can lapse.
const watchdogMargin = 5 * time.Second

// TestPatroniFailover runs the ledger on a three-member Patroni cluster
// (three etcd members, synchronous_mode) and kills the leader mid-run:
//
//   - postgres: SIGKILL of the leader's PostgreSQL (postmaster and
//     backends). Its Patroni, with primary_start_timeout 0, releases the
//     leader key within a loop instead of restarting it in place, and the
//     synchronous standby takes over.
//   - patroni: SIGKILL of the leader's Patroni. Its PostgreSQL runs on as
//     primary; the watchdog Patroni would use (it resets the host ttl −
//     safety_margin after the last keepalive) cannot be armed on a shared
//     machine, so the test kills that PostgreSQL at the moment the watchdog
//     would fire. The leader key lapses after ttl and the synchronous
//     standby takes over.
//
// It checks that Patroni promoted the synchronous standby; logs the time
// from the kill to the new leader (Patroni's REST API), to the first job
// run after the primary went down and to a synchronous standby on the new
// leader; and fails if an acknowledged push was lost or a job ran twice
// other than across the failover.
func TestPatroniFailover(t *testing.T) {
	requireFaults(t, "starts a Patroni cluster of its own and kills its leader")
	for _, kill := range []string{"postgres", "patroni"} {
		t.Run("kill-"+kill, func(t *testing.T) {
			began := time.Now()
			settings := dbtest.PatroniDefaults()
			p := dbtest.StartPatroni(t, 3, settings)
			f := &failover{t: t, mode: "Patroni synchronous_mode, SIGKILL of the leader's " + kill, sync: true, pushErrs: map[string]int{}}
			f.db = dbtest.NewOnPatroni(t, p)
			t.Logf("etcd ×3 and Patroni ×3 started, leader elected and migrated in %v", time.Since(began).Round(time.Millisecond))
			var old, leader *dbtest.PatroniMember
			// Measured, not asserted: how long the new leader runs without
			// a synchronous standby (in non-strict mode it then acknowledges
			// commits on its own).
			watchCtx, stopWatch := context.WithCancel(context.Background())
			defer stopWatch()
			watched := make(chan struct{})
			var syncAt time.Time
			f.crash = func() {
				old = p.AwaitPrimary(10*time.Second, nil)
				c, err := p.Cluster(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				standby := syncStandby(c)
				f.stopAt = time.Now()
				switch kill {
				case "postgres":
					if err := old.KillPostgres(); err != nil {
						t.Fatal(err)
					}
					f.downAt = time.Now() // the postmaster is gone
				case "patroni":
					if err := old.KillPatroni(); err != nil {
						t.Fatal(err)
					}
					// The watchdog's moment: a fault's timing, not a wait
					// for an event.
					<-time.After(time.Until(f.stopAt.Add(time.Duration(settings.TTL)*time.Second - watchdogMargin)))
					if !old.PostgresRunning() {
						t.Fatalf("%s's PostgreSQL stopped with its Patroni: expected it to run on until the watchdog\n%s", old.Name, p.Logs())
					}
					if n := f.acked(f.stopAt); n == 0 {
						t.Errorf("no push acknowledged between the Patroni kill and the fence: expected the orphaned primary to serve on")
					} else {
						t.Logf("%d pushes acknowledged by the orphaned primary between the Patroni kill and the fence", n)
					}
					if err := old.KillPostgres(); err != nil {
						t.Fatal(err)
					}
					f.downAt = time.Now()
				}
				leader = p.AwaitPrimary(60*time.Second, old)
				f.promotedAt = time.Now()
				// synchronous_mode's promise: only the standby that had
				// every acknowledged commit may lead.
				if leader.Name != standby {
					t.Errorf("Patroni promoted %s; the synchronous standby before the kill was %q", leader.Name, standby)
				}
				go func() {
					defer close(watched)
					for watchCtx.Err() == nil {
						ctx, cancel := context.WithTimeout(watchCtx, 2*time.Second)
						c, err := p.Cluster(ctx)
						cancel()
						if err == nil && synchronous(c) {
							syncAt = time.Now()
							return
						}
						select {
						case <-watchCtx.Done():
						case <-time.After(100 * time.Millisecond):
						}
					}
				}()
				t.Logf("SIGKILL of %s's %s; %s leads %v after the kill (%v after the primary went down)",
					old.Name, kill, leader.Name, f.promotedAt.Sub(f.stopAt).Round(time.Millisecond), f.promotedAt.Sub(f.downAt).Round(time.Millisecond))
			}
			f.run()
			if f.firstRun.IsZero() {
				t.Fatal("no job ran after the primary went down")
			}
			select {
			case <-watched:
			case <-time.After(time.Until(f.promotedAt.Add(30 * time.Second))):
				stopWatch()
				<-watched
			}
			if syncAt.IsZero() {
				t.Logf("no synchronous standby on the new leader's timeline within 30s of the promotion")
			} else {
				t.Logf("a synchronous standby on the new leader's timeline %v after the kill", syncAt.Sub(f.stopAt).Round(time.Millisecond))
			}
			c, err := p.Cluster(t.Context())
			t.Logf("at the end: %+v (err %v)", c.Members, err)
			t.Logf("RESULT kill=%s leader_after_kill=%.2fs first_job_after_kill=%.2fs first_job_after_down=%.2fs",
				kill, f.promotedAt.Sub(f.stopAt).Seconds(), f.firstRun.Sub(f.stopAt).Seconds(), f.firstRun.Sub(f.downAt).Seconds())
		})
	}
}

// syncStandby names the running sync_standby, or "".
func syncStandby(c dbtest.PatroniCluster) string {
	for _, m := range c.Members {
		if m.Role == "sync_standby" && m.State == "running" {
			return m.Name
		}
	}
	return ""
}

// synchronous says whether a sync_standby runs on the leader's timeline.
func synchronous(c dbtest.PatroniCluster) bool {
	tl := -1
	for _, m := range c.Members {
		if m.Role == "leader" {
			tl = m.Timeline
		}
	}
	for _, m := range c.Members {
		if m.Role == "sync_standby" && m.State == "running" && m.Timeline == tl {
			return true
		}
	}
	return false
}
