package dbqueue

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"
	"time"
)

// decodeStd is DecodePayload with encoding/json alone: the reference the
// fast path must agree with.
func decodeStd(raw []byte) (Payload, bool) {
	var p Payload
	if err := json.Unmarshal(raw, &p); err != nil || p.Job == "" {
		return Payload{}, false
	}
	return p, true
}

func FuzzDecodeFastAgreesWithEncodingJSON(f *testing.F) {
	for _, name := range []string{"string_job.json", "object_job.json", "object_job_retry_until.json"} {
		raw, err := os.ReadFile("testdata/laravel/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	for _, j := range []NewJob{
		{Name: "plain"},
		{Name: `App\Jobs\Mail@handle`, Data: map[string]any{"to": "ä@example.com", "n": []int{1, 2}, "s": `q"uote\`}},
		{Name: "all", MaxTries: 3, MaxExceptions: 2, Backoff: []time.Duration{time.Second, time.Minute}, Timeout: time.Minute, RetryUntil: time.Unix(1900000000, 0), FailOnTimeout: true, Data: "text"},
	} {
		raw, err := j.encode()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	for _, s := range []string{
		`{"job":"x","maxTries":"3","timeout":"60","backoff":[1,"2"],"delay":5.0,"exceptions":2,"extra":{"a":[1,{"b":"}"}]}}`,
		`{"job":"x","data":{"a":1},"unknown":bad}`,
		`{"job":"x","data":{"a":}`,
		`{"job":5}`, `{"job":"x"} trailing`, `{"job":"x","failOnTimeout":1}`, `{"jo\u0062":"x"}`,
		`{"job":"x","maxTries":1e2}`, `{"job":"tab	inside"}`, `[]`, `{}`, `{"job":"x",}`, `{"job":"x","data":"\ud800"}`,
		`{"uuid":"u","job":"x","retryUntil":null,"createdAt":1,"data":null}`,
		`{"job":"x","batchId":"b-1","chained":[{"queue":"q","delay":2,"payload":{"job":"y","data":[1]}}]}`,
		`{"job":"x","batchId":null,"chained":null}`, `{"job":"x","chained":{"a":1}}`, `{"job":"x","batchId":3}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		want, wantOK := decodeStd(raw)
		var got Payload
		gotOK := decodeFast(raw, &got) && got.Job != ""
		if !gotOK {
			return // DecodePayload falls back to encoding/json
		}
		if !wantOK {
			t.Fatalf("fast path accepted what encoding/json rejects: %q", raw)
		}
		if !reflect.DeepEqual(normalize(got), normalize(want)) {
			t.Fatalf("decoded differently:\nfast %+v\nstd  %+v\ninput %q", got, want, raw)
		}
	})
}

// normalize compares Data by its JSON value, not by its bytes.
func normalize(p Payload) Payload {
	if p.Data != nil {
		var v any
		_ = json.Unmarshal(p.Data, &v)
		b, _ := json.Marshal(v)
		p.Data = b
	}
	return p
}

// The fast path must actually be taken for the envelopes dbqueue and
// Laravel write; agreeing with encoding/json by always falling back to it
// would pass the fuzz test and cost every worker its CPU. (It once did:
// "data" fell through to the case-insensitive check and was refused.)
func TestDecodeFastTakesUsualPayloads(t *testing.T) {
	var raws [][]byte
	for _, name := range []string{"string_job.json", "object_job.json", "object_job_retry_until.json"} {
		raw, err := os.ReadFile("testdata/laravel/" + name)
		if err != nil {
			t.Fatal(err)
		}
		raws = append(raws, raw)
	}
	for _, j := range []NewJob{
		{Name: "plain"},
		{Name: "raw", Data: json.RawMessage(`{"num":1}`)},
		{Name: `App\Jobs\Mail@handle`, Data: map[string]any{"to": "ä@example.com", "n": []int{1, 2}}},
		{Name: "all", MaxTries: 3, MaxExceptions: 2, Backoff: []time.Duration{time.Second}, Timeout: time.Minute, RetryUntil: time.Unix(1900000000, 0), FailOnTimeout: true, Data: "text"},
	} {
		raw, err := j.encode()
		if err != nil {
			t.Fatal(err)
		}
		raws = append(raws, raw)
	}
	for _, raw := range raws {
		var p Payload
		if !decodeFast(raw, &p) || p.Job == "" {
			t.Errorf("fast path refused %s", raw)
		}
	}
}
