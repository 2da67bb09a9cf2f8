package bench

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// CPUProfile starts a CPU profile of the whole process written to path, so
// a benchmark command can show where its Go time went; stop ends it and
// closes the file. An empty path profiles nothing.
func CPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
