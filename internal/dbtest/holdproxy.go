package dbtest

import (
	"bytes"
	"net"
	"net/url"
	"sync"
	"testing"
)

// HoldProxy is a TCP proxy in front of a test database that can hold what
// clients send, so a test can catch a statement (a COMMIT) on its way and
// decide its fate: delivered with its reply lost, or never delivered. It
// makes the two faults a client cannot tell apart — "the server committed
// and the reply was lost" and "the server never got the COMMIT" — happen
// on demand, while the test watches what a third connection sees.
type HoldProxy struct {
	ln     net.Listener
	target string
	// held gets a value each time bytes are held.
	held chan struct{}

	mu      sync.Mutex
	holding bool
	// dropCommit: the next COMMIT a client sends is delivered and its
	// reply dropped (DropCommitReply).
	dropCommit bool
	// loseCommit: the next COMMIT a client sends never reaches the server
	// (LoseCommit).
	loseCommit bool
	conns      map[*holdConn]bool
}

type holdConn struct {
	client, server net.Conn
	buf            []byte // held bytes, client to server
	dropReplies    bool
}

// HoldProxy starts a HoldProxy to db's server and returns a DSN for db
// through it. SQLite has no server; asking for one fails the test.
func (db *DB) HoldProxy(t testing.TB) (*HoldProxy, string) {
	t.Helper()
	// In the clear, so DropCommitReply can read the statements.
	ln, target, dsn := db.proxyListen(t, func(q url.Values) { q.Set("sslmode", "disable") })
	p := &HoldProxy{ln: ln, target: target, held: make(chan struct{}, 1), conns: map[*holdConn]bool{}}
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.Abort() })
	return p, dsn
}

func (p *HoldProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		hc := &holdConn{client: c, server: s}
		p.mu.Lock()
		p.conns[hc] = true
		p.mu.Unlock()
		go p.up(hc)
		go p.down(hc)
	}
}

// up copies client to server, or holds what the client sends.
func (p *HoldProxy) up(hc *holdConn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := hc.client.Read(buf)
		if n > 0 {
			p.mu.Lock()
			commit := bytes.Contains(bytes.ToLower(buf[:n]), []byte("commit"))
			if p.dropCommit && commit {
				p.dropCommit = false
				hc.dropReplies = true
			}
			if p.loseCommit && commit {
				p.loseCommit = false
				p.mu.Unlock()
				hc.server.Close()
				hc.client.Close()
				return
			}
			if p.holding {
				hc.buf = append(hc.buf, buf[:n]...)
				select {
				case p.held <- struct{}{}:
				default:
				}
			} else if _, werr := hc.server.Write(buf[:n]); werr != nil {
				err = werr
			}
			p.mu.Unlock()
		}
		if err != nil {
			hc.server.Close()
			return
		}
	}
}

// down copies server to client, or drops the reply and cuts both sides.
func (p *HoldProxy) down(hc *holdConn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := hc.server.Read(buf)
		if n > 0 {
			p.mu.Lock()
			drop := hc.dropReplies
			p.mu.Unlock()
			if drop {
				hc.client.Close()
				hc.server.Close()
				return
			}
			if _, werr := hc.client.Write(buf[:n]); werr != nil {
				err = werr
			}
		}
		if err != nil {
			hc.client.Close()
			p.mu.Lock()
			delete(p.conns, hc)
			p.mu.Unlock()
			return
		}
	}
}

// Hold keeps what clients send from now on, undelivered.
func (p *HoldProxy) Hold() {
	p.mu.Lock()
	p.holding = true
	p.mu.Unlock()
}

// Held gets a value once bytes are held after Hold.
func (p *HoldProxy) Held() <-chan struct{} { return p.held }

// Deliver sends what was held to the server and lets traffic through
// again, but drops the server's next reply on each connection that had
// bytes held, cutting that connection instead: the server acts on the
// statement and its client never hears.
func (p *HoldProxy) Deliver() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holding = false
	for hc := range p.conns {
		if len(hc.buf) == 0 {
			continue
		}
		hc.dropReplies = true
		_, _ = hc.server.Write(hc.buf)
		hc.buf = nil
	}
}

// DropCommitReply makes the next COMMIT a client sends (a statement whose
// bytes spell it: pgx and go-sql-driver/mysql send it as text) reach the
// server and its reply be dropped, the connection cut: the server
// commits and the client never hears.
func (p *HoldProxy) DropCommitReply() {
	p.mu.Lock()
	p.dropCommit = true
	p.mu.Unlock()
}

// LoseCommit makes the next COMMIT a client sends be lost on its way: the
// connection is cut before it reaches the server, which rolls back.
func (p *HoldProxy) LoseCommit() {
	p.mu.Lock()
	p.loseCommit = true
	p.mu.Unlock()
}

// Abort cuts every connection without delivering what was held: the
// server sees its client gone, and never the held statement.
func (p *HoldProxy) Abort() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holding = false
	for hc := range p.conns {
		hc.buf = nil
		hc.server.Close()
		hc.client.Close()
	}
}
