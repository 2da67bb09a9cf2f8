package dbqueue

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"strconv"
	"strings"
	"time"
)

// Payload is Laravel's job envelope, the JSON kept in jobs.payload. Pointer
// fields are null when the job leaves the value to the worker.
type Payload struct {
	UUID        string `json:"uuid"`
	DisplayName string `json:"displayName"`
	// Job is the handler name. Laravel string jobs use "Class@method";
	// Laravel object jobs use "Illuminate\Queue\CallQueuedHandler@call" and
	// are routed by DisplayName.
	Job           string   `json:"job"`
	MaxTries      *int     `json:"maxTries"`
	MaxExceptions *int     `json:"maxExceptions"`
	FailOnTimeout bool     `json:"failOnTimeout"`
	Backoff       Backoff  `json:"backoff"`
	Timeout       *Seconds `json:"timeout"`
	RetryUntil    *int64   `json:"retryUntil"`
	// Data is the job's argument, kept as the raw JSON it was pushed with.
	Data json.RawMessage `json:"data"`
	// Delay and CreatedAt are written by newer Laravel versions; dbqueue
	// reads them and leaves them out.
	Delay     *Seconds `json:"delay,omitempty"`
	CreatedAt *int64   `json:"createdAt,omitempty"`
	// Exceptions counts the handler errors of earlier attempts, for
	// maxExceptions. Laravel keeps this count in its cache; dbqueue keeps it
	// in the payload, where it survives with the job.
	Exceptions int `json:"exceptions,omitempty"`
	// BatchID names the job's batch (Queue.Batch): its row in job_batches
	// counts the job when it finishes. Laravel keeps it inside the
	// serialized command; dbqueue keeps it here, and PHP ignores the key.
	BatchID string `json:"batchId,omitempty"`
	// Chained holds the jobs that follow this one in its chain
	// (Queue.PushChain), as a JSON list of ChainLink. Laravel keeps them
	// inside the serialized command; dbqueue keeps them here.
	Chained json.RawMessage `json:"chained,omitempty"`
	// Headers are string metadata that travel with the job but are not
	// its argument: a trace id, a tenant, who pushed it. Push middleware
	// (WithPushMiddleware) sets them with NewJob.SetHeader; handler
	// middleware reads them here.
	Headers Headers `json:"headers,omitempty"`
}

// Headers is the payload's "headers" object. A value of another shape,
// written by some other producer, reads as no headers rather than making
// the whole payload unreadable; the raw payload keeps it as it was.
type Headers map[string]string

// UnmarshalJSON reads an object of strings, and anything else as nil.
func (h *Headers) UnmarshalJSON(data []byte) error {
	var m map[string]string
	if json.Unmarshal(data, &m) != nil {
		m = nil
	}
	*h = m
	return nil
}

// laravelObjectJob is the handler every Laravel object job names.
const laravelObjectJob = `Illuminate\Queue\CallQueuedHandler@call`

// Name is the name a handler is registered under: the display name for a
// Laravel object job, the job name otherwise.
func (p *Payload) Name() string {
	if p.Job == laravelObjectJob && p.DisplayName != "" {
		return p.DisplayName
	}
	return p.Job
}

// Backoff is a list of retry delays in seconds. Laravel 8 writes it as the
// string "1,5,10"; dbqueue reads that, a number or a JSON list, and writes
// the string form so PHP workers understand it.
type Backoff []int

// UnmarshalJSON accepts null, a number, "1,5,10" or [1,5,10].
func (b *Backoff) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	switch {
	case bytes.Equal(data, []byte("null")):
		*b = nil
		return nil
	case len(data) > 0 && data[0] == '[':
		var list []Seconds
		if err := json.Unmarshal(data, &list); err != nil {
			return fmt.Errorf("backoff: %w", err)
		}
		out := make(Backoff, len(list))
		for i, s := range list {
			out[i] = int(s)
		}
		*b = out
		return nil
	case len(data) > 0 && data[0] == '"':
		if out, ok := plainBackoff(data); ok {
			*b = out
			return nil
		}
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return fmt.Errorf("backoff: %w", err)
		}
		out, err := backoffList(s)
		if err != nil {
			return err
		}
		*b = out
		return nil
	}
	var s Seconds
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("backoff: %w", err)
	}
	*b = Backoff{int(s)}
	return nil
}

// backoffList reads Laravel's comma-separated backoff string.
func backoffList(s string) (Backoff, error) {
	var out Backoff
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		n, err := strconv.Atoi(part)
		if err != nil {
			return nil, fmt.Errorf("backoff %q: %q is not a whole number of seconds", s, part)
		}
		out = append(out, n)
	}
	return out, nil
}

// plainBackoff reads Laravel's "1,5,10" with one allocation, the list; it
// leaves anything else (escapes, spaces, signs, empty parts) to the
// general path.
func plainBackoff(data []byte) (Backoff, bool) {
	if len(data) < 3 || data[0] != '"' || data[len(data)-1] != '"' {
		return nil, false
	}
	inner := data[1 : len(data)-1]
	out := make(Backoff, 0, bytes.Count(inner, []byte(","))+1)
	n, digits := 0, 0
	for i, c := range inner {
		switch {
		case c >= '0' && c <= '9' && digits < 9:
			n, digits = n*10+int(c-'0'), digits+1
		case c == ',' && digits > 0:
			out, n, digits = append(out, n), 0, 0
		default:
			return nil, false
		}
		if i == len(inner)-1 {
			if digits == 0 {
				return nil, false
			}
			out = append(out, n)
		}
	}
	return out, true
}

// MarshalJSON writes null or Laravel's "1,5,10".
func (b Backoff) MarshalJSON() ([]byte, error) {
	if len(b) == 0 {
		return []byte("null"), nil
	}
	parts := make([]string, len(b))
	for i, n := range b {
		parts[i] = strconv.Itoa(n)
	}
	return json.Marshal(strings.Join(parts, ","))
}

// Delay returns the backoff before the retry that follows the given
// attempt (1-based): backoff[attempts-1], the last value repeating.
func (b Backoff) Delay(attempts int) time.Duration {
	if len(b) == 0 {
		return 0
	}
	i := min(max(attempts-1, 0), len(b)-1)
	return secondsDuration(int64(b[i]))
}

// maxSeconds is the most seconds a time.Duration holds.
const maxSeconds = int64(math.MaxInt64 / time.Second)

// secondsDuration turns payload seconds into a Duration, saturating where
// the product would overflow (a producer may write any number).
func secondsDuration(s int64) time.Duration {
	switch {
	case s > maxSeconds:
		return math.MaxInt64
	case s < -maxSeconds:
		return math.MinInt64
	}
	return time.Duration(s) * time.Second
}

// Seconds is a whole number of seconds in a payload. It reads numbers and
// numeric strings, as PHP may write either.
type Seconds int

// UnmarshalJSON accepts 60, 60.0 and "60".
func (s *Seconds) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '"' {
		var str string
		if err := json.Unmarshal(data, &str); err != nil {
			return err
		}
		data = []byte(strings.TrimSpace(str))
	}
	f, err := strconv.ParseFloat(string(data), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("%s is not a number of seconds", data)
	}
	// Any number a producer wrote is kept in range, the same on every
	// platform (a float beyond int's range converts differently on each):
	// the worker refuses what is beyond MaxDelay and says so.
	*s = Seconds(math.Max(math.Min(f, float64(maxSeconds)), -float64(maxSeconds)))
	return nil
}

// Duration converts to a time.Duration, saturating at its limits.
func (s Seconds) Duration() time.Duration { return secondsDuration(int64(s)) }

// MaxDelay is the longest delay, timeout or backoff dbqueue writes or
// accepts: 100 years. Keeping every duration this far below
// time.Duration's 292-year range means adding a margin or converting to
// seconds can never wrap.
const MaxDelay = 100 * 365 * 24 * time.Hour

// DecodePayload parses a jobs.payload value. It fails on anything that is
// not a JSON object with a job name; what it could read (such as the uuid)
// is returned with the error.
func DecodePayload(raw []byte) (Payload, error) {
	var p Payload
	err := decodePayload(raw, &p)
	return p, err
}

// decodePayload is DecodePayload into *p, which a claim has in its Job
// already: no copy of the struct per job.
func decodePayload(raw []byte, p *Payload) error {
	if decodeFast(raw, p) && p.Job != "" {
		return checkChained(p.Chained)
	}
	*p = Payload{}
	if err := json.Unmarshal(raw, p); err != nil {
		var id struct {
			UUID string `json:"uuid"`
		}
		_ = json.Unmarshal(raw, &id)
		*p = Payload{UUID: id.UUID}
		return fmt.Errorf("dbqueue: malformed payload: %w", err)
	}
	if p.Job == "" {
		return fmt.Errorf("dbqueue: malformed payload: no \"job\" name")
	}
	return checkChained(p.Chained)
}

// checkChained refuses a "chained" list (see ChainLink) whose next link a
// worker could not push when the job succeeds: one that is not a list of
// links, names no queue or one too long, delays past any clock, or
// carries a payload that does not decode. Such a job would run, succeed,
// and then stay reserved, to run again after every retry_after; refused
// here, it goes to failed_jobs before it runs, saying why. Other
// producers write this key by hand; PushChain never writes a bad one.
// maxLinkDelay is the longest delay PushChain writes: a time.Duration's
// longest, rounded up to whole seconds. More could overflow the
// database's now + delay.
const maxLinkDelay = maxSeconds + 1

// checkLinkTime reports whether a chain link's time can be written: a
// delay from 0 to maxLinkDelay seconds, or a runAt that is not negative.
// Decoding a payload and pushing its next link both ask it, so a link the
// one accepts the other writes.
func checkLinkTime(l ChainLink) error {
	if l.Delay < 0 || l.Delay > maxLinkDelay || l.RunAt < 0 {
		return fmt.Errorf("delay %d and runAt %d: the delay must be from 0 to %d seconds (292 years), the runAt a Unix time from 0", l.Delay, l.RunAt, maxLinkDelay)
	}
	return nil
}

func checkChained(chained json.RawMessage) error {
	if len(chained) == 0 || chained[0] != '[' {
		return nil // no chain: a worker reads only a list
	}
	var links []ChainLink
	if err := json.Unmarshal(chained, &links); err != nil {
		return fmt.Errorf("dbqueue: malformed payload: \"chained\" is not a list of chain links {\"queue\", \"delay\" or \"runAt\", \"payload\"}: %w", err)
	}
	for i, l := range links {
		if err := checkQueueName(l.Queue); err != nil {
			return fmt.Errorf("dbqueue: malformed payload: \"chained\" link %d: %w", i, err)
		}
		if err := checkLinkTime(l); err != nil {
			return fmt.Errorf("dbqueue: malformed payload: \"chained\" link %d: %w", i, err)
		}
		if _, err := DecodePayload(l.Payload); err != nil {
			return fmt.Errorf("dbqueue: malformed payload: \"chained\" link %d: %w", i, err)
		}
	}
	return nil
}

// NewJob describes a job to push. Only Name is required; zero values leave
// the choice to the worker, as null does in Laravel's payload.
type NewJob struct {
	// Name routes the job to its handler. For a Laravel worker to run it,
	// name a PHP class and method: `App\Jobs\SendMail@handle`.
	Name string
	// Data is the job's argument, encoded as JSON. json.RawMessage and
	// []byte holding JSON are stored as they are.
	Data any
	// Queue overrides the queue's default queue name.
	Queue string
	// Delay makes the job available this long after the database's now.
	Delay time.Duration
	// RunAt makes the job available at this time. Set Delay or RunAt, not both.
	RunAt time.Time
	// MaxTries is how many attempts the job gets (payload maxTries).
	MaxTries int
	// MaxExceptions fails the job after this many handler errors, even when
	// tries remain (payload maxExceptions).
	MaxExceptions int
	// Backoff lists retry delays; the last repeats (payload backoff).
	Backoff []time.Duration
	// Timeout is how long one attempt may run (payload timeout).
	Timeout time.Duration
	// RetryUntil fails the job once this time has passed (payload retryUntil).
	RetryUntil time.Time
	// FailOnTimeout fails the job, instead of releasing it, when it times out.
	FailOnTimeout bool
	// Headers are written to the payload's "headers" object (see
	// Payload.Headers). Laravel's workers ignore them.
	Headers map[string]string
	// Unique, when set, makes Push, PushMany, PushTx and dbqpgx.PushTx
	// push the job as PushUnique does: not queued while a live lock holds
	// its key, the id returned then being the holder's. PushUnique and
	// PushUniqueTx also say whether it was a duplicate. A typed job's
	// type can set it for every push (JobOptions.Unique). Chains, batches
	// and periodic schedules refuse it.
	Unique *Unique
	// Concurrency, when set, runs the job under a concurrency limit that
	// every worker process obeys when it claims (see Concurrency). Chains
	// refuse it.
	Concurrency *Concurrency
}

// SetHeader sets one header on a copy of the job's headers, so a push
// middleware never writes into a map the caller still holds (one map is
// often shared by many NewJobs).
func (j *NewJob) SetHeader(key, value string) {
	h := make(map[string]string, len(j.Headers)+1)
	maps.Copy(h, j.Headers)
	h[key] = value
	j.Headers = h
}

// maxQueueName is the width of the queue column.
const maxQueueName = 255

func checkQueueName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("dbqueue: empty queue name: name a queue (or name none, in NewJob.Queue or Reserve's list, for the default queue)")
	case len(name) > maxQueueName:
		return fmt.Errorf("dbqueue: queue name of %d bytes is longer than the %d the queue column holds: use a shorter name", len(name), maxQueueName)
	}
	return nil
}

// wholeSeconds rounds a duration up to whole seconds, Laravel's unit,
// without the overflow that adding a second to a huge duration would cause.
func wholeSeconds(d time.Duration) int64 {
	s := int64(d / time.Second)
	if d%time.Second > 0 {
		s++
	}
	return s
}

// encode validates j and builds its payload JSON.
func (j NewJob) encode() ([]byte, error) {
	p, err := j.envelope()
	if err != nil {
		return nil, err
	}
	// Laravel's key order, and the nulls PHP expects.
	return marshalPayload(&p), nil
}

// envelope validates j and builds its payload.
func (j NewJob) envelope() (Payload, error) {
	if strings.TrimSpace(j.Name) == "" {
		return Payload{}, fmt.Errorf("dbqueue: NewJob.Name is empty: name the handler that runs the job")
	}
	switch {
	case j.Delay < 0:
		return Payload{}, fmt.Errorf("dbqueue: job %q: negative Delay %v: use 0 to run it now, or RunAt for a time", j.Name, j.Delay)
	case j.Delay > 0 && !j.RunAt.IsZero():
		return Payload{}, fmt.Errorf("dbqueue: job %q: set Delay or RunAt, not both", j.Name)
	case j.MaxTries < 0 || j.MaxExceptions < 0 || j.Timeout < 0:
		return Payload{}, fmt.Errorf("dbqueue: job %q: MaxTries, MaxExceptions and Timeout must not be negative", j.Name)
	case j.Timeout > MaxDelay:
		return Payload{}, fmt.Errorf("dbqueue: job %q: Timeout %v is longer than MaxDelay (100 years): a worker would refuse it", j.Name, j.Timeout)
	}
	for _, b := range j.Backoff {
		if b > MaxDelay {
			return Payload{}, fmt.Errorf("dbqueue: job %q: Backoff %v is longer than MaxDelay (100 years): a worker would refuse it", j.Name, b)
		}
	}
	data, err := encodeData(j.Data)
	if err != nil {
		return Payload{}, fmt.Errorf("dbqueue: job %q: data is not JSON-encodable: %w", j.Name, err)
	}
	display, _, _ := strings.Cut(j.Name, "@")
	p := Payload{
		UUID:          newUUID(),
		DisplayName:   display,
		Job:           j.Name,
		FailOnTimeout: j.FailOnTimeout,
		Data:          data,
		Headers:       j.Headers,
	}
	if j.MaxTries > 0 {
		p.MaxTries = &j.MaxTries
	}
	if j.MaxExceptions > 0 {
		p.MaxExceptions = &j.MaxExceptions
	}
	for _, d := range j.Backoff {
		if d < 0 {
			return Payload{}, fmt.Errorf("dbqueue: job %q: negative backoff %v", j.Name, d)
		}
		p.Backoff = append(p.Backoff, int(wholeSeconds(d)))
	}
	if j.Timeout > 0 {
		s := Seconds(wholeSeconds(j.Timeout))
		p.Timeout = &s
	}
	if !j.RetryUntil.IsZero() {
		u := j.RetryUntil.Unix()
		p.RetryUntil = &u
	}
	return p, nil
}

// withKey returns the payload JSON raw with key set to value, keeping every
// other key (Laravel's and anyone else's) as it was.
func withKey(raw []byte, key string, value any) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("dbqueue: malformed payload: %w", err)
	}
	v, err := json.Marshal(value)
	if err != nil {
		return nil, err
	}
	m[key] = v
	return json.Marshal(m)
}

func encodeData(v any) (json.RawMessage, error) {
	switch d := v.(type) {
	case nil:
		return json.RawMessage("null"), nil
	case json.RawMessage:
		if !json.Valid(d) {
			return nil, fmt.Errorf("json.RawMessage holds invalid JSON")
		}
		return canonicalJSON(d)
	case []byte:
		if !json.Valid(d) {
			return nil, fmt.Errorf("[]byte data must hold JSON; wrap other bytes in a struct")
		}
		return canonicalJSON(d)
	}
	return json.Marshal(v)
}

// newUUID returns a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	hex.Encode(s[9:13], b[4:6])
	hex.Encode(s[14:18], b[6:8])
	hex.Encode(s[19:23], b[8:10])
	hex.Encode(s[24:36], b[10:16])
	s[8], s[13], s[18], s[23] = '-', '-', '-', '-'
	return string(s[:])
}
