package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// TestSlowSamplesAreSpacedOut: when a sample took long (a huge table),
// the next waits ten times as long, however many requests ask; an action
// still gets a fresh one.
func TestSlowSamplesAreSpacedOut(t *testing.T) {
	ctx := context.Background()
	q := dbtest.New(t, dbqueue.SQLite).Queue(t)
	s := newSampler(q, 10, 100*time.Millisecond, nil)
	first, err := s.latest(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if s.cost <= 0 {
		t.Fatalf("the sample's cost was not measured: %v", s.cost)
	}
	s.cost = time.Minute // as if the tables were huge
	if _, err := q.Push(ctx, dbqueue.NewJob{Name: "n"}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(300 * time.Millisecond); time.Now().Before(deadline); {
		got, err := s.latest(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		if !got.totals.at.Equal(first.totals.at) {
			t.Fatalf("a new sample %v after the first; want none for 10 minutes", got.totals.at.Sub(first.totals.at))
		}
	}
	s.invalidate()
	got, err := s.latest(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if got.totals.at.Equal(first.totals.at) || got.totals.point.Pending != 1 {
		t.Fatalf("after an action: the old sample, or %d pending; want a fresh sample with 1", got.totals.point.Pending)
	}
}

// TestCappedCountsSayLowerBound: a count that stops at its cap shows as
// "N+" with words for screen readers, and api/stats flags it; a count
// below its cap is shown as it is, unflagged. Totals and failed jobs
// alike, on every database.
func TestCappedCountsSayLowerBound(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		ctx := context.Background()
		q := db.Queue(t)
		d, err := New(q, Options{})
		if err != nil {
			t.Fatal(err)
		}
		d.stats.pageCap, d.stats.totalsCap, d.stats.failedWindow = 4, 6, 2
		for range 5 {
			if _, err := q.Push(ctx, dbqueue.NewJob{Name: "n", Queue: "big"}); err != nil {
				t.Fatal(err)
			}
		}
		for range 3 {
			if _, err := q.Push(ctx, dbqueue.NewJob{Name: "n", Queue: "small", Delay: time.Hour}); err != nil {
				t.Fatal(err)
			}
			job, err := q.Push(ctx, dbqueue.NewJob{Name: "n", Queue: "small"})
			if err != nil {
				t.Fatal(err)
			}
			held, err := q.Reserve(ctx, 1, "small")
			if err != nil || len(held) != 1 {
				t.Fatalf("reserve %d: %d, %v", job, len(held), err)
			}
			if err := q.Fail(ctx, held[0], errors.New("boom")); err != nil {
				t.Fatal(err)
			}
		}
		var st queuesData
		if err := json.Unmarshal([]byte(get200(t, d, "api/stats")), &st); err != nil {
			t.Fatal(err)
		}
		byName := map[string]QueueStats{}
		for _, s := range st.Queues {
			byName[s.Name] = s
		}
		if b := byName["big"]; b.Pending != 4 || !b.PendingCapped || b.DelayedCapped {
			t.Errorf("big: %+v, want pending 4 capped, delayed exact", b)
		}
		if s := byName["small"]; s.Delayed != 3 || s.DelayedCapped || !s.FailedCapped || s.Failed != 2 {
			t.Errorf("small: %+v, want delayed 3 exact, failed 2 capped (window 2 of 3)", s)
		}
		// 5 + 3 waiting rows: the totals stop at 6.
		if tt := st.Totals; !tt.PendingCapped || tt.Pending+tt.Delayed != 6 || !tt.FailedCapped || tt.Failed != 2 {
			t.Errorf("totals %+v, want waiting rows capped at 6 and failed at 2", tt)
		}
		if st.Cap != 4 || st.TotalsCap != 6 || st.FailedWindow != 2 {
			t.Errorf("caps %d, %d, %d; want 4, 6, 2", st.Cap, st.TotalsCap, st.FailedWindow)
		}
		body := get200(t, d, "")
		for _, want := range []string{
			`<td class="n pending">4&#43;<span class="sr-only"> (at least; counting stopped there)</span></td>`,
			`<td class="n delayed">3</td>`,
			`id="total-failed" href="failed">2&#43;<span class="sr-only">`,
			`a queue's count stops at <span id="cap">4</span>`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("the page lacks %s", want)
			}
		}
	})
}

// TestRatesSkipCappedDepth: processed is pushed less the depth's growth,
// which a capped depth cannot give: it is left unknown, while pushed and
// failed (from ids) are still given.
func TestRatesSkipCappedDepth(t *testing.T) {
	at := time.Now()
	prev := sample{at: at, point: Point{Pending: 100, PendingCapped: true}, jobHW: 10, failedHW: 1}
	cur := sample{at: at.Add(time.Minute), point: Point{Pending: 100, PendingCapped: true}, jobHW: 40, failedHW: 3}
	rates(&cur, prev, 5*time.Second)
	if cur.point.Processed != nil || cur.point.Pushed == nil || *cur.point.Pushed != 30 || cur.point.FailedRate == nil || *cur.point.FailedRate != 2 {
		t.Errorf("capped: processed %v pushed %v failed %v; want none, 30, 2", cur.point.Processed, cur.point.Pushed, cur.point.FailedRate)
	}
	prev.point.PendingCapped, cur.point.PendingCapped = false, false
	cur.point.Pending = 90
	rates(&cur, prev, 5*time.Second)
	if cur.point.Processed == nil || *cur.point.Processed != 40 {
		t.Errorf("exact: processed %v, want 40 (30 pushed, depth down 10)", cur.point.Processed)
	}
}

// TestPageDoesNotWaitForSlowSample: while a sample runs longer than the
// wait, a request gets the older one, marked as such.
func TestPageDoesNotWaitForSlowSample(t *testing.T) {
	ctx := context.Background()
	q := dbtest.New(t, dbqueue.SQLite).Queue(t)
	s := newSampler(q, 10, time.Hour, nil)
	first, err := s.latest(ctx, "")
	if err != nil || first.pending {
		t.Fatalf("first sample: %+v, %v", first, err)
	}
	// A sample in flight that never ends, as on a slow database.
	s.mu.Lock()
	s.flights[""] = &flight{done: make(chan struct{})}
	s.stale = true
	s.mu.Unlock()
	s.wait = time.Millisecond
	got, err := s.latest(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if !got.pending || !got.page.at.Equal(first.page.at) {
		t.Errorf("got pending=%v from %v; want the first sample (%v), pending", got.pending, got.page.at, first.page.at)
	}
}

// get200 renders a page of d and fails on anything but 200.
func get200(t *testing.T, d *Dashboard, page string) string {
	t.Helper()
	rec := httptest.NewRecorder()
	d.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1/"+page, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s: %d %.300s", page, rec.Code, rec.Body.String())
	}
	return rec.Body.String()
}
