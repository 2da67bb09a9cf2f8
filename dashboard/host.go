package dashboard

import (
	"errors"
	"fmt"
	"net"
	"strings"
)

// errMisdirected starts the refusal of a request for a host the dashboard
// does not serve.
var errMisdirected = errors.New("misdirected request")

// hosts are the host names a dashboard answers to: the loopback names and
// addresses, and Options.AllowedHosts.
//
// The check is against DNS rebinding. A web page the operator visits, on
// attacker.example, can make its own name resolve to 127.0.0.1 a moment
// later; the browser then sends the page's requests to a dashboard on this
// machine as same-origin requests, so the page reads the jobs' payloads
// and the forms' tokens and posts actions. The browser still says which
// name it asked for, in the Host header, and that name is the attacker's,
// so refusing every host the dashboard is not meant to be reached by stops
// it. The loopback names cannot be rebound: a name of .localhost never
// leaves the machine (RFC 6761), and an address is no name at all.
type hosts struct {
	any     bool                // "*": any host (a proxy in front checks it)
	names   map[string]struct{} // exact names and addresses, normalised
	domains []string            // ".example.com" of "*.example.com"
}

// newHosts checks and normalises Options.AllowedHosts.
func newHosts(allowed []string) (hosts, error) {
	h := hosts{names: map[string]struct{}{}}
	for _, raw := range allowed {
		entry := strings.TrimSpace(raw)
		if entry == "*" {
			h.any = true
			continue
		}
		wild := strings.HasPrefix(entry, "*.")
		name := normalHost(strings.TrimPrefix(entry, "*."))
		if name == "" || (strings.ContainsAny(name, "/:@?#*[] \t") && net.ParseIP(name) == nil) {
			return hosts{}, fmt.Errorf("AllowedHosts entry %q: give a host name (admin.example.com), a wildcard (*.example.com) or an address (192.0.2.7, ::1), with no scheme, port or path; any port is allowed", raw)
		}
		if wild {
			if net.ParseIP(name) != nil {
				return hosts{}, fmt.Errorf("AllowedHosts entry %q: a wildcard takes a domain, not an address", raw)
			}
			h.domains = append(h.domains, "."+name)
			continue
		}
		h.names[name] = struct{}{}
	}
	return h, nil
}

// normalHost is a host name or address as compared: lower case, without
// the brackets of an IPv6 address, without the trailing dot of a fully
// qualified name, and an address in its canonical form.
func normalHost(s string) string {
	s = strings.ToLower(s)
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		s = s[1 : len(s)-1]
	}
	if ip := net.ParseIP(s); ip != nil {
		return ip.String()
	}
	return strings.TrimSuffix(s, ".")
}

// splitHost takes the port off a Host header: "name:8080", "[::1]:8080",
// "name", "[::1]". It reports false for a header that is none of these
// (an IPv6 address without brackets, a port that is no number).
func splitHost(hostport string) (string, bool) {
	host, port := hostport, ""
	if strings.HasPrefix(hostport, "[") {
		end := strings.IndexByte(hostport, ']')
		if end < 0 {
			return "", false
		}
		host, port = hostport[:end+1], hostport[end+1:]
		if port != "" {
			if port[0] != ':' {
				return "", false
			}
			port = port[1:]
		}
	} else if i := strings.IndexByte(hostport, ':'); i >= 0 {
		host, port = hostport[:i], hostport[i+1:]
	}
	if len(port) > 5 || strings.Trim(port, "0123456789") != "" {
		return "", false
	}
	return host, true
}

// allows reports whether a request for host (the Host header, with its
// port or without) is one the dashboard serves.
func (h hosts) allows(hostport string) bool {
	if hostport == "" {
		return false
	}
	host, ok := splitHost(hostport)
	if !ok {
		return false
	}
	name := normalHost(host)
	if name == "" {
		return false
	}
	if h.any {
		return true
	}
	if ip := net.ParseIP(name); ip != nil {
		if ip.IsLoopback() {
			return true
		}
		_, ok := h.names[name]
		return ok
	}
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return true
	}
	if _, ok := h.names[name]; ok {
		return true
	}
	for _, d := range h.domains {
		if strings.HasSuffix(name, d) {
			return true
		}
	}
	return false
}

// checkHost refuses a request whose Host is not one the dashboard serves.
// It reads only the Host header (r.Host), never X-Forwarded-Host, which
// any client can send.
func (d *Dashboard) checkHost(host string) error {
	if d.hosts.allows(host) {
		return nil
	}
	if host == "" {
		return fmt.Errorf("%w: the request names no host (Host header): this dashboard answers only requests for the names it serves", errMisdirected)
	}
	return fmt.Errorf("%w: this dashboard does not serve host %q, so it refuses the request in case a web page reached it by DNS rebinding; "+
		"open it as localhost or 127.0.0.1, or add the name to Options.AllowedHosts (dbqueue dashboard -allow-host NAME)", errMisdirected, host)
}
