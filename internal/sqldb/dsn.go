package sqldb

import (
	"errors"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// masked stands for a hidden secret.
const masked = "***"

// Redact returns dsn with its secrets replaced by ***, for an error or a
// log line: the password of a URL's or go-sql-driver/mysql's user:pass@,
// and the value of every parameter whose name speaks of a secret
// (password, sslpassword, passfile, PGPASSWORD, token, key, …, in any case
// or URL encoding, however often repeated), in a URL query or in a
// PostgreSQL key=value DSN. A DSN that does not parse is redacted all the
// same, erring towards hiding more: it is the one most likely to reach an
// error message.
func Redact(dsn string) string {
	return redactUserinfo(redactParams(dsn))
}

// RedactError returns err with every secret of dsn hidden in its text:
// drivers' parse errors quote the DSN they were given, or a piece of it
// (url.Parse's "invalid port \":secret\" after host"), with their own idea
// of which parameters are secret. Its text also has every secret-named
// parameter and URL password it quotes redacted. errors.Is and errors.As
// still see err.
func RedactError(dsn string, err error) error {
	if err == nil {
		return nil
	}
	if r, ok := err.(*redactedError); ok && r.dsn == dsn {
		return err // already redacted for this DSN (a wrapper of one may not be)
	}
	return &redactedError{err: err, dsn: dsn}
}

type redactedError struct {
	err error
	dsn string
}

func (e *redactedError) Error() string { return RedactText(e.dsn, e.err.Error()) }
func (e *redactedError) Unwrap() error { return e.err }

// RedactText hides in text every secret of dsn, and any secret-named
// parameter or URL password that text quotes itself.
func RedactText(dsn, text string) string {
	if d := strings.TrimSpace(dsn); d != "" {
		text = strings.ReplaceAll(text, d, Redact(d))
	}
	for _, s := range secrets(dsn) {
		text = strings.ReplaceAll(text, s, masked)
	}
	text = redactParams(text)
	text = urlUserRE.ReplaceAllString(text, "${1}:"+masked+"@")
	return mysqlUserRE.ReplaceAllString(text, "${1}:"+masked+"@${3}")
}

// urlUserRE and mysqlUserRE are a user:pass@ that a message quotes, in a
// URL and in a go-sql-driver/mysql DSN.
var (
	urlUserRE   = regexp.MustCompile("(://[^\\s:/@`\"']*):([^\\s@`\"']*)@")
	mysqlUserRE = regexp.MustCompile("([^\\s:/@`\"'(=]*):([^\\s@`\"']*)@((?:tcp|unix)?\\()")
)

// URLError drops the DSN, password included, that url.Parse puts in its
// errors; the caller shows a redacted one.
func URLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// minSecret is the shortest secret hidden wherever it appears in an
// error's text: a shorter one ("1", "ab") would blank out ordinary words
// of the message. Such a secret is still hidden where it stands in a DSN
// the message quotes.
const minSecret = 3

// secrets lists the secret values dsn holds, as written and URL-decoded:
// the text a driver's error may quote. A DSN that does not parse gives
// every candidate a lenient reading finds.
func secrets(dsn string) []string {
	var raw []string
	for _, m := range paramRE.FindAllStringSubmatch(dsn, -1) {
		if secretKey(m[1]) {
			v := strings.Trim(m[3], `'"`)
			raw = append(raw, v, strings.ReplaceAll(v, `\'`, `'`))
		}
	}
	if u, err := url.Parse(strings.TrimSpace(dsn)); err == nil && u.User != nil {
		if p, ok := u.User.Password(); ok {
			raw = append(raw, p)
		}
	}
	if colon, at := userinfo(dsn); colon >= 0 {
		// url.Parse reads a password holding / ? # or @ as a port up to
		// that character, and quotes that in its error.
		pw := dsn[colon+1 : at]
		raw = append(raw, pw)
		if i := strings.IndexAny(pw, "/?#@"); i > 0 {
			raw = append(raw, pw[:i])
		}
	}
	var out []string
	for _, s := range raw {
		for _, v := range []string{s, unescape(s)} {
			if len(v) >= minSecret && v != "true" && v != "false" {
				out = append(out, v)
			}
		}
	}
	// Longest first, so a secret that holds another is hidden whole.
	slices.SortStableFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

func unescape(s string) string {
	if u, err := url.QueryUnescape(s); err == nil {
		return u
	}
	if u, err := url.PathUnescape(s); err == nil {
		return u
	}
	return s
}

// paramRE is a key=value parameter of a URL query or of a PostgreSQL
// key=value DSN: its value is quoted ('…' with \' escapes) or runs to the
// next & or white space (or a quote or backtick, where an error quotes
// the DSN).
var paramRE = regexp.MustCompile(`([A-Za-z0-9_.%\-]+)(\s*=\s*)('(?:[^'\\]|\\.)*'?|[^&\s'"` + "`" + `]*)`)

// secretKey reports whether a parameter's name speaks of a secret.
func secretKey(key string) bool {
	k := strings.ToLower(unescape(key))
	k = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, k)
	for _, s := range []string{"pass", "pwd", "secret", "token", "key", "credential"} {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

func redactParams(s string) string {
	return paramRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := paramRE.FindStringSubmatch(m)
		if !secretKey(sub[1]) || sub[3] == "" {
			return m
		}
		return sub[1] + sub[2] + masked
	})
}

// userinfo finds the password of a user:pass@ in s: in a URL
// (scheme://user:pass@host) or a go-sql-driver/mysql DSN
// (user:pass@tcp(host)/db). It returns the colon before the password and
// the @ after it (the last @, as the mysql driver reads it, so a password
// holding @ / # or ? is hidden whole), or colon -1 when there is none.
func userinfo(s string) (colon, at int) {
	start := 0
	switch scheme, _, _ := strings.Cut(s, ":"); strings.ToLower(scheme) {
	case "sqlite", "sqlite3", "file":
		return -1, 0 // a file path, no user
	}
	if i := strings.Index(s, "://"); i >= 0 {
		start = i + 3
	} else {
		// A mysql DSN starts with the user; a key=value DSN or a message
		// has a space or = before any colon.
		c := strings.IndexByte(s, ':')
		if c < 0 || strings.ContainsAny(s[:c], " \t\n=`\"'") {
			return -1, 0
		}
	}
	at = strings.LastIndexByte(s, '@')
	if at < start {
		return -1, 0
	}
	c := strings.IndexByte(s[start:at], ':')
	if c < 0 {
		return -1, 0
	}
	colon = start + c
	if strings.ContainsAny(s[start:colon], "/ \t\n") {
		return -1, 0 // the colon is a port's or a path's, not a user's
	}
	return colon, at
}

func redactUserinfo(s string) string {
	if u, err := url.Parse(strings.TrimSpace(s)); err == nil && u.User != nil && strings.Count(s, "@") == 1 {
		if _, ok := u.User.Password(); !ok {
			return s // user@host: no password
		}
	}
	// Otherwise, a password or an @ that url.Parse does not read as the
	// user's (one holding an unescaped / # ?, or a mysql DSN): hide from
	// the user's colon to the last @.
	colon, at := userinfo(s)
	if colon < 0 || s[colon+1:at] == masked {
		return s
	}
	return s[:colon+1] + masked + s[at:]
}
