package dbqueue

import (
	"math"
	"testing"
)

// A payload that decodes is one a worker can finish: when its job
// succeeds, its chain's next link (if any) is built without error, on a
// queue the column holds, due within a time.Duration, with a payload that
// decodes in its turn. The worker cannot retry its way past an error
// here (see checkChained).
func FuzzChainAcceptedCanContinue(f *testing.F) {
	for _, s := range []string{
		`{"job":"x","chained":[{"queue":"q","payload":{"job":"y"}}]}`,
		`{"job":"x","chained":[{"queue":"q","delay":5,"payload":{"job":"y"}},{"queue":"r","runAt":1900000000,"payload":{"job":"z","chained":[]}}]}`,
		`{"job":"x","chained":[{"queue":"q","payload":{"job":"y","chained":[{"queue":"","payload":{}}]}}]}`,
		`{"job":"x","chained":[{"queue":"q","delay":-1,"payload":{"job":"y"}}]}`,
		`{"job":"x","chained":[{"queue":"q","payload":{"job":"y"}},{"queue":"q","payload":[]}]}`,
		`{"job":"x","chained":[]}`, `{"job":"x","chained":{"queue":"q"}}`, `{"job":"x","chained":"[1]"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		job := &Job{ID: 1, RawPayload: raw}
		if decodePayload(raw, &job.Payload) != nil || !job.linked() {
			return
		}
		next, err := chainNext(job)
		if err != nil {
			t.Fatalf("payload %q decodes, but its chain cannot go on: %v", raw, err)
		}
		for _, row := range next {
			if checkQueueName(row.Queue) != nil || !row.Absolute && (row.At < 0 || row.At > maxLinkDelay) {
				t.Fatalf("payload %q: next link on queue %q at %d (absolute %v)", raw, row.Queue, row.At, row.Absolute)
			}
			if _, err := DecodePayload(row.Payload); err != nil {
				t.Fatalf("payload %q: the next link's payload %q does not decode: %v", raw, row.Payload, err)
			}
		}
	})
}

// Any chain PushChain writes decodes, whatever the delay of its links: a
// time.Duration's longest is within the bound that keeps now + delay
// from overflowing.
func TestChainWithLongestDelayDecodes(t *testing.T) {
	next, err := NewJob{Name: "y"}.encode()
	if err != nil {
		t.Fatal(err)
	}
	first, err := NewJob{Name: "x"}.encode()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := withKey(first, "chained", []ChainLink{{Queue: "q", Delay: wholeSeconds(math.MaxInt64), Payload: next}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodePayload(raw); err != nil {
		t.Fatalf("a chain link delayed by the longest time.Duration: %v", err)
	}
}
