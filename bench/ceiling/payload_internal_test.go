package ceiling

import (
	"encoding/json"
	"testing"
)

// Every row the ceilings push carries a payload of its own: valid JSON,
// Payload's size, a uuid no other row has.
func TestPayloadsAreDistinctJSON(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range append(payloads(3), payloads(2)...) {
		var v struct{ UUID string }
		if err := json.Unmarshal([]byte(p), &v); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if len(p) != len(Payload) || seen[v.UUID] || len(v.UUID) != 36 {
			t.Fatalf("payload %s: uuid %q repeated or malformed, or size %d != %d", p, v.UUID, len(p), len(Payload))
		}
		seen[v.UUID] = true
	}
}
