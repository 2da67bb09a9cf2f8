package dbqmysql_test

import (
	"strings"
	"testing"

	"github.com/dbqueue/dbqueue/driver/dbqmysql"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// Parse, called directly (not through dbqueue.Open), hides the password
// of a bad DSN in its error too.
func TestParseErrorHidesThePassword(t *testing.T) {
	for _, dsn := range []string{
		"mysql://u:S3cr/3tPw@127.0.0.1:3306/test",
		"mysql://u:S3cr3tPw#@127.0.0.1:3306/test",
		"mysql://u:S3cr%zz3tPw@127.0.0.1:3306/test",
		"mysql://u:S3cr3tPw@127.0.0.1:3306",
		"u:S3cr3tPw@tcp(127.0.0.1:3306)/test?parseTime=maybe",
		"u:S3cr3tPw@tcp(127.0.0.1:3306",
	} {
		_, err := dbqmysql.Parse(dsn)
		if err == nil {
			t.Errorf("Parse(%q) succeeded", dsn)
			continue
		}
		if p := dbtest.LeakedSecret(err.Error()); p != "" {
			t.Errorf("Parse(%q) shows %q of the password: %v", dsn, p, err)
		}
		if !strings.Contains(err.Error(), "MySQL DSN") {
			t.Errorf("Parse(%q) = %v: want it to say the MySQL DSN is bad", dsn, err)
		}
	}
}

// A URL DSN with a parameter the driver refuses names that parameter, so
// the user knows which one to fix.
func TestBadParameterIsNamed(t *testing.T) {
	_, err := dbqmysql.Parse("mysql://u@127.0.0.1:3306/test?timeout=5s&parseTime=maybe")
	if err == nil || !strings.Contains(err.Error(), `"parseTime"`) {
		t.Fatalf("Parse with parseTime=maybe: %v, want an error naming \"parseTime\"", err)
	}
}
