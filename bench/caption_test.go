package bench

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
)

func TestCaptionNamesCommandDateMachineAndLoad(t *testing.T) {
	args := os.Args
	t.Cleanup(func() { os.Args = args })
	os.Args = []string{"/tmp/go-build123/b001/exe/compare", "-rounds", "5", "-systems", "dbqueue-pg,river-pg", "-sqlite", "sqlite:/tmp/a b.db", "-x", "it's"}

	var b bytes.Buffer
	Caption{
		Command: CommandLine(),
		Began:   time.Date(2026, 11, 24, 13, 0, 0, 0, time.FixedZone("CET", 3600)),
		Took:    6*time.Minute + 18400*time.Millisecond, LoadBefore: "1.75", LoadAfter: "2.77",
	}.WriteMarkdown(&b)
	got := b.String()
	for _, want := range []string{
		"> `cd bench && go run ./cmd/compare -rounds 5 -systems dbqueue-pg,river-pg -sqlite 'sqlite:/tmp/a b.db' -x 'it'\\''s'` · ",
		"2026-11-24 12:00 UTC", // always in UTC
		"CPUs (GOMAXPROCS ",
		"load average 1.75 → 2.77 · took 6m18s\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("caption lacks %q:\n%s", want, got)
		}
	}
}
