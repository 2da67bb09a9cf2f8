package dialect

import (
	"sync"
	"time"
)

// A claim cursor is where a queue's claims have read up to in claim order
// (available_at, id), so the next claim starts there instead of at the
// head of the queue, which holds every row in flight and, on PostgreSQL,
// the index entries of every row claimed since the last vacuum. The
// MySQL claim (mysql_claim.go) and the PostgreSQL claim (postgres_claim.go)
// keep one per queue and look from the start by the rules of lookNow.

const (
	lookEvery    = time.Second
	lookShare    = 20 // looks on short claims may take 1/20 of the time
	cursorRounds = 4
)

// lookBurst is the most look time a cursor saves up (a variable for
// tests, which set it to 0 to see the other rules alone).
var lookBurst = 50 * time.Millisecond

// SetLookBurst changes lookBurst and returns the undo (tests only).
func SetLookBurst(d time.Duration) (restore func()) {
	old := lookBurst
	lookBurst = d
	return func() { lookBurst = old }
}

// claimCursor is one queue's cursor. read is held while a MySQL claim
// reads candidates and moves the cursor past them, so a Queue's claims in
// flight take disjoint ranges instead of fighting over the same rows.
type claimCursor struct {
	read sync.Mutex

	mu       sync.Mutex
	set      bool
	av, id   int64
	lastLook time.Time
	force    bool
	// budget is the time looks on short claims may still take; it grows
	// by 1/lookShare of the time that passes, up to lookBurst.
	budget   time.Duration
	budgetAt time.Time
	// lastCost is what the last look took: the next periodic look waits
	// lookShare times as long, if that is more than lookEvery.
	lastCost time.Duration
}

// claimCursors holds a dialect's cursor of each queue (one set per
// Queue: cursors are the process's own).
type claimCursors struct{ byQueue sync.Map }

// cursor is queue's cursor.
func (cs *claimCursors) cursor(queue string) *claimCursor {
	if c, ok := cs.byQueue.Load(queue); ok {
		return c.(*claimCursor)
	}
	c, _ := cs.byQueue.LoadOrStore(queue, &claimCursor{})
	return c.(*claimCursor)
}

// lookNow reports whether a claim should look from the start, and if so
// counts the look as made now (one claim looks per period: lookEvery, or
// lookShare times what the last look took, whichever is longer, so looks
// take at most about 1/lookShare of the time however far they walk; on
// PostgreSQL a look walks the index entries of every row claimed since
// the last vacuum). A claim that
// found nothing from the cursor always looks: an empty claim must mean an
// empty queue (StopWhenEmpty stops on one), and a queue the workers keep
// up with has few rows in flight to read.
func (c *claimCursor) lookNow(now time.Time, short, empty bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.budgetAt.IsZero() {
		c.budget = lookBurst
	} else if lookBurst <= 0 {
		c.budget = 0
	} else {
		c.budget = min(lookBurst, c.budget+now.Sub(c.budgetAt)/lookShare)
	}
	c.budgetAt = now
	if !c.set || c.force || empty || now.Sub(c.lastLook) >= max(lookEvery, lookShare*c.lastCost) || short && c.budget > 0 {
		c.lastLook, c.force = now, false
		return true
	}
	return false
}

// looked charges what a look from the start cost, and records whether it
// came back full of rows behind the cursor (then the next claim looks
// too, and a mass of expired reservations drains at full speed).
func (c *claimCursor) looked(cost time.Duration, again bool) {
	c.mu.Lock()
	c.budget -= cost
	c.lastCost = cost
	c.force = c.force || again
	c.mu.Unlock()
}

func (c *claimCursor) position() (av, id int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.av, c.id
}

func (c *claimCursor) behind(av, id int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.set && (av < c.av || av == c.av && id < c.id)
}

// moveTo moves the cursor forward to (av, id), never back.
func (c *claimCursor) moveTo(av, id int64) {
	c.mu.Lock()
	if !c.set || av > c.av || av == c.av && id > c.id {
		c.set, c.av, c.id = true, av, id
	}
	c.mu.Unlock()
}

// rewind moves the cursor back to (av, id), never forward: the rows a
// failed claim passed are read again.
func (c *claimCursor) rewind(av, id int64) {
	c.mu.Lock()
	if c.set && (av < c.av || av == c.av && id < c.id) {
		c.av, c.id = av, id
	}
	c.mu.Unlock()
}

// putBack forces looks (below) when held says a row went back to the
// queue: it may be due behind the cursor.
func (cs *claimCursors) putBack(held bool, err error) (bool, error) {
	if held {
		cs.forceLooks()
	}
	return held, err
}

// releasedDue forces looks when a release succeeded and made some row due
// at once (its available_at may be behind the cursor; a row due later is
// past it).
func (cs *claimCursors) releasedDue(rs []Release, err error) {
	if err != nil {
		return
	}
	for _, r := range rs {
		if r.Delay <= 0 {
			cs.forceLooks()
			return
		}
	}
}

// forceLooks makes the next claim of every queue look from the start: a
// row was put back where the cursor may have passed it.
func (cs *claimCursors) forceLooks() {
	cs.byQueue.Range(func(_, c any) bool {
		cur := c.(*claimCursor)
		cur.mu.Lock()
		cur.force = true
		cur.mu.Unlock()
		return true
	})
}
