package dbqueue

import (
	"bytes"
	"encoding/json"
	"strconv"
	"sync/atomic"
	"unicode/utf8"
)

// decodeFast parses the envelope as dbqueue and Laravel write it — one
// object whose values the scanner validates as JSON while it walks them —
// without reflection: decoding payloads was about 40% of a worker's CPU
// with encoding/json, and this walk reads each byte once. It reports false
// on anything unusual (escaped keys, unexpected types, nesting deeper
// than maxDepth, trailing bytes), and DecodePayload then falls back to
// encoding/json, which has the last word.
func decodeFast(raw []byte, p *Payload) bool {
	s := scanner{b: raw}
	if !s.expect('{') {
		return false
	}
	if s.peek() == '}' {
		s.i++
		return s.end()
	}
	for {
		if s.peek() != '"' {
			return false
		}
		s.i++
		start := s.i
		for s.i < len(s.b) && s.b[s.i] != '"' {
			if c := s.b[s.i]; c == '\\' || c < 0x20 {
				return false
			}
			s.i++
		}
		if s.i >= len(s.b) {
			return false
		}
		key := s.b[start:s.i]
		s.i++
		if !s.expect(':') {
			return false
		}
		s.ws()
		start = s.i
		if !s.skipValue(0) || !p.set(key, s.b[start:s.i]) {
			return false
		}
		s.ws()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			return s.end()
		default:
			return false
		}
	}
}

// set stores one envelope value; false means "let encoding/json decide".
func (p *Payload) set(key, v []byte) bool {
	null := string(v) == "null"
	switch string(key) {
	case "uuid":
		return null || str(v, &p.UUID, false)
	case "displayName":
		return null || str(v, &p.DisplayName, true)
	case "job":
		return null || str(v, &p.Job, true)
	case "maxTries":
		return null || intPtr(v, &p.MaxTries)
	case "maxExceptions":
		return null || intPtr(v, &p.MaxExceptions)
	case "failOnTimeout":
		switch string(v) {
		case "true":
			p.FailOnTimeout = true
		case "false", "null":
			p.FailOnTimeout = false
		default:
			return false
		}
		return true
	case "backoff":
		return p.Backoff.UnmarshalJSON(v) == nil
	case "timeout":
		return null || secondsPtr(v, &p.Timeout)
	case "delay":
		return null || secondsPtr(v, &p.Delay)
	case "retryUntil":
		return null || int64Ptr(v, &p.RetryUntil)
	case "createdAt":
		return null || int64Ptr(v, &p.CreatedAt)
	case "exceptions":
		if null {
			return true
		}
		n, err := strconv.Atoi(string(v))
		p.Exceptions = n
		return err == nil
	case "headers":
		return p.Headers.UnmarshalJSON(v) == nil
	case "data":
		// Validated by the scanner, kept as written. The capacity is cut
		// at its end: appending to Data copies it rather than writing over
		// the rest of RawPayload.
		p.Data = json.RawMessage(v[:len(v):len(v)])
		return true
	case "batchId":
		return null || str(v, &p.BatchID, false)
	case "chained":
		// Kept as written, as encoding/json keeps a RawMessage (null
		// included); only a list is a chain (Payload.chain).
		p.Chained = json.RawMessage(v[:len(v):len(v)])
		return true
	}
	// encoding/json matches keys without regard to case: leave "Timeout"
	// and the like to it. A key dbqueue does not read is kept in the raw
	// payload only (the scanner validated it).
	for _, k := range envelopeKeys {
		if bytes.EqualFold(key, k) {
			return false
		}
	}
	return true
}

var envelopeKeys = func() [][]byte {
	var keys [][]byte
	for _, k := range []string{"uuid", "displayName", "job", "maxTries", "maxExceptions", "failOnTimeout",
		"backoff", "timeout", "retryUntil", "data", "delay", "createdAt", "exceptions", "headers", "batchId", "chained"} {
		keys = append(keys, []byte(k))
	}
	return keys
}()

// str decodes the JSON string v (validated by the scanner) into dst. Job
// and display names repeat from job to job, so intern reuses them.
func str(v []byte, dst *string, intern bool) bool {
	if len(v) < 2 || v[0] != '"' {
		return false
	}
	inner := v[1 : len(v)-1]
	var buf [128]byte
	if bytes.IndexByte(inner, '\\') >= 0 {
		var ok bool
		if inner, ok = unescape(buf[:0], inner); !ok {
			return json.Unmarshal(v, dst) == nil // \u escapes
		}
	}
	if !utf8.Valid(inner) {
		return false // encoding/json replaces invalid bytes: let it
	}
	if intern {
		*dst = names.intern(inner)
	} else {
		*dst = string(inner)
	}
	return true
}

// unescape appends s with JSON's one-letter escapes resolved (Laravel
// writes class names as App\\Jobs\\Mail); false for \u escapes, left to
// encoding/json.
func unescape(dst, s []byte) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			dst = append(dst, c)
			continue
		}
		i++
		if i >= len(s) {
			return nil, false
		}
		switch s[i] {
		case '"', '\\', '/':
			dst = append(dst, s[i])
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		default:
			return nil, false
		}
	}
	return dst, true
}

// internTable keeps recently seen job names so that decoding a payload
// does not allocate them again: a fixed number of entries, lock-free, an
// entry replaced when another name hashes to it.
type internTable struct {
	entries [256]atomic.Pointer[string]
}

var names internTable

func (t *internTable) intern(b []byte) string {
	if len(b) == 0 || len(b) > 255 {
		return string(b)
	}
	h := uint32(2166136261) // FNV-1a
	for _, c := range b {
		h = (h ^ uint32(c)) * 16777619
	}
	e := &t.entries[h%uint32(len(t.entries))]
	if s := e.Load(); s != nil && *s == string(b) {
		return *s
	}
	s := string(b)
	e.Store(&s)
	return s
}

func intPtr(v []byte, dst **int) bool {
	n, err := strconv.Atoi(string(v))
	if err != nil {
		return false
	}
	*dst = &n
	return true
}

func int64Ptr(v []byte, dst **int64) bool {
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return false
	}
	*dst = &n
	return true
}

func secondsPtr(v []byte, dst **Seconds) bool {
	var s Seconds
	if s.UnmarshalJSON(v) != nil {
		return false
	}
	*dst = &s
	return true
}

type scanner struct {
	b []byte
	i int
	// spaced is set when ws skipped anything: the JSON is not compact.
	spaced bool
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
			s.spaced = true
		default:
			return
		}
	}
}

func (s *scanner) peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *scanner) expect(c byte) bool {
	if s.peek() != c {
		return false
	}
	s.i++
	return true
}

func (s *scanner) end() bool {
	s.ws()
	return s.i == len(s.b)
}

// maxDepth bounds the nesting the scanner follows; deeper values are left
// to encoding/json (whose own limit is 10,000).
const maxDepth = 512

// skipValue moves past the JSON value at s.i, checking it is valid JSON
// as encoding/json's scanner does (strings may hold any bytes but
// control characters; escapes and numbers follow the grammar).
func (s *scanner) skipValue(depth int) bool {
	if s.i >= len(s.b) || depth > maxDepth {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '"':
		return s.skipString()
	case c == '{':
		s.i++
		if s.peek() == '}' {
			s.i++
			return true
		}
		for {
			if s.peek() != '"' || !s.skipString() || !s.expect(':') {
				return false
			}
			s.ws()
			if !s.skipValue(depth + 1) {
				return false
			}
			switch s.peek() {
			case ',':
				s.i++
			case '}':
				s.i++
				return true
			default:
				return false
			}
		}
	case c == '[':
		s.i++
		if s.peek() == ']' {
			s.i++
			return true
		}
		for {
			s.ws()
			if !s.skipValue(depth + 1) {
				return false
			}
			switch s.peek() {
			case ',':
				s.i++
			case ']':
				s.i++
				return true
			default:
				return false
			}
		}
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	}
	return false
}

func (s *scanner) literal(word string) bool {
	if !bytes.HasPrefix(s.b[s.i:], []byte(word)) {
		return false
	}
	s.i += len(word)
	return true
}

// number moves past -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func (s *scanner) number() bool {
	if s.b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(s.b) && s.b[s.i] == '0':
		s.i++
	case s.digits() == 0:
		return false
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if s.digits() == 0 {
			return false
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if s.digits() == 0 {
			return false
		}
	}
	return true
}

func (s *scanner) digits() int {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i - start
}

// skipString moves past the string that starts at s.i, checking its
// escapes and that it holds no control characters.
func (s *scanner) skipString() bool {
	s.i++ // opening quote
	for s.i < len(s.b) {
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return true
		case c == '\\':
			s.i++
			if s.i >= len(s.b) {
				return false
			}
			switch s.b[s.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i++
			case 'u':
				if s.i+4 >= len(s.b) {
					return false
				}
				for _, h := range s.b[s.i+1 : s.i+5] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return false
					}
				}
				s.i += 5
			default:
				return false
			}
		case c < 0x20:
			return false
		default:
			s.i++
		}
	}
	return false
}
