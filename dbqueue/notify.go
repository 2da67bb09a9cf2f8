package dbqueue

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// notifyChannel is the PostgreSQL channel pushes notify and workers listen on.
const notifyChannel = "dbqueue_jobs"

// notifyEvery rate-limits notifications per queue from one Queue: a burst of
// single pushes sends one, and a worker woken by it finds the rest when it
// claims (after work it polls again within 10ms anyway).
const notifyEvery = 2 * time.Millisecond

// notifier sends and receives wake-ups for one Queue. Only a Queue on a pgx
// pool listens (one connection for all the process's subscribers); on
// other databases Wakeups never fires and workers poll.
type notifier struct {
	pool *pgxpool.Pool
	last sync.Map // queue name → *atomic.Int64, unix nanos of the last notify

	mu     sync.Mutex
	subs   map[*subscription]struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

type subscription struct {
	queues map[string]bool
	ch     chan struct{}
}

func newNotifier(db sqldb.DB) *notifier {
	n := &notifier{subs: map[*subscription]struct{}{}}
	if p, ok := sqldb.PgxPoolOf(db); ok {
		n.pool = p
	}
	return n
}

// shouldNotify reports whether a push of rows should notify: some row is
// due now, on a queue not notified within notifyEvery.
func (n *notifier) shouldNotify(rows []pushRow) bool {
	now := time.Now().UnixNano()
	notify := false
	for _, r := range rows {
		if r.absolute || r.at > 0 {
			continue
		}
		v, _ := n.last.LoadOrStore(r.queue, new(atomic.Int64))
		last := v.(*atomic.Int64)
		prev := last.Load()
		if now-prev >= int64(notifyEvery) && last.CompareAndSwap(prev, now) {
			notify = true
		}
	}
	return notify
}

// Wakeups returns a channel that receives soon after a job is pushed, ready
// to run, to one of queues (on PostgreSQL with a pgx pool, through
// LISTEN/NOTIFY on one shared connection), and a function to stop. On other
// databases the channel never receives: callers poll. Wake-ups are hints —
// one may stand for many jobs, and a worker must still poll now and then.
func (q *Queue) Wakeups(queues ...string) (<-chan struct{}, func()) {
	if len(queues) == 0 {
		queues = []string{q.queue}
	}
	s := &subscription{queues: map[string]bool{}, ch: make(chan struct{}, 1)}
	for _, name := range queues {
		s.queues[name] = true
	}
	n := q.wake
	if n.pool == nil {
		return s.ch, func() {}
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
		err := n.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		_ = err // the workers' polling covers the gap
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
	conn, err := n.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// A LISTENing connection must not go back to the pool: take it out.
	pc := conn.Hijack()
	defer pc.Close(context.Background())
	if _, err := pc.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		return err
	}
	n.broadcast("") // jobs may have arrived while nobody listened
	for {
		note, err := pc.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		n.broadcast(note.Payload)
	}
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
