package periodic_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/periodic"
)

// The test binary doubles as a scheduler process: with
// DBQUEUE_PERIODIC_DSN set it runs one until SIGTERM instead of the tests.
func TestMain(m *testing.M) {
	if dsn := os.Getenv("DBQUEUE_PERIODIC_DSN"); dsn != "" {
		os.Exit(child(dsn))
	}
	dbtest.SetParallel()
	os.Exit(m.Run())
}

type tickData struct {
	Tick int64 `json:"tick"`
	PID  int   `json:"pid"`
}

func child(dsn string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	q, err := dbqueue.Open(ctx, dsn)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer q.Close()
	s, err := periodic.New(q, []periodic.Job{{
		Name:     "tick",
		Schedule: periodic.Every(time.Second),
		New: func(tick time.Time) dbqueue.NewJob {
			return dbqueue.NewJob{Name: "tick", Data: tickData{Tick: tick.Unix(), PID: os.Getpid()}}
		},
	}}, periodic.Options{Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := s.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// ticks reads the ticks pushed so far, in id order.
func ticks(t *testing.T, db *dbtest.DB) []tickData {
	t.Helper()
	rows, err := db.SQL.Query("SELECT payload FROM jobs ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []tickData
	for rows.Next() {
		var raw []byte
		if err := rows.Scan(&raw); err != nil {
			t.Fatal(err)
		}
		p, err := dbqueue.DecodePayload(raw)
		if err != nil {
			t.Fatal(err)
		}
		var d tickData
		if err := json.Unmarshal(p.Data, &d); err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Three scheduler processes keep one 1s schedule: every tick is pushed
// exactly once. One is killed with SIGKILL; the other two go on, and no
// tick is missed or doubled before or after.
func TestThreeProcessesOneJobPerTick(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs for about 10s")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		var (
			cmds []*exec.Cmd
			logs []*lockedBuffer
		)
		for range 3 {
			cmd := exec.Command(exe, "-test.run=^$")
			cmd.Env = append(os.Environ(), "DBQUEUE_PERIODIC_DSN="+db.DSN)
			buf := &lockedBuffer{}
			cmd.Stdout, cmd.Stderr = io.Discard, buf
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			cmds, logs = append(cmds, cmd), append(logs, buf)
		}
		t.Cleanup(func() {
			for _, c := range cmds {
				_ = c.Process.Kill()
				_ = c.Wait()
			}
			if t.Failed() {
				for i, l := range logs {
					t.Logf("process %d stderr:\n%s", i, l.String())
				}
			}
		})
		// waitFor waits until n ticks were pushed, for at most 6s beyond
		// the n seconds they take.
		waitFor := func(n int) []tickData {
			t.Helper()
			var got []tickData
			if !dbtest.Until(time.Duration(n+6)*time.Second, func() bool { got = ticks(t, db); return len(got) >= n }) {
				t.Fatalf("only %d ticks pushed after %ds, want %d", len(got), n+6, n)
			}
			return got
		}
		before := waitFor(4)
		// Kill the process that pushed the newest tick: the one winning the
		// race, not an idle one.
		killed := before[len(before)-1].PID
		victim := slices.IndexFunc(cmds, func(c *exec.Cmd) bool { return c.Process.Pid == killed })
		if victim < 0 {
			t.Fatalf("tick pushed by process %d, not one of ours", killed)
		}
		if err := cmds[victim].Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmds[victim].Wait()
		got := waitFor(len(ticks(t, db)) + 4)
		for i, c := range cmds {
			if i == victim {
				continue
			}
			_ = c.Process.Signal(syscall.SIGTERM)
			if err := c.Wait(); err != nil {
				t.Errorf("a scheduler exited with %v after SIGTERM, want a clean stop", err)
			}
		}
		got = ticks(t, db) // what was pushed until the stop, too

		seen := map[int64]int{}
		byPID := map[int]int{}
		var list []int64
		for _, d := range got {
			seen[d.Tick]++
			byPID[d.PID]++
			list = append(list, d.Tick)
		}
		slices.Sort(list)
		first, last := list[0], list[len(list)-1]
		for tick := first; tick <= last; tick++ {
			if seen[tick] != 1 {
				t.Errorf("tick %d pushed %d times, want exactly once (ticks %v)", tick, seen[tick], list)
			}
		}
		if len(list) != int(last-first+1) {
			t.Errorf("%d jobs for the %d ticks from %d to %d", len(list), last-first+1, first, last)
		}
		after := 0
		for _, d := range got {
			if d.Tick > before[len(before)-1].Tick+1 {
				after++
				if d.PID == killed {
					t.Errorf("tick %d pushed by the killed process %d", d.Tick, killed)
				}
			}
		}
		if after < 3 {
			t.Errorf("only %d ticks pushed after the kill, want at least 3", after)
		}
		t.Logf("%d ticks from %d to %d, pushed by process: %v (killed %d)", len(list), first, last, byPID, killed)
	})
}
