package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync/atomic"
	"time"
)

// A stall is a stretch in which the worker finishes no job while pushed
// jobs wait. A minute's sample shows one only as a low rate; watchStalls
// looks four times a second and, the first few times work stops for
// stallAfter, writes every goroutine's stack to stall-<dialect>-<n>.txt in
// the soak's directory, so the file says where the worker waited (a claim
// statement, a delete, the prefetch buffer) while the server's own logs
// say what it waited for.
const (
	stallAfter = 2 * time.Second
	stallDumps = 5
)

// watchStalls runs until ctx ends; done and pushed are the run's counters.
// It returns how many stalls it saw.
func watchStalls(ctx context.Context, dir, d string, done func() int64, pushed *atomic.Int64, progress func(string, ...any)) int {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	lastDone, lastAt, stalls, inStall := done(), time.Now(), 0, false
	for {
		select {
		case <-ctx.Done():
			return stalls
		case now := <-tick.C:
			dn := done()
			if dn != lastDone {
				if inStall {
					progress("stall over after %s", now.Sub(lastAt).Round(time.Millisecond))
				}
				lastDone, lastAt, inStall = dn, now, false
				continue
			}
			if inStall || now.Sub(lastAt) < stallAfter || pushed.Load() <= dn {
				continue
			}
			inStall = true
			stalls++
			progress("stall %d: no job done for %s with %d waiting", stalls, now.Sub(lastAt).Round(time.Millisecond), pushed.Load()-dn)
			if stalls <= stallDumps {
				if err := dumpGoroutines(filepath.Join(dir, fmt.Sprintf("stall-%s-%d.txt", d, stalls)), now); err != nil {
					progress("stall dump: %v", err)
				}
			}
		}
	}
}

// dumpGoroutines writes every goroutine's stack to path.
func dumpGoroutines(path string, at time.Time) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "# goroutines at %s\n", at.UTC().Format(time.RFC3339Nano))
	if err := pprof.Lookup("goroutine").WriteTo(f, 2); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
