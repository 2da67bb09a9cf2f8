package dbqueue

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Redactor rewrites a job's payload before it is shown: name is the job's
// handler name (Payload.Name: Laravel's displayName or job), payload the
// payload column as stored. It returns the payload to show, typically the
// same JSON with secret fields replaced. It must not change payload in
// place, and must be safe for concurrent use.
//
// A function rather than a list of fields, because the application knows
// its own jobs: it can redact by job name, parse its own data types, or
// drop the payload altogether. RedactFields builds one from field paths,
// which is also what the dbqueue command's --redact flag takes.
type Redactor func(name string, payload []byte) []byte

// WithRedactor makes every job the queue reads for showing — Job, Jobs,
// SearchJobs, and package failed's Find, List and Search, and so the
// dashboard and the dbqueue command built on them — pass its payload
// through r. Jobs a worker reserves are never redacted: handlers get the
// payload as stored.
func WithRedactor(r Redactor) Option {
	return func(q *Queue) error {
		q.redact = r
		return nil
	}
}

// Redact passes a payload through the queue's Redactor (WithRedactor),
// or returns it as it is when the queue has none. Packages that show
// payloads the queue did not read itself call it.
func (q *Queue) Redact(name string, payload []byte) []byte {
	if q.redact == nil || payload == nil {
		return payload
	}
	return q.redact(name, payload)
}

// Redacted is the text that replaces a redacted value.
const Redacted = "[redacted]"

// RedactFields returns a Redactor that replaces the values at the given
// paths with Redacted, in every job. A path is object keys joined by
// dots, from the payload's top: "data.password" is the password key of
// the job's data; a key is matched exactly, and an array on the way is
// walked element by element ("data.cards.number" redacts the number of
// every card). A payload that is not JSON is replaced whole, since what it
// holds cannot be told apart; one where no path matches is returned as it
// is. Laravel's object jobs carry their data as one serialized PHP string
// ("data.command"): redact it whole.
func RedactFields(paths ...string) Redactor {
	split := make([][]string, 0, len(paths))
	for _, p := range paths {
		if p = strings.TrimSpace(p); p != "" {
			split = append(split, strings.Split(p, "."))
		}
	}
	return func(_ string, payload []byte) []byte {
		if len(split) == 0 {
			return payload
		}
		var v any
		dec := json.NewDecoder(bytes.NewReader(payload))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil || dec.More() {
			return []byte(`"` + Redacted + ` (the payload is not JSON)"`)
		}
		changed := false
		for _, path := range split {
			changed = redactPath(v, path) || changed
		}
		if !changed {
			return payload
		}
		out, err := json.Marshal(v)
		if err != nil {
			return []byte(`"` + Redacted + `"`)
		}
		return out
	}
}

// redactPath replaces the values at path under v, and reports whether it
// found any.
func redactPath(v any, path []string) bool {
	switch t := v.(type) {
	case map[string]any:
		next, ok := t[path[0]]
		if !ok {
			return false
		}
		if len(path) == 1 {
			t[path[0]] = Redacted
			return true
		}
		return redactPath(next, path[1:])
	case []any:
		found := false
		for _, e := range t {
			found = redactPath(e, path) || found
		}
		return found
	}
	return false
}
