package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
)

// section is a level-2 heading: "## Title", outside code.
var section = regexp.MustCompile(`^ {0,3}##\s+(.*?)\s*#*\s*$`)

// checkContents reports every section of a guide (a file in a docs
// directory) that the guide's table of contents, the links above its
// first section, does not link to: each guide is read on its own, and a
// reader finds what it covers before scrolling. The README and
// CONTRIBUTING.md are left to their own shape.
func checkContents(d *doc) []string {
	if filepath.Base(filepath.Dir(d.path)) != "docs" {
		return nil
	}
	type sec struct {
		line   int
		anchor string
	}
	var (
		secs []sec
		seen = map[string]int{}
		text = prose(d.lines)
	)
	for i, line := range d.lines {
		if !text[i] {
			continue
		}
		m := heading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		s := slug(m[1])
		a := s
		if n := seen[s]; n > 0 {
			a = fmt.Sprintf("%s-%d", s, n)
		}
		seen[s]++
		if section.MatchString(line) {
			secs = append(secs, sec{i + 1, a})
		}
	}
	if len(secs) == 0 {
		return nil
	}
	listed := map[string]bool{}
	for _, l := range d.links {
		if l.line < secs[0].line && strings.HasPrefix(l.target, "#") {
			listed[l.target[1:]] = true
		}
	}
	var errs []string
	for _, s := range secs {
		if !listed[s.anchor] {
			errs = append(errs, fmt.Sprintf("%s:%d: section #%s is missing from the table of contents above the first section", d.path, s.line, s.anchor))
		}
	}
	return errs
}

// prose reports, for each line, whether it is outside fenced code (the
// fences themselves are code).
func prose(lines []string) []bool {
	out := make([]bool, len(lines))
	in := "" // the open fence's mark, "" outside code
	for i, line := range lines {
		switch {
		case in != "":
			if t := strings.TrimSpace(line); strings.HasPrefix(t, in) && strings.Trim(t, in[:1]) == "" {
				in = ""
			}
		case fence.MatchString(line):
			in = fence.FindStringSubmatch(line)[1]
		default:
			out[i] = true
		}
	}
	return out
}
