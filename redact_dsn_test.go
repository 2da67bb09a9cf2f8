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
