package dialect

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// FailureTextBytes bounds the exception text dbqueue writes to failed_jobs
// (an error's text, a Cancel reason): 64 KiB, far below MySQL's
// max_allowed_packet (16 MiB by default on MariaDB, 64 MiB on MySQL 8), so
// a failure is never refused for its size. ErrorHistoryBytes bounds an
// error of the error history the same way.
const FailureTextBytes = 64 << 10

// StorableText is s as every database dbqueue runs on stores it in a text
// column, and at most limit bytes long. It is the one rule for every free
// text dbqueue writes (a failure's exception, the error history, the
// names the metrics and history tables keep): an error's text is anyone's,
// and PostgreSQL refuses a NUL byte and bytes that are not UTF-8, MariaDB
// and MySQL refuse the latter in utf8mb4 columns, and either refusal
// would leave the job that carries the text unrecorded.
//
//   - Each byte that is not part of valid UTF-8, and each NUL, becomes a
//     visible escape of four ASCII characters: \xff, \x00 (lower-case hex,
//     as Go's %q writes them). A backslash in s is kept as it is, so a
//     text that already held `\x00` reads the same as one that held a NUL.
//   - A text longer than limit bytes (after escaping) is cut at a
//     character boundary, never inside an escape, and ends with
//     "... [cut from N bytes]", N being the length of s. The note is ASCII,
//     so it fits any column's character set. A limit shorter than the note
//     cuts without it.
//
// Text that is valid UTF-8 without NUL and fits is returned as it is.
func StorableText(s string, limit int) string {
	limit = max(limit, 0)
	if len(s) <= limit && clean(s) {
		return s
	}
	note := "... [cut from " + strconv.Itoa(len(s)) + " bytes]"
	keep := limit - len(note)
	if keep < 0 {
		keep, note = limit, ""
	}
	const hex = "0123456789abcdef"
	out := make([]byte, 0, min(len(s), limit)+len(note)+4)
	cut := 0 // the longest prefix of out, at a unit's end, within keep
	i := 0
	for i < len(s) && len(out) <= limit {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == 0 || r == utf8.RuneError && size == 1 {
			out = append(out, '\\', 'x', hex[s[i]>>4], hex[s[i]&15])
		} else {
			out = append(out, s[i:i+size]...)
		}
		i += size
		if len(out) <= keep {
			cut = len(out)
		}
	}
	if i == len(s) && len(out) <= limit {
		return string(out)
	}
	return string(out[:cut]) + note
}

// clean reports whether s is valid UTF-8 without a NUL byte.
func clean(s string) bool { return strings.IndexByte(s, 0) < 0 && utf8.ValidString(s) }
