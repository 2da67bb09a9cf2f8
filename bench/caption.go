package bench

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// Caption is what a table of measured numbers carries beside it so that it
// can be read, and made again, later: the command that wrote it, when, on
// what machine and under what load. The docs print every measured table
// with its caption, copied as the command wrote it, so a number in them is
// never without the way to reproduce it.
type Caption struct {
	Command    string // as typed from the repository's root (CommandLine)
	Began      time.Time
	Took       time.Duration
	LoadBefore string // 1-minute load averages (LoadAvg)
	LoadAfter  string
}

// WriteMarkdown prints the caption as one quoted markdown line, to stand
// right above or below the table.
func (c Caption) WriteMarkdown(w io.Writer) {
	fmt.Fprintf(w, "> `%s` · %s · %s · load average %s → %s · took %s\n",
		c.Command, c.Began.UTC().Format("2006-01-02 15:04 MST"), Machine(),
		c.LoadBefore, c.LoadAfter, c.Took.Round(time.Second))
}

// CommandLine is the running command as a reader would type it from the
// repository's root: "cd bench && go run ./cmd/NAME ARGS…", NAME being
// the program's own, each argument quoted for a POSIX shell where it
// needs to be.
func CommandLine() string {
	args := []string{"cd bench && go run ./cmd/" + filepath.Base(os.Args[0])}
	for _, a := range os.Args[1:] {
		args = append(args, shellQuote(a))
	}
	return strings.Join(args, " ")
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=.,/:@+%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Machine says what the numbers ran on: cores, GOMAXPROCS, the CPU's
// model, the platform and Go's version.
func Machine() string {
	return fmt.Sprintf("%d CPUs (GOMAXPROCS %d), %s, %s/%s, %s",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), CPUModel(), runtime.GOOS, runtime.GOARCH, runtime.Version())
}

// CPUModel is the first "model name" of /proc/cpuinfo, or "unknown CPU".
func CPUModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}
