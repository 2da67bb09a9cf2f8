package dbqueue_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/failed"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

func ids(infos []dbqueue.JobInfo) []int64 {
	var out []int64
	for _, j := range infos {
		out = append(out, j.ID)
	}
	return out
}

// A search finds jobs by each key, newest first, and reads no more than
// its window: a match older than the window is not found until the next
// window is asked for.
func TestSearchJobsByEachKeyWithinItsWindow(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		odd := strings.Repeat("ü ", 85) // 255 bytes with a trailing space
		mail := push(t, q, dbqueue.NewJob{Name: `App\Jobs\SendMail`, Queue: "mail", Data: map[string]string{"to": "ann@example.com"}})
		other := push(t, q, dbqueue.NewJob{Name: "Report", Queue: odd, Data: map[string]string{"note": "50% <off>"}})
		newest := push(t, q, dbqueue.NewJob{Name: `App\Jobs\SendMail`, Queue: "mail", Data: map[string]string{"to": "bob@example.com"}})
		info, err := q.Job(ctx, other)
		if err != nil {
			t.Fatal(err)
		}
		find := func(s dbqueue.Search) dbqueue.SearchResult[dbqueue.JobInfo] {
			t.Helper()
			res, err := q.SearchJobs(ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		for name, c := range map[string]struct {
			s    dbqueue.Search
			want []int64
		}{
			"id":         {dbqueue.Search{ID: mail}, []int64{mail}},
			"uuid":       {dbqueue.Search{UUID: info.Payload.UUID}, []int64{other}},
			"name":       {dbqueue.Search{Name: `App\Jobs\SendMail`}, []int64{newest, mail}},
			"name, part": {dbqueue.Search{Name: "SendMail"}, nil},
			"queue":      {dbqueue.Search{Queue: odd}, []int64{other}},
			"queue, cut": {dbqueue.Search{Queue: strings.TrimSpace(odd)}, nil},
			"text":       {dbqueue.Search{Text: "bob@"}, []int64{newest}},
			"text, like": {dbqueue.Search{Text: "50%"}, []int64{other}},
			"text, case": {dbqueue.Search{Text: "BOB@"}, nil},
			"all keys":   {dbqueue.Search{Name: `App\Jobs\SendMail`, Queue: "mail", Text: "ann@"}, []int64{mail}},
		} {
			if got := ids(find(c.s).Matches); !slices.Equal(got, c.want) {
				t.Errorf("search by %s: %v, want %v", name, got, c.want)
			}
		}
		// A window of the newest two rows misses the oldest match and says so.
		res := find(dbqueue.Search{Name: `App\Jobs\SendMail`, Scan: 2})
		if !slices.Equal(ids(res.Matches), []int64{newest}) || res.Scanned != 2 || res.Complete || res.Oldest != other {
			t.Fatalf("windowed search: %v scanned %d oldest %d complete %v", ids(res.Matches), res.Scanned, res.Oldest, res.Complete)
		}
		res = find(dbqueue.Search{Name: `App\Jobs\SendMail`, Scan: 2, BeforeID: res.Oldest})
		if !slices.Equal(ids(res.Matches), []int64{mail}) || res.Scanned != 1 || !res.Complete {
			t.Fatalf("next window: %v scanned %d complete %v", ids(res.Matches), res.Scanned, res.Complete)
		}
		if res := find(dbqueue.Search{Text: "example.com", Limit: 1}); !slices.Equal(ids(res.Matches), []int64{newest}) {
			t.Fatalf("limit 1: %v", ids(res.Matches))
		}
		for _, bad := range []dbqueue.Search{{Scan: dbqueue.MaxSearchScan + 1}, {Limit: -1}, {Limit: dbqueue.MaxSearchLimit + 1}} {
			if _, err := q.SearchJobs(ctx, bad); err == nil {
				t.Errorf("search %+v accepted", bad)
			}
		}
	})
}

// Failed jobs are found by uuid (their own column), name, queue and text
// in the payload or the exception.
func TestSearchFailedJobs(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		push(t, q, dbqueue.NewJob{Name: "Charge", Data: map[string]string{"card": "4242"}})
		push(t, q, dbqueue.NewJob{Name: "Ship", Queue: "ship"})
		for _, queue := range []string{"default", "ship"} {
			job := reserve(t, q, 1, queue)[0]
			if err := q.Fail(ctx, job, errors.New("declined by "+job.Name())); err != nil {
				t.Fatal(err)
			}
		}
		store, err := failed.New(q)
		if err != nil {
			t.Fatal(err)
		}
		list, err := store.List(ctx, failed.Filter{})
		if err != nil || len(list) != 2 {
			t.Fatalf("list: %v, %v", list, err)
		}
		ship, charge := list[0], list[1]
		for name, c := range map[string]struct {
			s    dbqueue.Search
			want []string
		}{
			"uuid":      {dbqueue.Search{UUID: charge.UUID}, []string{charge.UUID}},
			"id":        {dbqueue.Search{ID: ship.ID}, []string{ship.UUID}},
			"name":      {dbqueue.Search{Name: "Ship"}, []string{ship.UUID}},
			"queue":     {dbqueue.Search{Queue: "ship"}, []string{ship.UUID}},
			"payload":   {dbqueue.Search{Text: "4242"}, []string{charge.UUID}},
			"exception": {dbqueue.Search{Text: "declined by"}, []string{ship.UUID, charge.UUID}},
		} {
			res, err := store.Search(ctx, c.s)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, j := range res.Matches {
				got = append(got, j.UUID)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("failed search by %s: %v, want %v", name, got, c.want)
			}
		}
	})
}

// A queue's Redactor rewrites every payload it shows — Job, Jobs,
// SearchJobs, failed Find, List and Search — and a search cannot find a
// redacted value by guessing it; a worker still gets the payload whole.
func TestRedactorOnEveryRead(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t, dbqueue.WithRedactor(dbqueue.RedactFields("data.password", "data.cards.number")))
		data := map[string]any{"user": "ann", "password": "hunter2", "cards": []map[string]string{{"number": "4242"}, {"number": "5555"}}}
		id := push(t, q, dbqueue.NewJob{Name: "Login", Data: data})
		hidden := func(where string, payload []byte) {
			t.Helper()
			if strings.Contains(string(payload), "hunter2") || strings.Contains(string(payload), "4242") || !strings.Contains(string(payload), dbqueue.Redacted) || !strings.Contains(string(payload), "ann") {
				t.Errorf("%s shows %s", where, payload)
			}
		}
		info, err := q.Job(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		hidden("Job", info.RawPayload)
		hidden("Job's decoded data", info.Payload.Data)
		page, err := q.Jobs(ctx, dbqueue.JobFilter{})
		if err != nil || len(page) != 1 {
			t.Fatal(page, err)
		}
		hidden("Jobs", page[0].RawPayload)
		res, err := q.SearchJobs(ctx, dbqueue.Search{Text: "ann"})
		if err != nil || len(res.Matches) != 1 {
			t.Fatal(res, err)
		}
		hidden("SearchJobs", res.Matches[0].RawPayload)
		if res, err := q.SearchJobs(ctx, dbqueue.Search{Text: "hunter2"}); err != nil || len(res.Matches) != 0 {
			t.Fatalf("a search for a redacted value found %d jobs (%v)", len(res.Matches), err)
		}

		job := reserve(t, q, 1)[0]
		if !strings.Contains(string(job.RawPayload), "hunter2") {
			t.Fatalf("the worker's payload was redacted: %s", job.RawPayload)
		}
		if err := q.Fail(ctx, job, errors.New("no")); err != nil {
			t.Fatal(err)
		}
		store, err := failed.New(q)
		if err != nil {
			t.Fatal(err)
		}
		fj, err := store.Find(ctx, job.Payload.UUID)
		if err != nil {
			t.Fatal(err)
		}
		hidden("failed Find", fj.Payload)
		list, err := store.List(ctx, failed.Filter{})
		if err != nil || len(list) != 1 {
			t.Fatal(list, err)
		}
		hidden("failed List", list[0].Payload)
		fres, err := store.Search(ctx, dbqueue.Search{Name: "Login"})
		if err != nil || len(fres.Matches) != 1 {
			t.Fatal(fres, err)
		}
		hidden("failed Search", fres.Matches[0].Payload)
		if fres, err := store.Search(ctx, dbqueue.Search{Text: "hunter2"}); err != nil || len(fres.Matches) != 0 {
			t.Fatalf("a failed search for a redacted value found %d (%v)", len(fres.Matches), err)
		}
	})
}

// RedactFields leaves a payload it finds nothing in as it is, and hides
// a payload that is not JSON whole.
func TestRedactFieldsEdges(t *testing.T) {
	r := dbqueue.RedactFields("data.secret")
	in := []byte(`{"job":"x", "data":{"open":1}}`)
	if out := r("x", in); string(out) != string(in) {
		t.Errorf("nothing to redact, payload changed: %s", out)
	}
	if out := r("x", []byte(`not json hunter2`)); strings.Contains(string(out), "hunter2") {
		t.Errorf("a payload that is not JSON shown: %s", out)
	}
	if out := r("x", []byte(`{"data":{"secret":"a"}} {"data":{"secret":"b"}}`)); strings.Contains(string(out), `"b"`) {
		t.Errorf("trailing JSON shown: %s", out)
	}
}
