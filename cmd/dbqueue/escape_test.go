package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// terminalUnsafe reports whether r, reaching a terminal raw, can act on
// it or hide text from the operator: C0 controls (ESC starts every CSI,
// OSC and title sequence; BEL ends them; CR overwrites a line), DEL, C1
// controls (U+009B is a one-character CSI), bidi controls and line
// separators. A newline and a tab are allowed in multi-line text.
func terminalUnsafe(r rune, lines bool) bool {
	if lines && (r == '\n' || r == '\t') {
		return false
	}
	return r < 0x20 || r >= 0x7f && r <= 0x9f ||
		r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 ||
		r == 0x200e || r == 0x200f || r == 0x061c || r == 0x2028 || r == 0x2029
}

// unescapeForTest reads printable's output back: \\ is a backslash,
// \xHH a byte, \uHHHH a rune, and any other backslash itself.
func unescapeForTest(t *testing.T, s string) string {
	var b []byte
	for i := 0; i < len(s); {
		if s[i] != '\\' || i+1 == len(s) {
			b = append(b, s[i])
			i++
			continue
		}
		switch s[i+1] {
		case '\\':
			b = append(b, '\\')
			i += 2
		case 'x', 'u':
			n := 2
			if s[i+1] == 'u' {
				n = 4
			}
			if i+2+n > len(s) {
				t.Fatalf("truncated escape at %d of %q", i, s)
			}
			v, err := strconv.ParseUint(s[i+2:i+2+n], 16, 32)
			if err != nil {
				t.Fatalf("bad escape at %d of %q: %v", i, s, err)
			}
			if n == 2 {
				b = append(b, byte(v))
			} else {
				b = utf8.AppendRune(b, rune(v))
			}
			i += 2 + n
		case 'U':
			t.Fatalf("undoubled backslash before U at %d of %q", i, s)
		default:
			b = append(b, '\\')
			i++
		}
	}
	return string(b)
}

// checkPrintable holds printable's promises for one input.
func checkPrintable(t *testing.T, in string, lines bool) string {
	t.Helper()
	out := escape(in, lines)
	if !utf8.ValidString(out) {
		t.Fatalf("escape(%q, %v) = %q: not valid UTF-8", in, lines, out)
	}
	for _, r := range out {
		if terminalUnsafe(r, lines) {
			t.Fatalf("escape(%q, %v) = %q: holds %U", in, lines, out, r)
		}
	}
	if back := unescapeForTest(t, out); back != in {
		t.Fatalf("escape(%q, %v) = %q reads back as %q: two texts would print alike", in, lines, out, back)
	}
	return out
}

func FuzzPrintable(f *testing.F) {
	for _, s := range hostileTexts {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, in string, lines bool) {
		checkPrintable(t, in, lines)
		var b strings.Builder
		b.Write(jsonSafe([]byte(strconv.Quote(in)))) // any JSON text
		if !utf8.ValidString(b.String()) {
			t.Fatalf("jsonSafe(%q) not valid UTF-8", in)
		}
	})
}

// hostileTexts are what a job's producer can put in a queue name, a job
// name or an exception to act on the operator's terminal.
var hostileTexts = []string{
	"\x1b[2J\x1b[H", // clear the screen
	"\x1b]8;;https://evil.example/\x07click\x1b]8;;\x07", // OSC 8 link
	"\x1b]0;pwned\x07",            // set the window title
	"\x1b]2;pwned\x1b\\",          // title, ST-terminated
	"safe\rEVIL",                  // CR overwriting the line
	"\u009b31mred\u009b0m",        // C1 CSI, as UTF-8
	"\x9b31m\x9d0;t\x9c",          // C1 controls as raw bytes
	"\xff\xfe\xc0\xafok",          // invalid UTF-8
	"abc\u202edcba\u202c",         // right-to-left override
	"\u2066\u2067\u2068iso\u2069", // bidi isolates
	"\u200f\u200e\u061c",          // marks
	"line\u2028sep\u2029para",     // Unicode line separators
	"bell\x07 del\x7f nul\x00",
	"App\\Jobs\\SendMail", // a Laravel class name stays as it is
	`\x1b literal`, `\u202e literal`, `\\`, `\`, "\\\x1b", "x\\", "\\U0001F600",
	"trace:\n\tat Foo()\n\tat Bar()\r\n",
	"naïve 日本語 🙂 ok",
}

func TestPrintableEscapesTerminalControls(t *testing.T) {
	for _, in := range hostileTexts {
		for _, lines := range []bool{false, true} {
			checkPrintable(t, in, lines)
		}
	}
	for in, want := range map[string]string{
		"\x1b[2J":             `\x1b[2J`,
		"a\u202eb":            `a\u202eb`,
		"App\\Jobs\\SendMail": `App\Jobs\SendMail`,
		`\x1b`:                `\\x1b`,
		"plain queue":         "plain queue",
		"one\ntwo":            `one\x0atwo`,
		"\u009b":              `\u009b`,
		"\xff":                `\xff`,
	} {
		if got := printable(in); got != want {
			t.Errorf("printable(%q) = %q, want %q", in, got, want)
		}
	}
	if got, want := printableLines("trace:\n\tat Foo()\r\n"), "trace:\n\tat Foo()\\x0d\n"; got != want {
		t.Errorf("printableLines kept %q, want %q", got, want)
	}
	// JSON stays JSON, with the same meaning, and safe.
	in := map[string]string{"q": "\u009b31m\u202e\x7f\u2028"}
	raw, _ := json.Marshal(in)
	safe := jsonSafe(append(raw, "\xff"[0]))
	var back map[string]string
	if err := json.Unmarshal(jsonSafe(raw), &back); err != nil || back["q"] != in["q"] {
		t.Errorf("jsonSafe(%s) = %s: %v, %q", raw, jsonSafe(raw), err, back)
	}
	for _, r := range string(safe) {
		if terminalUnsafe(r, true) {
			t.Errorf("jsonSafe(%q) = %q: holds %U", raw, safe, r)
		}
	}
}
