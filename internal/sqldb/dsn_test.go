package sqldb

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// dsnForms are DSNs of each form a user writes, each with its secret as
// written in it; a driver's error may quote that, or it decoded.
var dsnForms = []struct{ dsn, secret, plain string }{
	{"postgres://u:S3cr3tPw@127.0.0.1:5432/app", "S3cr3tPw", ""},
	{"postgresql://u:S3cr3tPw@127.0.0.1/app?sslmode=disable", "S3cr3tPw", ""},
	{"postgres://u@127.0.0.1/app?password=S3cr3tPw", "S3cr3tPw", ""},
	{"postgres://u@127.0.0.1/app?sslmode=require&sslpassword=S3cr3tPw", "S3cr3tPw", ""},
	{"postgres://u@127.0.0.1/app?PassWord=S3cr3tPw&sslmode=disable", "S3cr3tPw", ""},
	{"postgres://u@127.0.0.1/app?pass%77ord=S3cr3tPw", "S3cr3tPw", ""},
	{"postgres://u@127.0.0.1/app?password=S3%63r3tPw", "S3%63r3tPw", "S3cr3tPw"},
	{"postgres://u@127.0.0.1/app?password=S3cr3tPw&password=S3cr3tPw", "S3cr3tPw", ""},
	{"postgres://u:S3cr3tPw#x@127.0.0.1:5432/app", "S3cr3tPw#x", ""},
	{"postgres://u:S3cr3tPw/x@127.0.0.1:5432/app", "S3cr3tPw/x", ""},
	{"postgres://u:S3cr3tPw?x@127.0.0.1:5432/app", "S3cr3tPw?x", ""},
	{"postgres://u:S3cr3tPw%zz@127.0.0.1:5432/app", "S3cr3tPw%zz", ""},
	{"host=127.0.0.1 user=u password=S3cr3tPw dbname=app", "S3cr3tPw", ""},
	{"host=127.0.0.1 PASSWORD = 'S3cr3tPw' dbname=app", "S3cr3tPw", ""},
	{"host=127.0.0.1 password='S3cr 3tPw' dbname=app", "S3cr 3tPw", ""},
	{"mysql://u:S3cr3tPw@127.0.0.1:3306/app", "S3cr3tPw", ""},
	{"mysql://u:S3cr%403tPw@127.0.0.1:3306", "S3cr%403tPw", "S3cr@3tPw"},
	{"u:S3cr3tPw@tcp(127.0.0.1:3306)/app?parseTime=true", "S3cr3tPw", ""},
	{"u:S3cr@3tPw@tcp(127.0.0.1:3306)/app", "S3cr@3tPw", ""},
	{"u:S3cr3tPw@unix(/tmp/mysql.sock)/app", "S3cr3tPw", ""},
	{"sqlite:./queue.db?_token=S3cr3tPw", "S3cr3tPw", ""},
}

// leaks reports whether s shows the secret written in a DSN, or a piece
// of it four characters or longer.
func leaks(s, secret, plain string) bool {
	for _, w := range []string{secret, plain} {
		for i := 0; i+4 <= len(w); i++ {
			if strings.Contains(s, w[i:i+4]) {
				return true
			}
		}
	}
	return false
}

func TestRedactHidesEverySecret(t *testing.T) {
	for _, f := range dsnForms {
		got := Redact(f.dsn)
		if leaks(got, f.secret, f.plain) {
			t.Errorf("Redact(%q) = %q: shows the secret", f.dsn, got)
		}
		if !strings.Contains(got, "127.0.0.1") && !strings.Contains(got, "queue.db") && !strings.Contains(got, "mysql.sock") {
			t.Errorf("Redact(%q) = %q: hides the host too", f.dsn, got)
		}
	}
	for dsn, want := range map[string]string{
		"postgres://u:pw@h:5432/db?sslmode=disable": "postgres://u:***@h:5432/db?sslmode=disable",
		"postgres://u@h/db?Password=pw&x=1":         "postgres://u@h/db?Password=***&x=1",
		"u:pw@tcp(h:3306)/db":                       "u:***@tcp(h:3306)/db",
		"host=h password=pw dbname=db":              "host=h password=*** dbname=db",
		"sqlite:./queue.db":                         "sqlite:./queue.db",
		"postgres://u@h/db":                         "postgres://u@h/db",
		"sqlite:/home/me@example/q.db":              "sqlite:/home/me@example/q.db",
	} {
		if got := Redact(dsn); got != want {
			t.Errorf("Redact(%q) = %q, want %q", dsn, got, want)
		}
	}
}

// A driver's error that quotes the DSN, or a piece of it, keeps its
// meaning but loses the secret; errors.Is still finds what it wraps.
func TestRedactErrorHidesWhatADriverQuotes(t *testing.T) {
	base := errors.New("base")
	for _, f := range dsnForms {
		plain := f.plain
		if plain == "" {
			plain = f.secret
		}
		for _, quote := range []string{
			fmt.Sprintf("cannot parse `%s`: invalid port", f.dsn),
			fmt.Sprintf("bad DSN %q", f.dsn),
			fmt.Sprintf("invalid port \":%s\" after host", f.secret),
			fmt.Sprintf("invalid value / unknown config name: %s", plain),
		} {
			if _, err := url.Parse(f.dsn); err != nil {
				quote += ", " + err.Error()
			}
			err := RedactError(f.dsn, fmt.Errorf("%s: %w", quote, base))
			if leaks(err.Error(), f.secret, f.plain) {
				t.Errorf("RedactError(%q) = %q: shows the secret", f.dsn, err)
			}
			if !errors.Is(err, base) || !strings.HasSuffix(err.Error(), ": base") {
				t.Errorf("RedactError(%q) = %q: lost the wrapped error", f.dsn, err)
			}
		}
	}
	// An error that wraps a redacted one, quoting the DSN itself, is
	// redacted too.
	dsn := "postgres://u:S3cr3tPw@h/db"
	inner := RedactError(dsn, base)
	if err := RedactError(dsn, fmt.Errorf("open %s: %w", dsn, inner)); leaks(err.Error(), "S3cr3tPw", "") {
		t.Errorf("RedactError of a wrapper: %q", err)
	}
	// Secrets the message quotes by name are hidden without the DSN too.
	msg := RedactText("", "cannot parse `postgres://u:pw@h/db?PassWord=xyz&sslmode=bogus`: sslmode is invalid")
	if strings.Contains(msg, "xyz") || strings.Contains(msg, ":pw@") || !strings.Contains(msg, "sslmode is invalid") {
		t.Errorf("RedactText = %q", msg)
	}
}
