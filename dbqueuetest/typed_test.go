package dbqueuetest_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/dbqueuetest"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/migrations"
	"github.com/dbqueue/dbqueue/worker"
)

// chargeCard is a typed job of the application under test.
type chargeCard struct {
	Customer string `json:"customer"`
	Cents    int    `json:"cents"`
}

func (chargeCard) Kind() string { return "charge-card" }
func (chargeCard) JobOptions() dbqueue.JobOptions {
	return dbqueue.JobOptions{Queue: "billing", MaxTries: 2}
}

type receipt struct {
	Customer string `json:"customer"`
}

func (receipt) Kind() string { return "receipt" }

// checkout is application code under test: it enqueues a charge and a
// receipt.
func checkout(ctx context.Context, q *dbqueue.Queue, customer string, cents int) error {
	if _, err := dbqueue.PushArgs(ctx, q, chargeCard{Customer: customer, Cents: cents}); err != nil {
		return err
	}
	_, err := dbqueue.PushArgs(ctx, q, receipt{Customer: customer}, dbqueue.JobOptions{Queue: "billing"})
	return err
}

// NewDSN gives each test tables of its own on any server, PushedArgs and
// Work see and run its typed jobs, and the tables are gone afterwards.
func TestPushedArgsAndWorkOnEveryDialect(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		var tables dbqueue.Tables
		t.Run("test", func(t *testing.T) {
			q := dbqueuetest.NewDSN(t, db.DSN)
			tables = q.Tables()
			if tables.Jobs == "jobs" || !strings.HasPrefix(tables.Jobs, "dbqt_") {
				t.Fatalf("NewDSN uses tables %+v, want a dbqt_ set of its own", tables)
			}
			if _, err := db.SQL.Exec("SELECT 1 FROM " + tables.Jobs); err != nil {
				t.Fatalf("NewDSN's jobs table is not in the DSN's database: %v", err)
			}
			ctx := context.Background()
			if err := checkout(ctx, q, "ada", 1250); err != nil {
				t.Fatal(err)
			}
			if err := checkout(ctx, q, "bob", 99); err != nil {
				t.Fatal(err)
			}
			// T's queue (billing) by default; only jobs of T's kind.
			charges := dbqueuetest.PushedArgs[chargeCard](t, q)
			if !slices.Equal(charges, []chargeCard{{"ada", 1250}, {"bob", 99}}) {
				t.Fatalf("PushedArgs[chargeCard] = %+v", charges)
			}
			if r := dbqueuetest.PushedArgs[receipt](t, q); len(r) != 0 {
				t.Fatalf("receipts on the default queue: %+v, want none", r)
			}
			if r := dbqueuetest.PushedArgs[receipt](t, q, "billing"); len(r) != 2 || r[1].Customer != "bob" {
				t.Fatalf("receipts on billing: %+v", r)
			}

			w, err := worker.New(q, worker.Options{Queues: []string{"billing"}, Concurrency: 1, Tries: 3})
			if err != nil {
				t.Fatal(err)
			}
			var charged []string
			worker.Register(w, func(ctx context.Context, job *dbqueue.Job, c chargeCard) error {
				if c.Cents < 100 {
					return errors.New("below the minimum charge")
				}
				charged = append(charged, c.Customer) // Concurrency 1 below
				return nil
			})
			// No receipt handler here: those jobs wait for another worker.
			res := dbqueuetest.Work(t, w)
			if len(res) != 4 {
				t.Fatalf("Work ran %d jobs, want 4", len(res))
			}
			got := map[string]worker.Outcome{}
			for _, r := range res {
				var who struct{ Customer string }
				if err := r.Job.Decode(&who); err != nil {
					t.Fatal(err)
				}
				got[r.Job.Name()+" "+who.Customer] = r.Outcome
			}
			want := map[string]worker.Outcome{
				"charge-card ada": worker.OutcomeDone,
				"charge-card bob": worker.OutcomeReleased, // 1 of its 2 tries
				"receipt ada":     worker.OutcomeReleased, // unknown kind here
				"receipt bob":     worker.OutcomeReleased,
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s: %s, want %s", k, got[k], v)
				}
			}
			if len(dbqueuetest.PushedArgs[chargeCard](t, q)) != 1 {
				t.Errorf("the done charge is still in the queue")
			}
		})
		// The test's tables went with it, goose's version and lock tables
		// too.
		mt := migrations.Tables{Jobs: tables.Jobs, Failed: tables.Failed}
		for _, table := range []string{tables.Jobs, tables.Failed, mt.SignalsTable(), mt.VersionTable(), mt.VersionTable() + "_lock"} {
			if _, err := db.SQL.Exec("SELECT 1 FROM " + table); err == nil {
				t.Errorf("table %s outlived its test", table)
			}
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 0 {
			t.Errorf("the database's own jobs table got %d jobs", n)
		}
	})
}

func TestNewEnvSkipsWhenUnset(t *testing.T) {
	var skipped bool
	t.Run("unset", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		dbqueuetest.NewEnv(t, "DBQUEUETEST_NO_SUCH_VARIABLE")
		t.Error("NewEnv did not skip")
	})
	if !skipped {
		t.Fatal("NewEnv on an unset variable did not skip the test")
	}
	t.Run("postgres", func(t *testing.T) {
		q := dbqueuetest.NewEnv(t, dbtest.EnvPostgres)
		if q.Dialect() != dbqueue.Postgres {
			t.Fatalf("dialect %s", q.Dialect())
		}
	})
}
