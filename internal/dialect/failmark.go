package dialect

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// FailedByKey is the payload key under which the copy of a payload in
// failed_jobs names the reservation that moved it there (the row's id and
// its claim's token, "id.token.attempts", with the attempt that failed it). failed_jobs has only Laravel's columns,
// and its uuid, exception and payload are the same whichever holder of a
// job failed it: without the mark, a stale holder whose reservation ran
// out could take the new holder's failure, with the same text, for its
// own committed work (FailedAlready) and fire the failure hooks a second
// time. Laravel ignores the key, and its queue:retry carries it along
// harmlessly; dbqueue's reads of failed_jobs (scanFailed) take it off
// again, so a listed or retried payload is the job's own.
const FailedByKey = "dbqueueFailedBy"

// MarkFailed is payload with FailedByKey naming the reservation (id,
// token) and the attempt that failed (attempts), which a retry from
// failed_jobs writes into the error history with the failure's text. The key is appended to the payload's own text, kept byte for
// byte, so UnmarkFailed gives the payload back exactly. A payload already
// marked (failed before, retried by PHP, which re-encodes) is re-encoded
// with the new mark; one that is not a JSON object (a malformed row) is
// returned as it is.
func MarkFailed(payload []byte, id, token int64, attempts int) []byte {
	mark := strconv.FormatInt(id, 10) + "." + strconv.FormatInt(token, 10) + "." + strconv.Itoa(attempts)
	obj := bytes.TrimSpace(payload)
	if len(obj) < 2 || obj[0] != '{' || obj[len(obj)-1] != '}' || !json.Valid(obj) {
		return payload
	}
	if bytes.Contains(obj, []byte(`"`+FailedByKey+`"`)) {
		var m map[string]json.RawMessage
		if json.Unmarshal(obj, &m) != nil {
			return payload
		}
		m[FailedByKey], _ = json.Marshal(mark)
		out, err := json.Marshal(m)
		if err != nil {
			return payload
		}
		return out
	}
	out := make([]byte, 0, len(obj)+len(FailedByKey)+len(mark)+6)
	out = append(out, obj[:len(obj)-1]...)
	if len(bytes.TrimSpace(obj[1:len(obj)-1])) > 0 {
		out = append(out, ',')
	}
	return append(out, `"`+FailedByKey+`":"`+mark+`"}`...)
}

// UnmarkFailed takes off the mark MarkFailed appended, giving back the
// payload as the job carried it. A payload without that trailing mark is
// returned as it is.
func UnmarkFailed(payload []byte) []byte {
	n := len(payload)
	if n == 0 || payload[n-1] != '}' {
		return payload
	}
	// `"dbqueueFailedBy":"<digits>.<digits>[.<digits>]"}` at the very end.
	i := n - 2
	if i < 0 || payload[i] != '"' {
		return payload
	}
	j := i - 1
	for j >= 0 && (payload[j] >= '0' && payload[j] <= '9' || payload[j] == '.' || payload[j] == '-') {
		j--
	}
	head := `"` + FailedByKey + `":"`
	start := j + 1 - len(head)
	if j == i-1 || start < 1 || string(payload[start:j+1]) != head {
		return payload
	}
	switch payload[start-1] {
	case ',':
		start--
	case '{':
	default:
		return payload
	}
	out := make([]byte, 0, start+1)
	out = append(out, payload[:start]...)
	return append(out, '}')
}

// FailedAttempt is the attempt that failed, as the mark MarkFailed
// appended to payload names it: 0 when the payload carries no such mark
// (Laravel's worker failed the job, or dbqueue before the mark named the
// attempt).
func FailedAttempt(payload []byte) int {
	if len(UnmarkFailed(payload)) == len(payload) {
		return 0
	}
	head := []byte(`"` + FailedByKey + `":"`)
	mark := payload[bytes.LastIndex(payload, head)+len(head) : len(payload)-2]
	parts := bytes.Split(mark, []byte("."))
	if len(parts) != 3 {
		return 0
	}
	n, err := strconv.Atoi(string(parts[2]))
	if err != nil || n < 0 {
		return 0
	}
	return n
}
