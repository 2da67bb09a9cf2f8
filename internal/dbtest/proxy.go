package dbtest

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/dbqueue/dbqueue"
)

// Proxy is a TCP proxy in front of a test database that can cut every
// connection and refuse new ones, as a database restart or a network fault
// does, and then let connections through again.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]bool
}

// Proxy starts a proxy to db's server and returns a DSN for db through it.
// SQLite has no server; asking for one fails the test.
func (db *DB) Proxy(t testing.TB) (*Proxy, string) {
	t.Helper()
	ln, target, dsn := db.proxyListen(t, nil)
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.Cut() })
	return p, dsn
}

// proxyListen listens on a loopback port for a proxy to db's server and
// returns the listener, the server's address and a DSN for db through the
// port; editPG, when set, edits a PostgreSQL DSN's query as well. SQLite
// has no server; asking for one fails the test.
func (db *DB) proxyListen(t testing.TB, editPG func(url.Values)) (ln net.Listener, target, dsn string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	switch db.Dialect {
	case dbqueue.Postgres:
		u, err := url.Parse(db.DSN)
		if err != nil {
			t.Fatal(err)
		}
		target = u.Host
		if u.Port() == "" {
			target += ":5432"
		}
		u.Host = ln.Addr().String()
		if editPG != nil {
			query := u.Query()
			editPG(query)
			u.RawQuery = query.Encode()
		}
		dsn = u.String()
	case dbqueue.MySQL:
		cfg, err := mysql.ParseDSN(db.DSN)
		if err != nil {
			t.Fatal(err)
		}
		target = cfg.Addr
		cfg.Addr = ln.Addr().String()
		dsn = cfg.FormatDSN()
	default:
		ln.Close()
		t.Fatalf("dbtest: no proxy for %s", db.Dialect)
	}
	return ln, target, dsn
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		go p.pipe(c)
	}
}

func (p *Proxy) pipe(c net.Conn) {
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[s] = true, true
	p.mu.Unlock()
	go func() { _, _ = io.Copy(s, c); s.Close() }()
	_, _ = io.Copy(c, s)
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, s)
	p.mu.Unlock()
}

// Cut closes every open connection and refuses new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
}

// Restore lets connections through again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}
