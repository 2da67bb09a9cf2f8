package main

import (
	"fmt"
	"regexp"
	"strings"
)

var (
	// measuredHeader marks a table of measured numbers by its header row:
	// rates, times, sizes, ratios, losses.
	measuredHeader = regexp.MustCompile(`(?i)jobs/s|µs|\bp50\b|\bms\b|\bMB\b|MiB|×|\blost\b|throughput`)
	tableRule      = regexp.MustCompile(`^\s*\|[-:| ]+\|\s*$`)
	// caption is the line a benchmark command prints under its table
	// (bench.Caption): a quote that starts with the command in backticks.
	caption = regexp.MustCompile("^\\s*> `")
)

// checkCaptions reports every table of measured numbers (one whose header
// names a rate, a time, a size, a ratio or a loss) that is not followed by
// its caption: a quoted line starting with the command that made it, in
// backticks, then its date, machine and load, as compare and dbqbench
// print it. A number without the command that makes it cannot be checked
// again, and goes stale unseen.
func checkCaptions(d *doc) []string {
	var (
		errs []string
		text = prose(d.lines)
	)
	for i := 0; i < len(d.lines); i++ {
		line := d.lines[i]
		if !text[i] {
			continue
		}
		if !strings.HasPrefix(strings.TrimSpace(line), "|") || i+1 >= len(d.lines) || !tableRule.MatchString(d.lines[i+1]) {
			continue
		}
		start, end := i, i
		for end < len(d.lines) && strings.HasPrefix(strings.TrimSpace(d.lines[end]), "|") {
			end++
		}
		i = end - 1 // the loop goes on after the table
		if !measuredHeader.MatchString(line) {
			continue
		}
		next := end
		for next < len(d.lines) && strings.TrimSpace(d.lines[next]) == "" {
			next++
		}
		if next >= len(d.lines) || !caption.MatchString(d.lines[next]) {
			errs = append(errs, fmt.Sprintf("%s:%d: a table of measured numbers needs its caption right under it: > `the command` · date · machine · load (as compare and dbqbench print it)", d.path, start+1))
		}
	}
	return errs
}
