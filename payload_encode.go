package dbqueue

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"unicode/utf8"
)

// marshalPayload writes p exactly as json.Marshal does — Laravel's key
// order, its nulls, HTML-safe string escapes, sorted header keys — without
// reflection: encoding/json was a third of a push's CPU. p.Data and
// p.Chained must hold JSON in json.Marshal's own form (see canonicalJSON);
// FuzzMarshalPayload holds the two encoders to the same bytes.
func marshalPayload(p *Payload) []byte {
	b := make([]byte, 0, 192+len(p.Data)+len(p.Chained))
	b = append(b, `{"uuid":`...)
	b = appendJSONString(b, p.UUID)
	b = append(b, `,"displayName":`...)
	b = appendJSONString(b, p.DisplayName)
	b = append(b, `,"job":`...)
	b = appendJSONString(b, p.Job)
	b = append(b, `,"maxTries":`...)
	b = appendIntPtr(b, p.MaxTries)
	b = append(b, `,"maxExceptions":`...)
	b = appendIntPtr(b, p.MaxExceptions)
	b = append(b, `,"failOnTimeout":`...)
	b = strconv.AppendBool(b, p.FailOnTimeout)
	b = append(b, `,"backoff":`...)
	if len(p.Backoff) == 0 {
		b = append(b, "null"...)
	} else {
		b = append(b, '"')
		for i, n := range p.Backoff {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(n), 10)
		}
		b = append(b, '"')
	}
	b = append(b, `,"timeout":`...)
	if p.Timeout == nil {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, int64(*p.Timeout), 10)
	}
	b = append(b, `,"retryUntil":`...)
	b = appendInt64Ptr(b, p.RetryUntil)
	b = append(b, `,"data":`...)
	if p.Data == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, p.Data...)
	}
	if p.Delay != nil {
		b = append(b, `,"delay":`...)
		b = strconv.AppendInt(b, int64(*p.Delay), 10)
	}
	if p.CreatedAt != nil {
		b = append(b, `,"createdAt":`...)
		b = strconv.AppendInt(b, *p.CreatedAt, 10)
	}
	if p.Exceptions != 0 {
		b = append(b, `,"exceptions":`...)
		b = strconv.AppendInt(b, int64(p.Exceptions), 10)
	}
	if p.BatchID != "" {
		b = append(b, `,"batchId":`...)
		b = appendJSONString(b, p.BatchID)
	}
	if len(p.Chained) > 0 {
		b = append(b, `,"chained":`...)
		b = append(b, p.Chained...)
	}
	if len(p.Headers) > 0 {
		b = append(b, `,"headers":{`...)
		for i, k := range slices.Sorted(maps.Keys(p.Headers)) {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			b = appendJSONString(b, p.Headers[k])
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

// canonicalJSON is raw as json.Marshal writes a json.RawMessage: checked,
// compacted, with <, >, & and U+2028/U+2029 escaped. JSON already in that
// form, as json.Marshal's own output is, comes back as it is.
func canonicalJSON(raw []byte) (json.RawMessage, error) {
	s := scanner{b: raw}
	if s.skipValue(0) && s.i == len(raw) && !s.spaced &&
		!bytes.ContainsAny(raw, "<>&") && !bytes.Contains(raw, lineSep) && !bytes.Contains(raw, paraSep) {
		return raw, nil
	}
	return json.Marshal(json.RawMessage(raw))
}

// U+2028 and U+2029 in UTF-8: json.Marshal escapes them.
var lineSep, paraSep = []byte("\u2028"), []byte("\u2029")

func appendIntPtr(b []byte, v *int) []byte {
	if v == nil {
		return append(b, "null"...)
	}
	return strconv.AppendInt(b, int64(*v), 10)
}

func appendInt64Ptr(b []byte, v *int64) []byte {
	if v == nil {
		return append(b, "null"...)
	}
	return strconv.AppendInt(b, *v, 10)
}

const hexDigits = "0123456789abcdef"

// appendJSONString is encoding/json's string encoder with HTML escaping,
// as json.Marshal uses it: invalid UTF-8 becomes U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
