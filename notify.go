package dbqueue

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// notifyEvery rate-limits notifications per queue from one Queue: a burst of
// single pushes sends one, and a worker woken by it finds the rest when it
// claims (after work it polls again within 10ms anyway).
const notifyEvery = 2 * time.Millisecond

// notifier sends and receives wake-ups for one Queue. Only a Queue on a
// connection that can LISTEN (a pgx pool, or the direct connection of
// WithListenDSN) listens, with one connection for all the process's
// subscribers; on other databases, and with WithoutListen, wake-ups come
// only from this Queue's own pushes, and workers poll.
type notifier struct {
	listener sqldb.Listener
	channel  string
	last     sync.Map // queue name → *atomic.Int64, unix nanos of the last notify

	// bus is shared with the other queues of this process on the same
	// database (localwake.go); set once, before the queue is used.
	bus *localBus

	mu     sync.Mutex
	subs   map[*subscription]struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

type subscription struct {
	queues map[string]bool
	ch     chan struct{}
}

func newNotifier(l sqldb.Listener, channel string) *notifier {
	n := &notifier{subs: map[*subscription]struct{}{}, channel: channel}
	if l != nil && channel != "" {
		n.listener = l
	}
	return n
}

// shouldNotify reports whether a push of rows should notify: some row is
// due now, on a queue not notified within notifyEvery.
func (n *notifier) shouldNotify(rows []dialect.PushRow) bool {
	if n.listener == nil && n.channel == "" {
		return false
	}
	now := time.Now().UnixNano()
	notify := false
	for _, r := range rows {
		if !r.Due() {
			continue
		}
		v, _ := n.last.LoadOrStore(r.Queue, new(atomic.Int64))
		last := v.(*atomic.Int64)
		prev := last.Load()
		if now-prev >= int64(notifyEvery) && last.CompareAndSwap(prev, now) {
			notify = true
		}
	}
	return notify
}

// pushed wakes this process's own subscribers of the queues of due rows
// that a committed push wrote — on this Queue and on every other Queue of
// the process on the same database and jobs table — where no LISTEN
// connection brings the database's notification (MySQL, SQLite, PostgreSQL
// through database/sql or WithoutListen): a worker embedded beside the
// pusher starts the job at once instead of after its poll interval. Queues
// that listen hear the push's NOTIFY and are skipped. It costs a lock and a
// channel send per push and subscriber.
func (n *notifier) pushed(rows []dialect.PushRow) {
	var last string
	for _, r := range rows {
		if r.Due() && r.Queue != last {
			n.wakeLocal(r.Queue, true)
			last = r.Queue
		}
	}
}

// wakeups returns a channel that receives soon after a job is pushed, ready
// to run, to one of queues (on PostgreSQL with a pgx pool, through
// LISTEN/NOTIFY on one shared connection), and a function to stop. On other
// databases the channel never receives: callers poll. Wake-ups are hints —
// one may stand for many jobs, and a worker must still poll now and then.
func (q *Queue) wakeups(queues ...string) (<-chan struct{}, func()) {
	if len(queues) == 0 {
		queues = []string{q.queue}
	}
	s := &subscription{queues: map[string]bool{}, ch: make(chan struct{}, 1)}
	for _, name := range queues {
		s.queues[name] = true
	}
	n := q.wake
	if n.listener == nil {
		n.mu.Lock()
		n.subs[s] = struct{}{}
		n.mu.Unlock()
		return s.ch, func() { n.unsubscribe(s) }
	}
	n.mu.Lock()
	n.subs[s] = struct{}{}
	if n.cancel == nil {
		ctx, cancel := context.WithCancel(context.Background())
		n.cancel, n.done = cancel, make(chan struct{})
		go n.listen(ctx, n.done)
	}
	n.mu.Unlock()
	return s.ch, func() { n.unsubscribe(s) }
}

func (n *notifier) unsubscribe(s *subscription) {
	n.mu.Lock()
	delete(n.subs, s)
	var (
		cancel context.CancelFunc
		done   chan struct{}
	)
	if len(n.subs) == 0 && n.cancel != nil {
		cancel, done = n.cancel, n.done
		n.cancel, n.done = nil, nil
	}
	n.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

func (n *notifier) close() {
	n.leave()
	n.mu.Lock()
	cancel, done := n.cancel, n.done
	n.cancel, n.done = nil, nil
	n.subs = map[*subscription]struct{}{}
	n.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// listen holds one pool connection with LISTEN and fans notifications out,
// reconnecting with backoff; while it is down, workers poll.
func (n *notifier) listen(ctx context.Context, done chan struct{}) {
	defer close(done)
	wait := 100 * time.Millisecond
	for ctx.Err() == nil {
		began := time.Now()
		err := n.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		_ = err // the workers' polling covers the gap
		// A listen that held for a while was a working connection lost
		// (a restart, a failover): start the backoff over, or a process
		// that had a few blips in its life waits 10s to listen again.
		if time.Since(began) > 10*time.Second {
			wait = 100 * time.Millisecond
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(wait*2, 10*time.Second)
	}
}

func (n *notifier) listenOnce(ctx context.Context) error {
	return n.listener.Listen(ctx, n.channel, n.broadcast)
}

// broadcast wakes the subscribers of queue ("" wakes all).
func (n *notifier) broadcast(queue string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for s := range n.subs {
		if queue == "" || s.queues[queue] {
			select {
			case s.ch <- struct{}{}:
			default:
			}
		}
	}
}
