package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"strings"
	"text/tabwriter"
	"time"
)

// table is an aligned writer on stdout; Flush it.
func (c *cli) table() *tabwriter.Writer {
	return tabwriter.NewWriter(c.out, 0, 0, 2, ' ', 0)
}

// writeJSON prints v as indented JSON, made safe for a terminal
// (jsonSafe).
func (c *cli) writeJSON(v any) error {
	return c.encodeJSON(v, "  ")
}

// encodeJSON prints v as JSON, indented by indent ("" for one line),
// through jsonSafe: the stored text it holds may carry characters a
// terminal acts on.
func (c *cli) encodeJSON(v any, indent string) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", indent)
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := c.out.Write(jsonSafe(b.Bytes()))
	return err
}

// progress reports a long operation: on a terminal one line rewritten in
// place, elsewhere (a log, a pipe) a line per step.
type progress struct {
	c     *cli
	start time.Time
}

func (c *cli) progress(format string, args ...any) *progress {
	p := &progress{c: c, start: time.Now()}
	msg := fmt.Sprintf(format, args...)
	if c.outTTY {
		fmt.Fprintf(c.out, "\r%s…", msg)
	} else {
		fmt.Fprintf(c.out, "%s\n", msg)
	}
	return p
}

// done ends the progress with the result line.
func (p *progress) done(format string, args ...any) {
	msg := fmt.Sprintf(format, args...) + fmt.Sprintf(" (%s)", time.Since(p.start).Round(time.Millisecond))
	if p.c.outTTY {
		fmt.Fprintf(p.c.out, "\r\033[K%s\n", msg)
	} else {
		fmt.Fprintln(p.c.out, msg)
	}
}

// fail ends a terminal's progress line so the error starts on its own.
func (p *progress) fail() {
	if p.c.outTTY {
		fmt.Fprintln(p.c.out)
	}
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

func formatAge(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return d.Round(time.Second).String()
}

// oneLine is the first line of s, cut to n runes, for a table cell or a
// summary. It is not escaped: a table cell is printed through printable.
func oneLine(s string, n int) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	s = strings.TrimSpace(s)
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	if s == "" {
		return "-"
	}
	return s
}

// rawJSON keeps a stored payload as JSON when it is JSON, and as a string
// when it is not.
func rawJSON(b []byte) json.RawMessage {
	if json.Valid(b) {
		return json.RawMessage(b)
	}
	s, _ := json.Marshal(string(b))
	return s
}

// version prints the module version this command was built from, so an
// operator can say which release a fleet runs.
func (c *cli) version(args []string) error {
	rest, err := parse(newFlagSet(c, "version"), args)
	if err != nil {
		return err
	}
	if err := noArgs("version", rest); err != nil {
		return err
	}
	bi, _ := debug.ReadBuildInfo()
	fmt.Fprintln(c.out, versionLine(bi))
	return nil
}

// versionLine is "dbqueue VERSION GOVERSION": the module version that
// `go install …@v0.1.0` records (v0.1.0), or for a build from a checkout
// "(devel)" with the commit it was built from and "+dirty" when the tree
// had changes, so a binary built by hand still names its source.
func versionLine(bi *debug.BuildInfo) string {
	if bi == nil {
		return "dbqueue (devel)"
	}
	v := bi.Main.Version
	if v == "" || v == "(devel)" {
		v = "(devel)"
		var rev, dirty string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = "+dirty"
				}
			}
		}
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if rev != "" {
			v += " " + rev + dirty
		}
	}
	return strings.TrimSpace("dbqueue " + v + " " + bi.GoVersion)
}
