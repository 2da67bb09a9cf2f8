package dbqueue_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	_ "github.com/dbqueue/dbqueue/driver/dbqmysql"
	_ "github.com/dbqueue/dbqueue/driver/dbqpgx"
	_ "github.com/dbqueue/dbqueue/driver/dbqsqlite"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/migrations"
)

// A bad DSN's error, from Open and from the migrations, says what is
// wrong without showing the password the DSN carries.
func TestBadDSNErrorsHideThePassword(t *testing.T) {
	for _, c := range dbtest.BadDSNs {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		q, err := dbqueue.Open(ctx, c.DSN)
		if err == nil {
			q.Close()
			t.Errorf("Open(%q) succeeded", c.DSN)
		}
		errs := map[string]error{"Open": err, "migrations.UpDSN": migrations.UpDSN(ctx, c.DSN)}
		_, err = dbqueue.ParseDSN(c.DSN)
		if err != nil {
			errs["ParseDSN"] = err
		}
		if db, _, err := dbqueue.OpenSQL(c.DSN); err != nil {
			errs["OpenSQL"] = err
		} else {
			errs["OpenSQL+Ping"] = db.PingContext(ctx)
			db.Close()
		}
		cancel()
		for entry, err := range errs {
			if err == nil {
				t.Errorf("%s(%q) succeeded", entry, c.DSN)
				continue
			}
			if p := dbtest.LeakedSecret(err.Error()); p != "" {
				t.Errorf("%s(%q) shows %q of the password: %v", entry, c.DSN, p, err)
			}
			if !strings.Contains(err.Error(), c.Want) {
				t.Errorf("%s(%q) = %v: want it to say %q", entry, c.DSN, err, c.Want)
			}
		}
	}
}

// WithListenDSN's DSN, bad, gets the same: the error says what is wrong,
// not the password.
func TestBadListenDSNHidesThePassword(t *testing.T) {
	db := dbtest.New(t, dbqueue.Postgres)
	for _, dsn := range []string{
		"postgres://u@127.0.0.1:5432/test?PassWord=S3cr3tPw&sslmode=bogus",
		"postgres://u:S3cr3tPw%zz@127.0.0.1:5432/test",
		"host=127.0.0.1 sslpassword=S3cr3tPw sslmode=bogus",
	} {
		q, err := dbqueue.Open(context.Background(), db.DSN, dbqueue.WithListenDSN(dsn))
		if err == nil {
			q.Close()
			t.Errorf("WithListenDSN(%q) accepted", dsn)
			continue
		}
		if p := dbtest.LeakedSecret(err.Error()); p != "" {
			t.Errorf("WithListenDSN(%q) shows %q of the password: %v", dsn, p, err)
		}
		if !strings.Contains(err.Error(), "WithListenDSN") {
			t.Errorf("WithListenDSN(%q): %v: want it to name the option", dsn, err)
		}
	}
}
