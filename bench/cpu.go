package bench

import (
	"os"
	"path/filepath"
	"runtime/metrics"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CPU is processor time spent during a measured period: by this process
// (the queue's Go side, producer included in end-to-end) and by the local
// database servers (every postgres, mariadbd and redis-server process on the machine).
// On a 2-core box the two compete for the same cores, so a queue's rate
// is bounded by their sum per job; the split says which side to make
// cheaper.
type CPU struct {
	Client time.Duration
	Server time.Duration
	// Allocs and AllocBytes are this process's heap allocations: most of
	// a Go queue's CPU beyond the database's is allocation and GC.
	Allocs, AllocBytes uint64
}

// cpuSnapshot is both clocks at one moment: the server's per process, so
// a connection that opens during the period counts from zero.
type cpuSnapshot struct {
	client        time.Duration
	server        map[string]int64 // ticks by pid
	allocs, bytes uint64
}

func takeCPU() cpuSnapshot {
	var ru syscall.Rusage
	var s cpuSnapshot
	m := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}, {Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(m)
	s.allocs, s.bytes = m[0].Value.Uint64(), m[1].Value.Uint64()
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		s.client = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	s.server = serverTicks()
	return s
}

// since is the CPU spent from before to s. A server process that exited
// in between is not counted: its last times are gone with it.
func (s cpuSnapshot) since(before cpuSnapshot) CPU {
	var ticks int64
	for pid, t := range s.server {
		ticks += t - before.server[pid]
	}
	return CPU{Client: s.client - before.client, Server: time.Duration(ticks) * time.Second / clockTick,
		Allocs: s.allocs - before.allocs, AllocBytes: s.bytes - before.bytes}
}

// clockTick is the kernel's USER_HZ, the unit of /proc/PID/stat's times;
// 100 on every Linux that matters here.
const clockTick = 100

// serverTicks reads utime+stime of each database server process.
func serverTicks() map[string]int64 {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	ticks := map[string]int64{}
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		s := string(b)
		open, shut := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || shut < open {
			continue
		}
		name := s[open+1 : shut]
		if !strings.HasPrefix(name, "postgres") && !strings.HasPrefix(name, "mariadbd") && !strings.HasPrefix(name, "mysqld") && !strings.HasPrefix(name, "redis-server") {
			continue
		}
		f := strings.Fields(s[shut+1:])
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		k, _ := strconv.ParseInt(f[12], 10, 64)
		ticks[path] = u + k
	}
	return ticks
}

// CPUMark is the CPU clocks at one moment, for measurements the harness's
// BurnDown and EndToEnd do not cover (dbqbench's width and payload runs).
type CPUMark struct{ s cpuSnapshot }

// MarkCPU reads both clocks now.
func MarkCPU() CPUMark { return CPUMark{takeCPU()} }

// Since is the CPU spent from m until now.
func (m CPUMark) Since() CPU { return takeCPU().since(m.s) }
