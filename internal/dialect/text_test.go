package dialect

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// StorableText escapes what no database stores, keeps what they all do,
// and cuts long texts within the limit, never inside a character or an
// escape, saying how long they were.
func TestStorableText(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain", "plain"},
		{"", ""},
		{"héllo 🙂 \\x00 literal", "héllo 🙂 \\x00 literal"},
		{"nul \x00 byte", `nul \x00 byte`},
		{"bad \xff\xfe bytes", `bad \xff\xfe bytes`},
		{"cut \xe2\x82 rune", `cut \xe2\x82 rune`},
		{"\xed\xa0\x80 surrogate", `\xed\xa0\x80 surrogate`},
	} {
		if got := StorableText(c.in, 100); got != c.want {
			t.Errorf("StorableText(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	long := strings.Repeat("é", 100) // 200 bytes
	got := StorableText(long, 60)
	if len(got) > 60 || !utf8.ValidString(got) || !strings.HasSuffix(got, "... [cut from 200 bytes]") {
		t.Errorf("cut text %q (%d bytes)", got, len(got))
	}
	// An escape is never split: the cut falls before it.
	got = StorableText(strings.Repeat("a", 35)+"\x00\x00\x00"+strings.Repeat("b", 50), 65)
	if got != strings.Repeat("a", 35)+`\x00... [cut from 88 bytes]` {
		t.Errorf("cut around escapes: %q", got)
	}
	// A limit shorter than the note cuts without it.
	if got := StorableText("abcdefghij", 4); got != "abcd" {
		t.Errorf("short limit: %q", got)
	}
	// 20 MB of text costs only the limit.
	huge := strings.Repeat("\xff", 20<<20)
	got = StorableText(huge, FailureTextBytes)
	if len(got) > FailureTextBytes || !strings.HasSuffix(got, "... [cut from 20971520 bytes]") || !strings.HasPrefix(got, `\xff\xff`) {
		t.Errorf("20 MB: %d bytes, ends %q", len(got), got[max(0, len(got)-40):])
	}
}
