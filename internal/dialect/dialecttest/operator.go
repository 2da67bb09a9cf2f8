package dialecttest

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue/internal/dialect"
)

// operatorTests are Operator's.
var operatorTests = []test{
	{method: "AddMetrics", fn: addMetrics},
	{method: "PruneMetrics", fn: pruneMetrics},
	{method: "SumMetrics", fn: sumMetrics},
	{method: "SumMetricGroups", fn: sumMetricGroups},
	{method: "Beat", fn: beat},
	{method: "RemoveWorker", fn: removeWorker},
	{method: "PruneWorkers", fn: pruneWorkers},
	{method: "Workers", fn: workers},
	{method: "AddHistory", fn: addHistory},
	{method: "PruneHistory", fn: pruneHistory},
	{method: "History", fn: history},
	{method: "DBNow", fn: operatorDBNow},
}

func (s *suite) operator(t *testing.T) dialect.Operator {
	t.Helper()
	return s.Dialect
}

func metric(queue, kind string, n int64) dialect.MetricRow {
	r := dialect.MetricRow{Queue: queue, Kind: kind, Processed: n, Failed: 2 * n, Released: 3 * n}
	r.Runtime[0], r.Runtime[len(r.Runtime)-1] = n, 4*n
	r.Wait[1] = 5 * n
	return r
}

// counts is r without its queue and kind (SumMetrics reads none).
func counts(r dialect.MetricRow) dialect.MetricRow {
	r.Queue, r.Kind = "", ""
	return r
}

// AddMetrics adds rows to the current minute and hour, summing writers of
// the same minute.
func addMetrics(t *testing.T, s *suite) {
	o := s.operator(t)
	q := s.queue(t)
	before := s.now(t)
	for range 2 {
		if err := o.AddMetrics(s.ctx, s.DB, []dialect.MetricRow{metric(q, "A", 1), metric(q, "B", 10)}); err != nil {
			t.Fatal(err)
		}
	}
	after := s.now(t)
	if err := o.AddMetrics(s.ctx, s.DB, nil); err != nil {
		t.Fatalf("adding no rows: %v", err)
	}
	for _, hourly := range []bool{false, true} {
		r := dialect.MetricsRange{From: before/3600*3600 - 3600, To: after + 3600, Step: 3 * 3600, Queue: q, Kind: "A", Hourly: hourly}
		if !hourly {
			r.From, r.Step = before/60*60, 3600
		}
		sums := must[[]dialect.MetricSum](t, "sum")(o.SumMetrics(s.ctx, s.DB, r))
		if len(sums) != 1 || counts(sums[0].MetricRow) != counts(metric(q, "A", 2)) {
			t.Fatalf("hourly %v: the sum of two writes of %s/A is %+v, want %+v", hourly, q, sums, metric(q, "A", 2))
		}
	}
	if before/60 == after/60 {
		if n := s.int(t, "SELECT COUNT(*) FROM "+s.Dialect.Tables().JobsTable()+"_metrics WHERE queue = ? AND kind = ?", q, "A"); n != 1 {
			t.Fatalf("%d minute rows of %s/A written twice in one minute, want 1", n, q)
		}
	}
}

// PruneMetrics deletes up to limit minutes older than age, oldest first,
// and hours whose last minute is that old (own tables).
func pruneMetrics(t *testing.T, s *suite) {
	o := s.own(t)
	op := o.operator(t)
	q := o.queue(t)
	now := o.now(t)
	hour := now/3600*3600 - 10*3600
	for i := range 3 {
		if err := dialect.AddMetricsAt(o.ctx, o.Dialect, o.DB, hour+int64(i)*60, []dialect.MetricRow{metric(q, "A", 1)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := op.AddMetrics(o.ctx, o.DB, []dialect.MetricRow{metric(q, "A", 1)}); err != nil {
		t.Fatal(err)
	}
	if n := must[int64](t, "prune")(op.PruneMetrics(o.ctx, o.DB, 3600, 2)); n != 2 {
		t.Fatalf("prune with limit 2 deleted %d, want 2 minutes", n)
	}
	minutes := o.Dialect.Tables().JobsTable() + "_metrics"
	if got := o.int(t, "SELECT MIN(bucket) FROM "+minutes); got != hour+120 {
		t.Fatalf("after a prune of 2 the oldest minute is %d, want %d (oldest first)", got, hour+120)
	}
	if n := must[int64](t, "prune")(op.PruneMetrics(o.ctx, o.DB, 3600, 100)); n != 1 {
		t.Fatalf("the second prune deleted %d, want the last old minute", n)
	}
	if n := o.int(t, "SELECT COUNT(*) FROM "+minutes); n != 1 {
		t.Fatalf("%d minutes left, want the current one", n)
	}
	if n := o.int(t, "SELECT COUNT(*) FROM "+minutes+"_hourly WHERE bucket = ?", hour); n != 0 {
		t.Fatal("the old hour stayed")
	}
	if n := o.int(t, "SELECT COUNT(*) FROM "+minutes+"_hourly"); n != 1 {
		t.Fatalf("%d hours left, want the current one", n)
	}
}

// SumMetrics sums the minutes (or hours) of a range by step, Group the
// step's index from From, for one queue and kind when set.
func sumMetrics(t *testing.T, s *suite) {
	o := s.operator(t)
	q := s.queue(t)
	base := s.now(t)/3600*3600 - 5*3600
	at := func(off int64, rows ...dialect.MetricRow) {
		t.Helper()
		if err := dialect.AddMetricsAt(s.ctx, s.Dialect, s.DB, base+off, rows); err != nil {
			t.Fatal(err)
		}
	}
	at(0, metric(q, "A", 1), metric(q, "B", 100))
	at(60, metric(q, "A", 2))
	at(600, metric(q, "A", 4))
	at(3600, metric(q, "A", 8))
	sums := must[[]dialect.MetricSum](t, "sum")(o.SumMetrics(s.ctx, s.DB, dialect.MetricsRange{From: base, To: base + 2*3600, Step: 300, Queue: q, Kind: "A"}))
	if len(sums) != 3 || sums[0].Group != 0 || counts(sums[0].MetricRow) != counts(metric(q, "A", 3)) || sums[1].Group != 2 || sums[1].Processed != 4 || sums[2].Group != 12 || sums[2].Processed != 8 {
		t.Fatalf("sums by 5 minutes: %+v, want groups 0 (3), 2 (4), 12 (8)", sums)
	}
	sums = must[[]dialect.MetricSum](t, "sum queue")(o.SumMetrics(s.ctx, s.DB, dialect.MetricsRange{From: base, To: base + 3600, Step: 3600, Queue: q}))
	if len(sums) != 1 || sums[0].Processed != 107 {
		t.Fatalf("sum of the queue's first hour, every kind: %+v, want 107 processed", sums)
	}
	sums = must[[]dialect.MetricSum](t, "hourly")(o.SumMetrics(s.ctx, s.DB, dialect.MetricsRange{From: base, To: base + 2*3600, Step: 3600, Queue: q, Kind: "A", Hourly: true}))
	if len(sums) != 2 || sums[0].Processed != 7 || sums[1].Group != 1 || sums[1].Processed != 8 {
		t.Fatalf("hourly sums: %+v, want 7 then 8", sums)
	}
}

// SumMetricGroups sums a range by queue and kind, sorted; with Top, the
// busiest groups only, each counting the groups in all (own tables:
// Top ranks every group of the range).
func sumMetricGroups(t *testing.T, s *suite) {
	o := s.own(t)
	op := o.operator(t)
	q1, q2 := o.queue(t), o.queue(t)
	base := o.now(t)/3600*3600 - 3*3600
	rows := []dialect.MetricRow{metric(q1, "A", 1), metric(q1, "B", 50), metric(q2, "A", 10)}
	if err := dialect.AddMetricsAt(o.ctx, o.Dialect, o.DB, base, rows); err != nil {
		t.Fatal(err)
	}
	if err := dialect.AddMetricsAt(o.ctx, o.Dialect, o.DB, base+120, rows[:1]); err != nil {
		t.Fatal(err)
	}
	for _, hourly := range []bool{false, true} {
		r := dialect.MetricsRange{From: base, To: base + 3600, Step: 3600, Hourly: hourly}
		all := must[[]dialect.MetricSum](t, "groups")(op.SumMetricGroups(o.ctx, o.DB, r))
		if len(all) != 3 || all[0].MetricRow != metric(q1, "A", 2) || all[1].MetricRow != metric(q1, "B", 50) || all[2].MetricRow != metric(q2, "A", 10) {
			t.Fatalf("hourly %v: groups %+v, want %s/A (2), %s/B (50), %s/A (10) in order", hourly, all, q1, q1, q2)
		}
		r.Top = 2
		top := must[[]dialect.MetricSum](t, "top")(op.SumMetricGroups(o.ctx, o.DB, r))
		if len(top) != 2 || top[0].MetricRow != metric(q1, "B", 50) || top[1].MetricRow != metric(q2, "A", 10) || top[0].Group != 3 || top[1].Group != 3 {
			t.Fatalf("hourly %v: top 2 groups %+v, want %s/B then %s/A, each counting 3 groups", hourly, top, q1, q2)
		}
	}
}

// workerID is a heartbeat id no other subtest uses, within the column's
// 64 bytes.
func (s *suite) workerID() string { return "w" + strconv.FormatInt(s.seq.Add(1), 10) }

func (s *suite) worker(t *testing.T, id string) (dialect.WorkerRow, bool) {
	t.Helper()
	ws, _ := must2w(t, "workers")(s.operator(t).Workers(s.ctx, s.DB))
	for _, w := range ws {
		if w.ID == id {
			return w, true
		}
	}
	return dialect.WorkerRow{}, false
}

// Beat makes a heartbeat row seen now and expiring ttl from now, and
// updates it (its start kept) on the next beat.
func beat(t *testing.T, s *suite) {
	o := s.operator(t)
	id := s.workerID()
	w := dialect.WorkerRow{ID: id, Name: "conformance", Host: "host", Version: "v1", Queues: `["a"]`, PID: 42, Concurrency: 4, Running: 1, Processed: 10}
	before := s.now(t)
	if err := o.Beat(s.ctx, s.DB, w, 30); err != nil {
		t.Fatal(err)
	}
	got, ok := s.worker(t, id)
	if !ok || got.Name != w.Name || got.Host != w.Host || got.Version != w.Version || got.Queues != w.Queues || got.PID != 42 || got.Concurrency != 4 ||
		got.Running != 1 || got.Processed != 10 || got.StartedAt < before || got.LastSeen != got.StartedAt || got.ExpiresAt != got.LastSeen+30 {
		t.Fatalf("heartbeat row %+v (found %v), want %+v started and seen now, expiring 30 s later", got, ok, w)
	}
	s.exec(t, "UPDATE "+s.Dialect.Tables().JobsTable()+"_workers SET started_at = started_at - 100, last_seen = last_seen - 100 WHERE id = ?", id)
	w.Running, w.Processed = 3, 20
	if err := o.Beat(s.ctx, s.DB, w, 60); err != nil {
		t.Fatal(err)
	}
	again, _ := s.worker(t, id)
	if again.StartedAt != got.StartedAt-100 || again.LastSeen < before || again.ExpiresAt != again.LastSeen+60 || again.Running != 3 || again.Processed != 20 {
		t.Fatalf("after a second beat the row reads %+v, want its start kept (%d), seen now, the new counts", again, got.StartedAt-100)
	}
}

// RemoveWorker deletes one heartbeat row.
func removeWorker(t *testing.T, s *suite) {
	o := s.operator(t)
	a, b := s.workerID(), s.workerID()
	for _, id := range []string{a, b} {
		if err := o.Beat(s.ctx, s.DB, dialect.WorkerRow{ID: id, Queues: "[]"}, 30); err != nil {
			t.Fatal(err)
		}
	}
	if err := o.RemoveWorker(s.ctx, s.DB, a); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.worker(t, a); ok {
		t.Fatal("a removed worker is still listed")
	}
	if _, ok := s.worker(t, b); !ok {
		t.Fatal("removing one worker removed another")
	}
}

// PruneWorkers deletes the rows whose expiry has passed (own tables).
func pruneWorkers(t *testing.T, s *suite) {
	o := s.own(t)
	op := o.operator(t)
	dead, live := o.workerID(), o.workerID()
	for _, id := range []string{dead, live} {
		if err := op.Beat(o.ctx, o.DB, dialect.WorkerRow{ID: id, Queues: "[]"}, 30); err != nil {
			t.Fatal(err)
		}
	}
	o.exec(t, "UPDATE "+o.Dialect.Tables().JobsTable()+"_workers SET expires_at = expires_at - 60 WHERE id = ?", dead)
	if n := must[int64](t, "prune")(op.PruneWorkers(o.ctx, o.DB)); n != 1 {
		t.Fatalf("prune deleted %d, want the expired row", n)
	}
	if _, ok := o.worker(t, dead); ok {
		t.Fatal("an expired worker is still listed")
	}
	if _, ok := o.worker(t, live); !ok {
		t.Fatal("prune deleted a live worker")
	}
}

// Workers reads every heartbeat row, sorted by name, host and pid, and the
// database's now.
func workers(t *testing.T, s *suite) {
	o := s.operator(t)
	base, name := s.workerID(), s.queue(t)
	for i, w := range []dialect.WorkerRow{
		{ID: base + "-1", Name: name + "-b", Host: "h", PID: 1},
		{ID: base + "-2", Name: name + "-a", Host: "h", PID: 2},
		{ID: base + "-3", Name: name + "-a", Host: "h", PID: 1},
	} {
		w.Queues = "[]"
		if err := o.Beat(s.ctx, s.DB, w, int64(30+i)); err != nil {
			t.Fatal(err)
		}
	}
	before := s.now(t)
	ws, now := must2w(t, "workers")(o.Workers(s.ctx, s.DB))
	var mine []string
	for _, w := range ws {
		if strings.HasPrefix(w.ID, base+"-") {
			mine = append(mine, w.ID)
		}
	}
	if want := []string{base + "-3", base + "-2", base + "-1"}; !slices.Equal(mine, want) {
		t.Fatalf("workers listed %q, want %q (by name, host, pid)", mine, want)
	}
	if now < before || now > s.now(t) {
		t.Fatalf("workers read now %d, want the database's (%d)", now, before)
	}
}

func must2w(t *testing.T, what string) func(ws []dialect.WorkerRow, now int64, err error) ([]dialect.WorkerRow, int64) {
	return func(ws []dialect.WorkerRow, now int64, err error) ([]dialect.WorkerRow, int64) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return ws, now
	}
}

func (s *suite) historyRows(t *testing.T, f dialect.HistoryFilter) []dialect.HistoryRow {
	t.Helper()
	return must[[]dialect.HistoryRow](t, "history")(s.operator(t).History(s.ctx, s.DB, f))
}

// AddHistory writes finished jobs as given, in order, more than one
// statement's worth included.
func addHistory(t *testing.T, s *suite) {
	o := s.operator(t)
	q := s.queue(t)
	now := s.now(t)
	rows := make([]dialect.HistoryRow, 1500)
	for i := range rows {
		rows[i] = dialect.HistoryRow{ID: int64(i + 1), UUID: q + "-" + strconv.Itoa(i), Queue: q, Kind: "K", Attempts: 2, FinishedAt: now, RuntimeUS: int64(i), Outcome: "ok"}
	}
	if err := o.AddHistory(s.ctx, s.DB, rows); err != nil {
		t.Fatal(err)
	}
	got := s.historyRows(t, dialect.HistoryFilter{Queue: q, Limit: 2000})
	if len(got) != len(rows) {
		t.Fatalf("history of %s holds %d rows, want %d", q, len(got), len(rows))
	}
	last := got[0]
	want := rows[len(rows)-1]
	want.Seq = last.Seq
	if last != want {
		t.Fatalf("the newest row reads %+v, want %+v", last, want)
	}
}

// PruneHistory deletes up to limit rows finished more than age ago,
// oldest first (own tables).
func pruneHistory(t *testing.T, s *suite) {
	o := s.own(t)
	op := o.operator(t)
	q := o.queue(t)
	now := o.now(t)
	var rows []dialect.HistoryRow
	for i, at := range []int64{now - 7000, now - 9000, now - 8000, now} {
		rows = append(rows, dialect.HistoryRow{ID: int64(i), UUID: strconv.Itoa(i), Queue: q, Kind: "K", FinishedAt: at, Outcome: "ok"})
	}
	if err := op.AddHistory(o.ctx, o.DB, rows); err != nil {
		t.Fatal(err)
	}
	if n := must[int64](t, "prune")(op.PruneHistory(o.ctx, o.DB, 3600, 2)); n != 2 {
		t.Fatalf("prune with limit 2 deleted %d", n)
	}
	var left []string
	for _, r := range o.historyRows(t, dialect.HistoryFilter{Limit: 10}) {
		left = append(left, r.UUID)
	}
	if want := []string{"3", "0"}; !slices.Equal(left, want) {
		t.Fatalf("rows left %q, want %q (the two oldest pruned first)", left, want)
	}
	if n := must[int64](t, "prune")(op.PruneHistory(o.ctx, o.DB, 3600, 10)); n != 1 {
		t.Fatalf("the second prune deleted %d, want the last old row", n)
	}
}

// History reads finished jobs newest first, filtered, a page at a time.
func history(t *testing.T, s *suite) {
	o := s.operator(t)
	q := s.queue(t)
	now := s.now(t)
	var rows []dialect.HistoryRow
	for i := range 6 {
		kind, outcome := "A", "ok"
		if i%2 == 1 {
			kind = "B"
		}
		if i%3 == 2 {
			outcome = "failed"
		}
		rows = append(rows, dialect.HistoryRow{ID: int64(i), UUID: strconv.Itoa(i), Queue: q, Kind: kind, FinishedAt: now, Outcome: outcome})
	}
	if err := o.AddHistory(s.ctx, s.DB, rows); err != nil {
		t.Fatal(err)
	}
	uuids := func(f dialect.HistoryFilter) []string {
		t.Helper()
		var out []string
		for _, r := range s.historyRows(t, f) {
			out = append(out, r.UUID)
		}
		return out
	}
	for _, c := range []struct {
		f    dialect.HistoryFilter
		want []string
	}{
		{dialect.HistoryFilter{Queue: q, Limit: 10}, []string{"5", "4", "3", "2", "1", "0"}},
		{dialect.HistoryFilter{Queue: q, Kind: "B", Limit: 10}, []string{"5", "3", "1"}},
		{dialect.HistoryFilter{Queue: q, Outcome: "failed", Limit: 10}, []string{"5", "2"}},
		{dialect.HistoryFilter{Queue: q, Limit: 2}, []string{"5", "4"}},
	} {
		if got := uuids(c.f); !slices.Equal(got, c.want) {
			t.Errorf("history by %+v: %q, want %q", c.f, got, c.want)
		}
	}
	page := s.historyRows(t, dialect.HistoryFilter{Queue: q, Limit: 2})
	next := uuids(dialect.HistoryFilter{Queue: q, Limit: 2, BeforeSeq: page[1].Seq})
	if !slices.Equal(next, []string{"3", "2"}) {
		t.Fatalf("the page before seq %d: %q, want 3, 2", page[1].Seq, next)
	}
}

// DBNow is the database's clock in Unix seconds.
func operatorDBNow(t *testing.T, s *suite) {
	before := s.now(t)
	now := must[int64](t, "DBNow")(s.operator(t).DBNow(s.ctx, s.DB))
	if now < before || now > s.now(t) {
		t.Fatalf("DBNow %d, want the database's now (%d)", now, before)
	}
	if wall := time.Now().Unix(); now < wall-60 || now > wall+60 {
		t.Fatalf("DBNow %d, the host's Unix time %d: want Unix seconds", now, wall)
	}
}
