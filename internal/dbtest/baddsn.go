package dbtest

import "strings"

// Secret is the password every DSN of BadDSNs carries.
const Secret = "S3cr3tPw"

// BadDSNs are DSNs an operator gets wrong, each carrying Secret in a form
// people write: URL user info holding an unescaped character, query
// parameters in odd casing, URL-encoded or repeated, PostgreSQL
// key=value, and go-sql-driver/mysql's own form. Want is what the error
// must still say. None names a reachable database with valid
// credentials, so every entry point that takes a DSN fails on each.
var BadDSNs = []struct{ DSN, Want string }{
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

// LeakedSecret returns the piece of Secret, four characters or longer,
// that s shows, or "".
func LeakedSecret(s string) string {
	for i := 0; i+4 <= len(Secret); i++ {
		if strings.Contains(s, Secret[i:i+4]) {
			return Secret[i : i+4]
		}
	}
	return ""
}
