package dbqueue

import (
	"reflect"
	"sync"

	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// Pushes wake workers in the same process even when they hold another
// Queue on the same database: a service often opens one Queue for its
// request handlers and another for its embedded worker, or opens the DSN
// twice. Where no LISTEN connection carries the database's own
// notification (MySQL, SQLite, PostgreSQL through database/sql), that
// worker would otherwise start a job only at its next poll. The queues of
// a process that share a database and a jobs table share a localBus.

// busKey says which queues share wake-ups: the same dialect, the same
// database (the pool handed to New, or the DSN given to Open) and the same
// jobs table.
type busKey struct {
	dialect string
	db      any // the pool, for New
	dsn     string
	schema  string
	jobs    string
}

// localBus is the set of notifiers of one busKey in this process.
type localBus struct {
	key busKey
	mu  sync.Mutex
	ns  map[*notifier]struct{}
}

var (
	busesMu sync.Mutex
	buses   = map[busKey]*localBus{}
)

// keyFor is the busKey of a queue on conn: the DSN when Open made the
// pool (two Opens of one DSN are one database), else the pool itself.
func keyFor(conn sqldb.Conn, dsn string, t dialect.Tables) (busKey, bool) {
	k := busKey{dialect: conn.Dialect, dsn: dsn, schema: t.Schema, jobs: t.Jobs}
	if dsn != "" {
		return k, true
	}
	id := sqldb.Identity(conn.DB)
	if id == nil || !reflect.TypeOf(id).Comparable() {
		return k, false
	}
	k.db = id
	return k, true
}

// join adds n to the bus of key, making the bus if it is the first.
func (n *notifier) join(key busKey) {
	busesMu.Lock()
	b := buses[key]
	if b == nil {
		b = &localBus{key: key, ns: map[*notifier]struct{}{}}
		buses[key] = b
	}
	b.mu.Lock()
	b.ns[n] = struct{}{}
	b.mu.Unlock()
	busesMu.Unlock()
	n.bus = b
}

// leave takes n off its bus, dropping the bus when it was the last. n
// keeps its pointer to the bus (a push racing Close still finds it).
func (n *notifier) leave() {
	b := n.bus
	if b == nil {
		return
	}
	busesMu.Lock()
	b.mu.Lock()
	delete(b.ns, n)
	empty := len(b.ns) == 0
	b.mu.Unlock()
	if empty && buses[b.key] == b {
		delete(buses, b.key)
	}
	busesMu.Unlock()
}

// wakeLocal wakes the subscribers of queue on every queue of n's bus (on
// n alone when it has none); with deafOnly, only on those that do not
// LISTEN, since those that do hear the database's own notification.
func (n *notifier) wakeLocal(queue string, deafOnly bool) {
	b := n.bus
	if b == nil {
		if !deafOnly || n.listener == nil {
			n.broadcast(queue)
		}
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for other := range b.ns {
		if !deafOnly || other.listener == nil {
			other.broadcast(queue)
		}
	}
}
