package main

import (
	"bytes"
	"strings"
	"unicode/utf8"
)

// printable is text from the database (a queue name, a job's name, an
// exception, a payload) made safe for a terminal, on one line. A job's
// text is anyone's: raw, an ESC [ … or OSC sequence in it would move the
// cursor, retitle the window or plant a link, a CR would overwrite the
// line before it, a bidi override would show the operator reversed text.
// Each such character is shown as a visible escape instead: \x1b for a
// control or an invalid UTF-8 byte, \u202e for a C1 control, a bidi
// control or a line separator. A backslash before what would read as an
// escape (\, x, u, U) is doubled, so no two texts print alike.
func printable(s string) string { return escape(s, false) }

// printableLines is printable for a multi-line text (an exception's
// trace, a payload): its own line breaks and tabs stay as they are.
func printableLines(s string) string { return escape(s, true) }

// escape is printable (lines false) and printableLines (lines true).
func escape(s string, lines bool) string {
	if !needsEscape(s, lines) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			writeHex(&b, 'x', uint32(s[i]), 2)
		case unsafeRune(r, lines):
			if r < 0x80 {
				writeHex(&b, 'x', uint32(r), 2)
			} else {
				writeHex(&b, 'u', uint32(r), 4)
			}
		case r == '\\':
			b.WriteByte('\\')
			if i+1 < len(s) && startsEscape(s[i+1:], lines) {
				b.WriteByte('\\')
			}
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// needsEscape reports whether escape would change s.
func needsEscape(s string, lines bool) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 || unsafeRune(r, lines) ||
			r == '\\' && i+1 < len(s) && startsEscape(s[i+1:], lines) {
			return true
		}
		i += size
	}
	return false
}

// startsEscape reports whether the printed form of s starts with what,
// after a backslash, reads as an escape: a backslash, x, u or U.
func startsEscape(s string, lines bool) bool {
	r, size := utf8.DecodeRuneInString(s)
	return r == '\\' || r == 'x' || r == 'u' || r == 'U' ||
		r == utf8.RuneError && size <= 1 || unsafeRune(r, lines)
}

// unsafeRune reports whether r must not reach a terminal as it is: a C0
// control (but a newline or tab of a multi-line text), DEL, a C1 control,
// a bidi control, or a Unicode line or paragraph separator.
func unsafeRune(r rune, lines bool) bool {
	switch {
	case r == '\n' || r == '\t':
		return !lines
	case r < 0x20 || r >= 0x7f && r <= 0x9f:
		return true
	}
	switch r {
	case 0x061c, 0x200e, 0x200f, 0x2028, 0x2029: // ALM, LRM, RLM, line and paragraph separators
		return true
	}
	return r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 // embeddings, overrides, isolates
}

func writeHex(b *strings.Builder, kind byte, v uint32, digits int) {
	const hex = "0123456789abcdef"
	b.WriteByte('\\')
	b.WriteByte(kind)
	for shift := 4 * (digits - 1); shift >= 0; shift -= 4 {
		b.WriteByte(hex[v>>uint(shift)&0xf])
	}
}

// jsonSafe makes encoded JSON safe for a terminal and valid UTF-8 without
// changing what it means: a DEL, C1, bidi or line-separator character
// (which JSON allows raw, and only inside strings) becomes a \u escape,
// an invalid UTF-8 byte (a stored payload may hold one) \ufffd.
func jsonSafe(b []byte) []byte {
	var out bytes.Buffer
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			out.WriteString(`\ufffd`)
		case r >= 0x7f && unsafeRune(r, true):
			var s strings.Builder
			writeHex(&s, 'u', uint32(r), 4)
			out.WriteString(s.String())
		default:
			out.Write(b[i : i+size])
		}
		i += size
	}
	return out.Bytes()
}
