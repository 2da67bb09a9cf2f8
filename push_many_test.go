package dbqueue_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// PushMany returns the ids of its jobs in order, whatever the path: one
// INSERT, or INSERTs of 1,000 rows in one transaction. Delays and
// absolute times are counted on the database's clock.
func TestPushManyLarge(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		// 12,345: thirteen INSERTs in one transaction; 1,999: two.
		for _, n := range []int{12_345, 1_999} {
			pushManyMixed(t, db, db.Queue(t), n)
		}
	})
}

// Every pgx query mode writes the same rows: exec and the simple protocol
// (what a transaction pooler such as PgBouncer needs) do not ask the
// server for parameter types, so a Go type that pgx maps to another
// PostgreSQL type than the statement's cast would store something else
// (payloads sent as [][]byte became bytea[], whose cast to text[] is hex).
func TestPushInEveryPgxExecMode(t *testing.T) {
	db := dbtest.New(t, dbqueue.Postgres)
	for _, mode := range dbtest.PgxExecModes {
		t.Run(mode, func(t *testing.T) {
			q, err := dbqueue.Open(ctx, dbtest.WithQuery(db.DSN, "default_query_exec_mode", mode))
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			// One job (one queue, no delay), then a mixed batch.
			id, err := q.Push(ctx, dbqueue.NewJob{Name: "single-" + mode})
			if err != nil {
				t.Fatal(err)
			}
			var payload string
			if err := db.SQL.QueryRow("SELECT payload FROM jobs WHERE id = $1", id).Scan(&payload); err != nil {
				t.Fatal(err)
			}
			if p, err := dbqueue.DecodePayload([]byte(payload)); err != nil || p.Name() != "single-"+mode {
				t.Fatalf("pushed %q, stored %.60q (%v)", "single-"+mode, payload, err)
			}
			db.Exec(t, "DELETE FROM jobs")
			pushManyMixed(t, db, q, 1_999)
			db.Exec(t, "DELETE FROM jobs")
		})
	}
}

// pushManyMixed pushes n jobs over two queues, some delayed, some at a time,
// and checks every row against the id PushMany returned for it.
func pushManyMixed(t *testing.T, db *dbtest.DB, q *dbqueue.Queue, n int) {
	if _, err := q.Push(ctx, dbqueue.NewJob{Name: "before"}); err != nil {
		t.Fatal(err)
	}
	runAt := time.Unix(2_000_000_000, 0)
	jobs := make([]dbqueue.NewJob, n)
	for i := range jobs {
		jobs[i] = dbqueue.NewJob{Name: fmt.Sprintf("job-%d", i), Queue: []string{"default", "other"}[i%2]}
		switch i % 1000 {
		case 7:
			jobs[i].Delay = time.Hour
		case 9:
			jobs[i].RunAt = runAt
		}
	}
	ids, err := q.PushMany(ctx, jobs)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != n {
		t.Fatalf("%d ids for %d jobs", len(ids), n)
	}
	rows, err := db.SQL.Query("SELECT id, queue, payload, available_at - created_at, available_at FROM jobs WHERE id >= " + fmt.Sprint(ids[0]) + " ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	i := 0
	for ; rows.Next(); i++ {
		var (
			id               int64
			queue, payload   string
			delay, available int64
		)
		if err := rows.Scan(&id, &queue, &payload, &delay, &available); err != nil {
			t.Fatal(err)
		}
		if i >= n || id != ids[i] {
			t.Fatalf("row %d has id %d; PushMany returned %v…", i, id, ids[i:min(i+3, n)])
		}
		p, err := dbqueue.DecodePayload([]byte(payload))
		if err != nil || p.Name() != jobs[i].Name || queue != jobs[i].Queue {
			t.Fatalf("id %d holds %q on %q (%v); want %q on %q", id, p.Name(), queue, err, jobs[i].Name, jobs[i].Queue)
		}
		switch i % 1000 {
		case 7:
			if delay < 3600 || delay > 3601 {
				t.Fatalf("job %d: delay %ds, want an hour", i, delay)
			}
		case 9:
			if available != runAt.Unix() {
				t.Fatalf("job %d: available_at %d, want %d", i, available, runAt.Unix())
			}
		default:
			if delay != 0 {
				t.Fatalf("job %d: delay %ds, want 0", i, delay)
			}
		}
	}
	if i != n {
		t.Fatalf("%d rows from the first returned id on, want %d", i, n)
	}
	got := reserve(t, q, 5, "other")
	if len(got) != 5 || got[0].Queue != "other" {
		t.Fatalf("reserved %d from other", len(got))
	}
}

// A payload's bytes and a queue's name come back as pushed whatever they
// hold — quotes, backslashes (Laravel's class names are full of them),
// control characters, characters outside the BMP — on every database, one
// job or many. On MySQL the driver writes the values into the statement
// (interpolateParams), so the test runs there twice: with the default
// sql_mode and with NO_BACKSLASH_ESCAPES, which changes what a backslash
// in a string literal means.
func TestPushKeepsEveryByte(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		dsns := []string{db.DSN}
		if db.Dialect == dbqueue.MySQL {
			sep := "?"
			if strings.Contains(db.DSN, "?") {
				sep = "&"
			}
			dsns = append(dsns, db.DSN+sep+"sql_mode=%27NO_BACKSLASH_ESCAPES%27")
		}
		for _, dsn := range dsns {
			q, err := dbqueue.Open(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			data := json.RawMessage(`{"s":"it's \"quoted\" \\ back\\\\slashed \\' \u0000 \n\t ☃ 😀 App\\Jobs\\Send"}`)
			queue := `q'\"😀`
			// No backslash: MySQL gets it quoted rather than in hex.
			plain := json.RawMessage(`{"s":"it's '' ? -- /* ☃ 😀 ` + "\x7f" + `"}`)
			// Too large to go as a literal: MySQL gets it as a parameter.
			large := json.RawMessage(`{"s":"` + strings.Repeat("it's ☃ ", 100_000) + `"}`)
			jobs := []dbqueue.NewJob{{Name: `App\Jobs\It's`, Queue: queue, Data: data}, {Name: "two", Queue: queue, Data: data, Delay: time.Second},
				{Name: "plain 'quoted'", Queue: queue, Data: plain}, {Name: "large", Queue: queue, Data: large}}
			ids, err := q.PushMany(ctx, jobs)
			if err != nil {
				t.Fatalf("%s: %v", dsn, err)
			}
			for i, id := range ids {
				var stored, gotQueue string
				if err := db.SQL.QueryRow(db.Dialect.Rebind("SELECT payload, queue FROM jobs WHERE id = ?"), id).Scan(&stored, &gotQueue); err != nil {
					t.Fatal(err)
				}
				p, err := dbqueue.DecodePayload([]byte(stored))
				if err != nil || p.Name() != jobs[i].Name || gotQueue != queue {
					t.Fatalf("job %d: stored %q on %q (%v); want name %q on %q", i, stored, gotQueue, err, jobs[i].Name, queue)
				}
				var got, want any
				if err := json.Unmarshal(p.Data, &got); err != nil {
					t.Fatal(err)
				}
				json.Unmarshal(jobs[i].Data.(json.RawMessage), &want)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("job %d: data %.200s, want %.200s", i, p.Data, jobs[i].Data)
				}
			}
			db.Exec(t, "DELETE FROM jobs")
		}
	})
}
