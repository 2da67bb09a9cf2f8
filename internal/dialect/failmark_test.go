package dialect

import "testing"

// A payload marked as failed by a reservation comes back byte for byte
// when the mark is taken off; payloads that are not objects, or were
// re-encoded with the key inside, are left as they are.
func TestFailedMarkRoundTrip(t *testing.T) {
	for _, p := range []string{`{"uuid":"u","data":{"a":1}}`, `{}`, `{ "uuid" : "u" }`, `{"x":"}"}`} {
		marked := MarkFailed([]byte(p), 12, 3, 7)
		if string(marked) == p {
			t.Errorf("%s: not marked", p)
		}
		if got := string(UnmarkFailed(marked)); got != p {
			t.Errorf("%s: marked %s, unmarked %s", p, marked, got)
		}
		if got := FailedAttempt(marked); got != 7 {
			t.Errorf("%s: marked %s names attempt %d, want 7", p, marked, got)
		}
		if again := MarkFailed([]byte(p), 12, 4, 7); string(again) == string(marked) {
			t.Errorf("%s: two reservations leave the same mark %s", p, again)
		}
	}
	for _, p := range []string{`{not json`, `[1]`, ``, `{"dbqueueFailedBy":"1.2","a":1}`} {
		if got := string(UnmarkFailed([]byte(p))); got != p {
			t.Errorf("UnmarkFailed(%s) = %s, want it unchanged", p, got)
		}
	}
	if got := string(MarkFailed([]byte(`{not json`), 1, 1, 1)); got != `{not json` {
		t.Errorf("a malformed payload was changed: %s", got)
	}
	remarked := MarkFailed([]byte(`{"dbqueueFailedBy":"1.2","a":1}`), 1, 3, 2)
	if string(remarked) != `{"a":1,"dbqueueFailedBy":"1.3.2"}` {
		t.Errorf("re-marked payload %s", remarked)
	}
	// A mark written before it named the attempt, and none at all, name
	// attempt 0: unknown.
	for _, p := range []string{`{"a":1,"dbqueueFailedBy":"1.3"}`, `{"a":1}`, `{"dbqueueFailedBy":"1.3.x"}`, `{"a":"\"dbqueueFailedBy\":\"1.2.3\"}"}`} {
		if got := FailedAttempt([]byte(p)); got != 0 {
			t.Errorf("FailedAttempt(%s) = %d, want 0", p, got)
		}
	}
	if got := string(UnmarkFailed([]byte(`{"a":1,"dbqueueFailedBy":"1.3"}`))); got != `{"a":1}` {
		t.Errorf("an older mark is not taken off: %s", got)
	}
}
