package dbqueue

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"testing"
	"time"
	"unsafe"
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

// Decoding a claimed row's payload allocates its uuid and the options it
// sets (Laravel's object job here: maxTries, timeout and a backoff list)
// and nothing else: job and display names repeat and are interned, data
// stays a slice of the row, and the Payload is the Job's own. A worker
// decodes one per job.
func TestDecodePayloadAllocations(t *testing.T) {
	laravel, err := os.ReadFile("testdata/laravel/object_job.json")
	if err != nil {
		t.Fatal(err)
	}
	ours, err := NewJob{Name: `App\Jobs\Mail@handle`, Data: map[string]any{"to": "a@example.com"}}.encode()
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		raw  []byte
		want float64
	}{"laravel": {laravel, 4}, "dbqueue": {ours, 1}} {
		raw := tc.raw
		var p Payload
		if err := decodePayload(raw, &p); err != nil {
			t.Fatal(err)
		}
		allocs := testing.AllocsPerRun(100, func() {
			if err := decodePayload(raw, &p); err != nil {
				t.Fatal(err)
			}
		})
		if allocs > tc.want {
			t.Errorf("%s payload: %.0f allocations per decode, want %.0f", name, allocs, tc.want)
		}
	}
}

// Interned names are the same string the next time, and a name that
// collides with another in the table is still decoded right.
func TestInternedNames(t *testing.T) {
	a := names.intern([]byte("App\\Jobs\\A"))
	b := names.intern([]byte("App\\Jobs\\A"))
	if a != b || unsafe.StringData(a) != unsafe.StringData(b) {
		t.Fatalf("interned %q twice, got two strings", a)
	}
	for i := range 2000 { // more names than entries: every one still right
		want := fmt.Sprintf("Job%d", i)
		if got := names.intern([]byte(want)); got != want {
			t.Fatalf("intern(%q) = %q", want, got)
		}
	}
}

// Laravel's backoff string "1,5,10" takes a path of its own; whatever it
// accepts it must read as the general path does.
func FuzzPlainBackoff(f *testing.F) {
	for _, s := range []string{`"1,5,10"`, `"0"`, `"1,,2"`, `" 1, 2 "`, `"-1"`, `"1,"`, `","`, `""`, `"9999999999"`, `"1\u002c2"`, `"`, `"007"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fast, ok := plainBackoff(data)
		if !ok {
			return
		}
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			t.Fatalf("%s: accepted what is not a JSON string: %v", data, err)
		}
		general, err := backoffList(s)
		if err != nil || !reflect.DeepEqual(fast, general) {
			t.Fatalf("%s: fast %v, general %v (%v)", data, fast, general, err)
		}
	})
}

// marshalPayload writes what json.Marshal writes, byte for byte, for any
// payload whose data is in json.Marshal's own form.
func FuzzMarshalPayload(f *testing.F) {
	f.Add("u-1", `App\Jobs\Mail`, `App\Jobs\Mail@handle`, 3, 0, true, 5, int64(1900000000), `{"a":"<b>&"}`, "batch", "k", "v\u2028\xff")
	f.Add("", "", "x", -1, 2, false, -1, int64(-5), `null`, "", "", "")
	f.Fuzz(func(t *testing.T, uuid, display, job string, tries, exceptions int, failOnTimeout bool, timeout int, until int64, data, batch, hk, hv string) {
		canonical, err := canonicalJSON([]byte(data))
		if err != nil {
			return
		}
		p := Payload{UUID: uuid, DisplayName: display, Job: job, FailOnTimeout: failOnTimeout, Data: canonical,
			Exceptions: exceptions, BatchID: batch}
		if tries >= 0 {
			p.MaxTries, p.MaxExceptions = &tries, &exceptions
			p.Backoff = Backoff{tries, exceptions}
		}
		if timeout >= 0 {
			s := Seconds(timeout)
			p.Timeout, p.Delay = &s, &s
			p.RetryUntil, p.CreatedAt = &until, &until
			p.Chained = canonical
		}
		if hk != "" || hv != "" {
			p.Headers = Headers{hk: hv, "second": data}
		}
		want, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := marshalPayload(&p); string(got) != string(want) {
			t.Fatalf("marshalPayload:\n%s\njson.Marshal:\n%s", got, want)
		}
	})
}

// canonicalJSON gives what json.Marshal gives for a json.RawMessage,
// whether it takes its shortcut or not.
func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{ "a" : 1 }`, `"<b>"`, "\"\u2028\"", `[1,2.5e3,"x\u00e9",null,true]`, `{"a":"\xff"}`, `01`, ` 1`, `1 `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		want, wantErr := json.Marshal(json.RawMessage(raw))
		got, err := canonicalJSON(raw)
		if (err == nil) != (wantErr == nil) || string(got) != string(want) {
			t.Fatalf("canonicalJSON(%q) = %q, %v; json.Marshal gives %q, %v", raw, got, err, want, wantErr)
		}
	})
}
