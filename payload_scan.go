package dbqueue

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// decodeFast parses the envelope as dbqueue and Laravel write it — one flat
// object whose values are strings, numbers, booleans and null, plus any
// JSON value under "data" — without reflection: decoding payloads was
// about 40% of a worker's CPU with encoding/json. It reports false on
// anything unusual (escaped keys, unexpected types, trailing bytes), and
// DecodePayload then falls back to encoding/json, which has the last word.
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
		if !s.expect('"') {
			return false
		}
		start := s.i
		for s.i < len(s.b) && s.b[s.i] != '"' {
			if s.b[s.i] == '\\' {
				return false
			}
			s.i++
		}
		if s.i >= len(s.b) {
			return false
		}
		if hasControl(s.b[start:s.i]) || !utf8.Valid(s.b[start:s.i]) {
			return false
		}
		key := string(s.b[start:s.i])
		s.i++
		if !s.expect(':') {
			return false
		}
		s.ws()
		v, ok := s.value()
		if !ok || !p.set(key, v) {
			return false
		}
		s.ws()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
			s.ws()
		case '}':
			s.i++
			return s.end()
		default:
			return false
		}
	}
}

// set stores one envelope value; false means "let encoding/json decide".
func (p *Payload) set(key string, v []byte) bool {
	null := string(v) == "null"
	switch key {
	case "uuid":
		return null || str(v, &p.UUID)
	case "displayName":
		return null || str(v, &p.DisplayName)
	case "job":
		return null || str(v, &p.Job)
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
		return p.Headers.UnmarshalJSON(v) == nil && json.Valid(v)
	case "data":
		if !json.Valid(v) {
			return false
		}
		p.Data = json.RawMessage(v)
		return true
	case "batchId":
		return null || str(v, &p.BatchID)
	case "chained":
		// Kept as written, as encoding/json keeps a RawMessage (null
		// included); only a list is a chain (Payload.chain).
		if !json.Valid(v) {
			return false
		}
		p.Chained = json.RawMessage(v)
		return true
	}
	// encoding/json matches keys without regard to case: leave "Timeout"
	// and the like to it.
	for _, k := range envelopeKeys {
		if strings.EqualFold(key, k) {
			return false
		}
	}
	// A key dbqueue does not read: kept in the raw payload only, but it
	// must still be JSON for the payload to be.
	return json.Valid(v)
}

var envelopeKeys = []string{"uuid", "displayName", "job", "maxTries", "maxExceptions", "failOnTimeout",
	"backoff", "timeout", "retryUntil", "data", "delay", "createdAt", "exceptions", "headers", "batchId", "chained"}

func str(v []byte, dst *string) bool {
	if len(v) < 2 || v[0] != '"' {
		return false
	}
	inner := v[1 : len(v)-1]
	if bytes.IndexByte(inner, '\\') < 0 && !hasControl(inner) && utf8.Valid(inner) {
		*dst = string(inner)
		return true
	}
	return json.Unmarshal(v, dst) == nil // escapes, such as Laravel's App\\Jobs
}

func hasControl(b []byte) bool {
	for _, c := range b {
		if c < 0x20 {
			return true
		}
	}
	return false
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
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
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

// value returns the bytes of the JSON value at s.i: a string, an object or
// array (nesting and strings within skipped), or a literal up to the next
// delimiter. Its inside is validated by whoever reads it.
func (s *scanner) value() ([]byte, bool) {
	start := s.i
	if s.i >= len(s.b) {
		return nil, false
	}
	switch s.b[s.i] {
	case '"':
		if !s.skipString() {
			return nil, false
		}
	case '{', '[':
		depth := 0
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case '"':
				if !s.skipString() {
					return nil, false
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
			s.i++
			if depth == 0 {
				return s.b[start:s.i], true
			}
		}
		return nil, false
	default:
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return s.b[start:s.i], s.i > start
			}
			s.i++
		}
		return nil, false
	}
	return s.b[start:s.i], true
}

// skipString moves past the string that starts at s.i.
func (s *scanner) skipString() bool {
	s.i++ // opening quote
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '\\':
			s.i += 2
			continue
		case '"':
			s.i++
			return true
		}
		s.i++
	}
	return false
}
