package dbqueue_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/driver/dbqpgx"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// sendMail is a typed job whose kind names a PHP class and method, so a
// Laravel worker can run it too, and whose type sets its own options.
type sendMail struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
}

const mailKind = `App\Jobs\SendMail@handle`

func (sendMail) Kind() string { return mailKind }

func (sendMail) JobOptions() dbqueue.JobOptions {
	return dbqueue.JobOptions{Queue: "mail", MaxTries: 3, Backoff: []time.Duration{10 * time.Second}, Timeout: 20 * time.Second}
}

// resize is a typed job with no options of its own.
type resize struct {
	Image string `json:"image"`
}

func (resize) Kind() string { return "resize" }

type noKind struct{}

func (noKind) Kind() string { return "" }

func TestPushArgsWritesAStringJobLaravelReads(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		// The push's MaxTries beats the type's 3; the type's other
		// options stay.
		id, err := dbqueue.PushArgs(ctx, q, sendMail{To: "ada@example.com", Subject: "hi"}, dbqueue.JobOptions{MaxTries: 5})
		if err != nil {
			t.Fatal(err)
		}
		if jobs := reserve(t, q, 10); len(jobs) != 0 {
			t.Fatalf("%d jobs on the default queue; the type's Queue is mail", len(jobs))
		}
		jobs := reserve(t, q, 10, "mail")
		if len(jobs) != 1 || jobs[0].ID != id {
			t.Fatalf("reserved %d jobs from mail, want job %d", len(jobs), id)
		}
		p := jobs[0].Payload
		if p.Job != `App\Jobs\SendMail@handle` || p.DisplayName != `App\Jobs\SendMail` || jobs[0].Name() != mailKind {
			t.Fatalf("job %q, displayName %q: want the kind as Laravel's Class@method", p.Job, p.DisplayName)
		}
		if p.MaxTries == nil || *p.MaxTries != 5 || p.Timeout == nil || *p.Timeout != 20 || len(p.Backoff) != 1 || p.Backoff[0] != 10 {
			t.Fatalf("payload options %+v: want maxTries 5 (push), timeout 20 and backoff 10 (type)", p)
		}
		// What a Laravel string job gets: "job" as written, "backoff" as
		// Laravel's string, and the args as a JSON object ($data array).
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(jobs[0].RawPayload, &raw); err != nil {
			t.Fatal(err)
		}
		if got := string(raw["job"]); got != `"App\\Jobs\\SendMail@handle"` {
			t.Errorf("raw job %s", got)
		}
		if got := string(raw["backoff"]); got != `"10"` {
			t.Errorf("raw backoff %s, want Laravel's \"10\"", got)
		}
		if got := string(raw["data"]); got != `{"to":"ada@example.com","subject":"hi"}` {
			t.Errorf("raw data %s", got)
		}
		var got sendMail
		if err := jobs[0].Decode(&got); err != nil || got.To != "ada@example.com" {
			t.Fatalf("decoded %+v, %v", got, err)
		}
	})
}

func TestJobForMergesOptions(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	j := dbqueue.JobFor(delayed{}, dbqueue.JobOptions{RunAt: at}, dbqueue.JobOptions{Queue: "later", FailOnTimeout: true})
	// RunAt replaces the type's Delay (setting both is an error at push),
	// later options override earlier ones, zero fields keep the type's.
	if j.Name != "delayed" || j.Delay != 0 || !j.RunAt.Equal(at) || j.Queue != "later" || j.MaxTries != 2 || !j.FailOnTimeout {
		t.Fatalf("JobFor = %+v", j)
	}
	if j.Data != (delayed{}) {
		t.Fatalf("Data = %#v, want the args", j.Data)
	}
	j = dbqueue.JobFor(delayed{}, dbqueue.JobOptions{Backoff: []time.Duration{}})
	if j.Delay != time.Hour || j.Backoff == nil || len(j.Backoff) != 0 {
		t.Fatalf("an empty Backoff should override the type's, Delay stay: %+v", j)
	}
}

type delayed struct{}

func (delayed) Kind() string { return "delayed" }
func (delayed) JobOptions() dbqueue.JobOptions {
	return dbqueue.JobOptions{Delay: time.Hour, MaxTries: 2, Queue: "q", Backoff: []time.Duration{time.Second}}
}

func TestPushArgsMany(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		ids, err := dbqueue.PushArgsMany(ctx, q, []resize{{"a.png"}, {"b.png"}})
		if err != nil || len(ids) != 2 || ids[0] >= ids[1] {
			t.Fatalf("ids %v, %v", ids, err)
		}
		// A mix of kinds, and an option for every one of them.
		mixed, err := dbqueue.PushArgsMany(ctx, q, []dbqueue.JobArgs{resize{"c.png"}, sendMail{To: "x"}}, dbqueue.JobOptions{Queue: "bulk"})
		if err != nil {
			t.Fatal(err)
		}
		jobs := reserve(t, q, 10, "bulk")
		if len(jobs) != 2 || jobs[0].ID != mixed[0] || jobs[0].Name() != "resize" || jobs[1].Name() != mailKind {
			t.Fatalf("bulk queue holds %d jobs, want resize then sendMail", len(jobs))
		}
		if jobs[1].Payload.MaxTries == nil || *jobs[1].Payload.MaxTries != 3 {
			t.Fatalf("the type's MaxTries is lost when the push sets only Queue")
		}
		if jobs := reserve(t, q, 10); len(jobs) != 2 {
			t.Fatalf("%d resize jobs on the default queue, want 2", len(jobs))
		}
	})
}

func TestPushArgsErrors(t *testing.T) {
	q := dbtest.New(t, dbqueue.SQLite).Queue(t)
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"nil args", func() error { _, err := dbqueue.PushArgs(ctx, q, nil); return err }(), "args[0] is nil"},
		{"empty kind", func() error { _, err := dbqueue.PushArgs(ctx, q, noKind{}); return err }(), "noKind.Kind() returned an empty kind"},
		{"nil queue", func() error { _, err := dbqueue.PushArgs(ctx, nil, resize{}); return err }(), "nil queue"},
		{"many", func() error { _, err := dbqueue.PushArgsMany(ctx, q, []dbqueue.JobArgs{resize{}, nil}); return err }(), "args[1] is nil"},
		{"bad option", func() error {
			_, err := dbqueue.PushArgs(ctx, q, resize{}, dbqueue.JobOptions{Delay: -time.Second})
			return err
		}(), "negative Delay"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, c.err, c.want)
		}
	}
	if n := total(t, q); n != 0 {
		t.Fatalf("%d jobs pushed by failed calls", n)
	}
}

func total(t *testing.T, q *dbqueue.Queue) int64 {
	t.Helper()
	s, err := q.Size(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	return s.Total()
}

func TestPushArgsTx(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		tx, err := db.SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dbqueue.PushArgsTx(ctx, q, tx, resize{"rolled-back.png"}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		tx, err = db.SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids, err := dbqueue.PushArgsTx(ctx, q, tx, resize{"kept.png"}, sendMail{To: "y"})
		if err != nil || len(ids) != 2 {
			t.Fatalf("ids %v, %v", ids, err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		jobs := reserve(t, q, 10, "default", "mail")
		if len(jobs) != 2 || jobs[0].ID != ids[0] || jobs[1].ID != ids[1] || jobs[1].Queue != "mail" {
			t.Fatalf("want the 2 committed jobs (resize, then sendMail on mail), got %d", len(jobs))
		}
		var r resize
		if err := jobs[0].Decode(&r); err != nil || r.Image != "kept.png" {
			t.Fatalf("decoded %+v, %v", r, err)
		}
		if _, err := dbqueue.PushArgsTx(ctx, q, nil, resize{}); err == nil {
			t.Fatal("PushArgsTx on a nil tx succeeded")
		}
	})
}

func TestPushArgsInPgxTransaction(t *testing.T) {
	pool, q := pgxQueue(t)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dbqpgx.PushArgsTx(ctx, q, tx, resize{"rolled-back.png"}); err != nil {
		t.Fatal(err)
	}
	_ = tx.Rollback(ctx)
	tx, err = pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := dbqpgx.PushArgsTx(ctx, q, tx, sendMail{To: "z"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dbqpgx.PushArgsTx(ctx, q, tx, nil); err == nil || !strings.Contains(err.Error(), "args[0] is nil") {
		t.Fatalf("nil args: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	jobs := reserve(t, q, 10, "mail")
	if len(jobs) != 1 || jobs[0].ID != ids[0] || jobs[0].Name() != mailKind {
		t.Fatalf("want only the committed sendMail on mail, got %d", len(jobs))
	}
}

// rebuildIndex is a typed job whose type makes every push unique: by
// kind and args, until the job finishes, for at most an hour.
type rebuildIndex struct {
	Account int `json:"account"`
}

func (rebuildIndex) Kind() string { return "rebuild-index" }

func (rebuildIndex) JobOptions() dbqueue.JobOptions {
	return dbqueue.JobOptions{Queue: "index", Unique: &dbqueue.Unique{For: time.Hour}}
}

// A type's Unique applies to every typed push — plain, many, in a
// database/sql transaction — and a push's Unique replaces it; JobFor
// carries it, and clearing it pushes without a lock.
func TestPushArgsTypeUnique(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		first, err := dbqueue.PushArgs(ctx, q, rebuildIndex{Account: 1})
		if err != nil {
			t.Fatal(err)
		}
		again, err := dbqueue.PushArgs(ctx, q, rebuildIndex{Account: 1})
		if err != nil || again != first {
			t.Fatalf("PushArgs of a queued unique job: %d, %v; want the queued job %d", again, err, first)
		}
		id, dup, err := dbqueue.PushArgsUnique(ctx, q, rebuildIndex{Account: 1})
		if err != nil || !dup || id != first {
			t.Fatalf("PushArgsUnique: %d, duplicate %v, %v; want a duplicate of %d", id, dup, err, first)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM dbqueue_unique WHERE job_id = ? AND expires_at BETWEEN "+db.Now()+" + 3590 AND "+db.Now()+" + 3600", first); n != 1 {
			t.Fatalf("job %d's lock does not end within the type's hour", first)
		}

		// The key comes from the args: another account is another job.
		ids, err := dbqueue.PushArgsMany(ctx, q, []rebuildIndex{{Account: 1}, {Account: 2}, {Account: 2}})
		if err != nil {
			t.Fatal(err)
		}
		if ids[0] != first || ids[1] == first || ids[2] != ids[1] {
			t.Fatalf("PushArgsMany ids %v: want [%d, new, the same new]", ids, first)
		}

		// A push's Unique replaces the type's: per queue, so on another
		// queue it is a new job.
		other, dup, err := dbqueue.PushArgsUnique(ctx, q, rebuildIndex{Account: 1},
			dbqueue.JobOptions{Queue: "index-eu", Unique: &dbqueue.Unique{PerQueue: true}})
		if err != nil || dup || other == first {
			t.Fatalf("PushArgsUnique with a push's Unique: %d, duplicate %v, %v; want a new job", other, dup, err)
		}

		// In a database/sql transaction: PushArgsTx applies the type's
		// Unique; PushArgsUniqueTx reports the duplicate; a rollback
		// takes a new lock away.
		tx, err := db.SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		txIDs, err := dbqueue.PushArgsTx(ctx, q, tx, rebuildIndex{Account: 1}, rebuildIndex{Account: 3})
		if err != nil {
			t.Fatal(err)
		}
		if txIDs[0] != first || txIDs[1] == first {
			t.Fatalf("PushArgsTx ids %v: want [%d, new]", txIDs, first)
		}
		if id, dup, err := dbqueue.PushArgsUniqueTx(ctx, q, tx, rebuildIndex{Account: 3}); err != nil || !dup || id != txIDs[1] {
			t.Fatalf("PushArgsUniqueTx in the same transaction: %d, duplicate %v, %v; want a duplicate of %d", id, dup, err, txIDs[1])
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if _, dup, err := dbqueue.PushArgsUnique(ctx, q, rebuildIndex{Account: 3}); err != nil || dup {
			t.Fatalf("after the rollback: duplicate %v, %v; want a new job", dup, err)
		}

		// JobFor carries the type's Unique into a NewJob; cleared, the
		// job is pushed without a lock.
		j := dbqueue.JobFor(rebuildIndex{Account: 1})
		if j.Unique == nil || j.Unique.For != time.Hour {
			t.Fatalf("JobFor's Unique %+v, want the type's", j.Unique)
		}
		j.Unique = nil
		forced, err := q.Push(ctx, j)
		if err != nil || forced == first {
			t.Fatalf("Push without the lock: %d, %v; want a new job", forced, err)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs WHERE queue = 'index'"); n != 4 {
			t.Fatalf("%d jobs on index, want 4 (accounts 1, 2, 3 and the forced 1)", n)
		}
	})
}

// The type's Unique applies in a pgx transaction too.
func TestPushArgsTypeUniqueInPgxTransaction(t *testing.T) {
	pool, q := pgxQueue(t)
	first, err := dbqueue.PushArgs(ctx, q, rebuildIndex{Account: 1})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	ids, err := dbqpgx.PushArgsTx(ctx, q, tx, rebuildIndex{Account: 1}, rebuildIndex{Account: 2})
	if err != nil || ids[0] != first || ids[1] == first {
		t.Fatalf("dbqpgx.PushArgsTx: %v, %v; want [%d, new]", ids, err, first)
	}
	id, dup, err := dbqpgx.PushArgsUniqueTx(ctx, q, tx, rebuildIndex{Account: 2})
	if err != nil || !dup || id != ids[1] {
		t.Fatalf("dbqpgx.PushArgsUniqueTx: %d, duplicate %v, %v; want a duplicate of %d", id, dup, err, ids[1])
	}
	if _, _, err := dbqpgx.PushArgsUniqueTx(ctx, q, tx, nil); err == nil || !strings.Contains(err.Error(), "dbqpgx.PushArgsUniqueTx: args is nil") {
		t.Fatalf("nil args: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := reserve(t, q, 10, "index"); len(got) != 2 {
		t.Fatalf("%d jobs on index, want 2 (accounts 1 and 2)", len(got))
	}
}
