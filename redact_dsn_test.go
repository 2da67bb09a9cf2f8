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
	"github.com/dbqueue/dbqueue/migrations"
)

// BadDSNs are DSNs an operator gets wrong, each carrying the password
// S3cr3tPw in a form people write: URL user info holding an unescaped
// character, query parameters in odd casing, URL-encoded or repeated,
// PostgreSQL key=value, and go-sql-driver/mysql's own form. Want is what
// the error must still say.
var badDSNs = []struct{ dsn, want string }{
	{"postgres://u:S3cr3tPw#x@127.0.0.1:1/test", ""},
	{"postgres://u:S3cr3tPw/x@127.0.0.1:5432/test", "port"},
	{"postgres://u:S3cr3tPw%zz@127.0.0.1:5432/test", ""},
	{"postgres://u@127.0.0.1:5432/test?PassWord=S3cr3tPw&sslmode=bogus", "sslmode"},
	{"postgres://u@127.0.0.1:5432/test?pass%77ord=S3cr3tPw&sslmode=bogus", "sslmode"},
	{"postgresql://u@127.0.0.1:5432/test?sslpassword=S3cr3tPw&connect_timeout=x", "connect_timeout"},
	{"postgres://u@127.0.0.1:5432/test?password=S3cr3tPw&password=S3cr3tPw&port=x", "port"},
	{"host=127.0.0.1 password=S3cr3tPw dbname=test", "write it as a URL, postgres://"},
	{"host=::1 PASSWORD='S3cr3tPw' dbname=test", "write it as a URL, postgres://"},
	{"mysql://u:S3cr3tPw@127.0.0.1:3306", "names no database"},
	{"mysql://u:S3cr%zz3tPw@127.0.0.1:3306/test", "MySQL DSN"},
	{"mysql://u:S3cr3tPw@127.0.0.1:3306/test?parseTime=maybe", "MySQL DSN"},
	{"u:S3cr3tPw@tcp(127.0.0.1:3306)/test?parseTime=maybe", "bool"},
	{"u:S3cr3tPw@tcp(127.0.0.1:3306", "MySQL DSN"},
	{"u:S3cr/3tPw@tcp(127.0.0.1:3306)/test", ""},
	{"sqlite:/nonexistent/dir/q.db?_auth_pass=S3cr3tPw", "unable to open"},
}

// leakedSecret reports which piece of S3cr3tPw, if any, s shows.
func leakedSecret(s string) string {
	const secret = "S3cr3tPw"
	for i := 0; i+4 <= len(secret); i++ {
		if strings.Contains(s, secret[i:i+4]) {
			return secret[i : i+4]
		}
	}
	return ""
}

// A bad DSN's error, from Open and from the migrations, says what is
// wrong without showing the password the DSN carries.
func TestBadDSNErrorsHideThePassword(t *testing.T) {
	for _, c := range badDSNs {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		q, err := dbqueue.Open(ctx, c.dsn)
		if err == nil {
			q.Close()
			t.Errorf("Open(%q) succeeded", c.dsn)
		}
		errs := map[string]error{"Open": err, "migrations.UpDSN": migrations.UpDSN(ctx, c.dsn)}
		_, err = dbqueue.ParseDSN(c.dsn)
		if err != nil {
			errs["ParseDSN"] = err
		}
		if db, _, err := dbqueue.OpenSQL(c.dsn); err != nil {
			errs["OpenSQL"] = err
		} else {
			errs["OpenSQL+Ping"] = db.PingContext(ctx)
			db.Close()
		}
		cancel()
		for entry, err := range errs {
			if err == nil {
				t.Errorf("%s(%q) succeeded", entry, c.dsn)
				continue
			}
			if p := leakedSecret(err.Error()); p != "" {
				t.Errorf("%s(%q) shows %q of the password: %v", entry, c.dsn, p, err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s(%q) = %v: want it to say %q", entry, c.dsn, err, c.want)
			}
		}
	}
}
