package sqldb

import (
	"errors"
	"net/url"
	"strings"
)

// Redact hides a password in a DSN shown in an error.
func Redact(dsn string) string {
	at := strings.LastIndex(dsn, "@")
	colon := strings.Index(dsn, ":")
	if at < 0 || colon < 0 || colon > at {
		return dsn
	}
	return dsn[:colon+1] + "***" + dsn[at:]
}

// URLError drops the DSN, password included, that url.Parse puts in its
// errors; the caller shows a redacted one.
func URLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
