package dashboard

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// tokenLife is how long a rendered form stays usable. Open pages get a
// fresh token with every refresh of the counts.
const tokenLife = 24 * time.Hour

// errCSRF is the refusal of an action without a valid token.
var errCSRF = errors.New("the form's token is missing, forged or expired: reload the page and try again")

// token signs the time it was made: base64url(unix seconds ‖ HMAC-SHA256).
// It is not tied to a session (the dashboard has none); with the origin
// check it keeps other sites from posting forms to the dashboard.
func (d *Dashboard) token(now time.Time) string {
	buf := make([]byte, 8, 8+sha256.Size)
	binary.BigEndian.PutUint64(buf, uint64(now.Unix()))
	return base64.RawURLEncoding.EncodeToString(append(buf, d.mac(buf)...))
}

func (d *Dashboard) mac(stamp []byte) []byte {
	m := hmac.New(sha256.New, d.secret)
	m.Write([]byte("dbqueue dashboard action\x00"))
	m.Write(stamp)
	return m.Sum(nil)
}

// checkToken verifies a token made by token within its life.
func (d *Dashboard) checkToken(tok string, now time.Time) error {
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(raw) != 8+sha256.Size {
		return errCSRF
	}
	if !hmac.Equal(raw[8:], d.mac(raw[:8])) {
		return errCSRF
	}
	made := time.Unix(int64(binary.BigEndian.Uint64(raw[:8])), 0)
	if now.Sub(made) > tokenLife || made.Sub(now) > time.Minute {
		return errCSRF
	}
	return nil
}

// checkAction refuses a cross-origin post and one without a valid token.
func (d *Dashboard) checkAction(r *http.Request) error {
	if err := d.origins.Check(r); err != nil {
		return fmt.Errorf("cross-origin action refused: %w", err)
	}
	return d.checkToken(r.PostFormValue("csrf"), time.Now())
}
