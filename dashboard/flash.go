package dashboard

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"net/http"
	"time"
	"unicode/utf8"
)

// The line an action leaves for the page it redirects to ("Retried 3
// failed jobs.") travels in a cookie the dashboard signs, not in the
// URL: a link anyone can craft would otherwise make the dashboard show
// their text, or a false "Deleted all failed jobs.", as its own.
const (
	flashCookie = "dbqueue_dashboard_flash"
	// flashLife is how long the line waits for the page after the
	// redirect; the browser follows a redirect at once.
	flashLife = time.Minute
	// maxFlash bounds the line, to keep the cookie under the 4 KB
	// browsers take.
	maxFlash = 1000
)

// flashMAC signs a line and the time it expires, under a label of its own
// so that neither a form's token nor anything else the dashboard signs
// passes for one.
func (d *Dashboard) flashMAC(expires, msg []byte) []byte {
	m := hmac.New(sha256.New, d.secret)
	m.Write([]byte("dbqueue dashboard flash\x00"))
	m.Write(expires)
	m.Write(msg)
	return m.Sum(nil)
}

// setFlash leaves msg for the next page the browser loads:
// base64url(expiry ‖ HMAC ‖ msg) in an HttpOnly cookie. It has no Path
// attribute, so the browser scopes it to the directory of the action's
// URL, which is where the dashboard is mounted, and the page that reads it
// clears it there.
func (d *Dashboard) setFlash(w http.ResponseWriter, r *http.Request, msg string, now time.Time) {
	if len(msg) > maxFlash {
		cut := maxFlash
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "…"
	}
	exp := make([]byte, 8, 8+sha256.Size+len(msg))
	binary.BigEndian.PutUint64(exp, uint64(now.Add(flashLife).Unix()))
	raw := append(append(exp, d.flashMAC(exp, []byte(msg))...), msg...)
	http.SetCookie(w, &http.Cookie{
		Name: flashCookie, Value: base64.RawURLEncoding.EncodeToString(raw),
		MaxAge: int(flashLife / time.Second), HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode,
	})
}

// takeFlash returns the line an action left, once: it clears the cookie,
// and a cookie the dashboard did not sign, or one past its time, shows
// nothing.
func (d *Dashboard) takeFlash(w http.ResponseWriter, r *http.Request, now time.Time) string {
	c, err := r.Cookie(flashCookie)
	if err != nil {
		return ""
	}
	http.SetCookie(w, &http.Cookie{
		Name: flashCookie, MaxAge: -1, HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode,
	})
	raw, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil || len(raw) < 8+sha256.Size {
		return ""
	}
	exp, mac, msg := raw[:8], raw[8:8+sha256.Size], raw[8+sha256.Size:]
	if !hmac.Equal(mac, d.flashMAC(exp, msg)) {
		return ""
	}
	if now.Unix() > int64(binary.BigEndian.Uint64(exp)) {
		return ""
	}
	return string(msg)
}
