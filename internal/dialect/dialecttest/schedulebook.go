package dialecttest

import (
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"testing"

	"github.com/dbqueue/dbqueue/internal/dialect"
)

// scheduleBookTests are ScheduleBook's.
var scheduleBookTests = []test{
	{method: "SeeSchedules", fn: seeSchedules},
	{method: "RecordScheduleTick", fn: recordScheduleTick},
	{method: "Schedules", fn: readSchedules},
	{method: "PruneSchedules", fn: pruneSchedules},
}

// scheduleRow is a row for the schedule named name, keyed as the
// scheduler keys it.
func scheduleRow(name, spec string, next int64) dialect.ScheduleRow {
	sum := sha256.Sum256([]byte(name))
	return dialect.ScheduleRow{Key: hex.EncodeToString(sum[:]), Name: name, Spec: spec, NextTick: sql.NullInt64{Int64: next, Valid: true}}
}

// schedulesByName reads the table into a map by name.
func schedulesByName(t *testing.T, s *suite) (map[string]dialect.ScheduleRow, int64) {
	t.Helper()
	rows, now, err := s.Dialect.Schedules(s.ctx, s.DB)
	if err != nil {
		t.Fatalf("Schedules: %v", err)
	}
	out := map[string]dialect.ScheduleRow{}
	for _, r := range rows {
		out[r.Name] = r
	}
	return out, now
}

// SeeSchedules inserts new rows and updates name, spec and next tick of
// known ones, stamping seen_at with the database's clock and leaving what
// was pushed as it was.
func seeSchedules(t *testing.T, s *suite) {
	o := s.own(t)
	b := o.Dialect
	now := o.now(t)
	a, c := scheduleRow("every-minute", "@every 1m", now+60), scheduleRow("nightly ☾", "0 3 * * *", now+3600)
	if err := b.SeeSchedules(o.ctx, o.DB, nil); err != nil {
		t.Fatalf("SeeSchedules of no rows: %v", err)
	}
	if err := b.SeeSchedules(o.ctx, o.DB, []dialect.ScheduleRow{a, c}); err != nil {
		t.Fatalf("SeeSchedules: %v", err)
	}
	tick := a
	tick.Queue, tick.Job = "default", "Tick"
	tick.LastTick = sql.NullInt64{Int64: now, Valid: true}
	tick.LastJobID = sql.NullInt64{Int64: 42, Valid: true}
	if err := b.RecordScheduleTick(o.ctx, o.DB, tick); err != nil {
		t.Fatalf("RecordScheduleTick: %v", err)
	}
	a.Spec, a.NextTick = "@every 2m", sql.NullInt64{Int64: now + 120, Valid: true}
	if err := b.SeeSchedules(o.ctx, o.DB, []dialect.ScheduleRow{a}); err != nil {
		t.Fatalf("SeeSchedules again: %v", err)
	}
	got, _ := schedulesByName(t, o)
	if len(got) != 2 {
		t.Fatalf("%d schedules, want 2: %+v", len(got), got)
	}
	r := got["every-minute"]
	if r.Spec != "@every 2m" || r.NextTick.Int64 != now+120 {
		t.Fatalf("seen again: spec %q next %v, want the new spec and next tick", r.Spec, r.NextTick)
	}
	if r.LastTick.Int64 != now || r.LastJobID.Int64 != 42 || r.Queue != "default" || r.Job != "Tick" || !r.LastPushedAt.Valid {
		t.Fatalf("SeeSchedules changed what was pushed: %+v", r)
	}
	if r.SeenAt < now || r.SeenAt > now+60 {
		t.Fatalf("seen_at %d, want the database's now (%d)", r.SeenAt, now)
	}
	if got["nightly ☾"].Spec != "0 3 * * *" {
		t.Fatalf("the second schedule: %+v", got["nightly ☾"])
	}
}

// RecordScheduleTick keeps the latest tick: a tick recorded after a later
// one changes nothing.
func recordScheduleTick(t *testing.T, s *suite) {
	o := s.own(t)
	b := o.Dialect
	now := o.now(t)
	row := func(tick, job int64) dialect.ScheduleRow {
		r := scheduleRow("reports", "@every 1m", tick+60)
		r.Queue, r.Job = "reports", "BuildReport"
		r.LastTick = sql.NullInt64{Int64: tick, Valid: true}
		r.LastJobID = sql.NullInt64{Int64: job, Valid: true}
		return r
	}
	if err := b.RecordScheduleTick(o.ctx, o.DB, row(now, 1)); err != nil {
		t.Fatalf("first tick: %v", err)
	}
	if err := b.RecordScheduleTick(o.ctx, o.DB, row(now+60, 2)); err != nil {
		t.Fatalf("later tick: %v", err)
	}
	if err := b.RecordScheduleTick(o.ctx, o.DB, row(now, 3)); err != nil {
		t.Fatalf("stale tick: %v", err)
	}
	got, _ := schedulesByName(t, o)
	r := got["reports"]
	if r.LastTick.Int64 != now+60 || r.LastJobID.Int64 != 2 || r.NextTick.Int64 != now+120 {
		t.Fatalf("after a stale tick: last tick %v job %v next %v, want the later tick's", r.LastTick, r.LastJobID, r.NextTick)
	}
	if r.Queue != "reports" || r.Job != "BuildReport" || !r.LastPushedAt.Valid || r.LastPushedAt.Int64 < now {
		t.Fatalf("tick row %+v", r)
	}
}

// Schedules reads every row by name, with the database's clock.
func readSchedules(t *testing.T, s *suite) {
	o := s.own(t)
	b := o.Dialect
	if rows, now, err := b.Schedules(o.ctx, o.DB); err != nil || len(rows) != 0 || now == 0 {
		t.Fatalf("empty table: %d rows, now %d, %v", len(rows), now, err)
	}
	now := o.now(t)
	if err := b.SeeSchedules(o.ctx, o.DB, []dialect.ScheduleRow{scheduleRow("b", "@every 1m", now), scheduleRow("a", "@every 1m", now), scheduleRow("c", "@every 1m", now)}); err != nil {
		t.Fatal(err)
	}
	rows, dbNow, err := b.Schedules(o.ctx, o.DB)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rows {
		names = append(names, r.Name)
	}
	if len(names) != 3 || names[0] != "a" || names[1] != "b" || names[2] != "c" {
		t.Fatalf("schedules %v, want a, b, c by name", names)
	}
	if dbNow < now {
		t.Fatalf("now %d before the clock read earlier (%d)", dbNow, now)
	}
}

// PruneSchedules deletes up to limit rows not seen for age seconds and
// keeps the rest.
func pruneSchedules(t *testing.T, s *suite) {
	o := s.own(t)
	b := o.Dialect
	now := o.now(t)
	var rows []dialect.ScheduleRow
	for _, n := range []string{"old-1", "old-2", "old-3", "fresh"} {
		rows = append(rows, scheduleRow(n, "@every 1m", now))
	}
	if err := b.SeeSchedules(o.ctx, o.DB, rows); err != nil {
		t.Fatal(err)
	}
	o.exec(t, "UPDATE "+o.jobs()+"_schedules SET seen_at = seen_at - 7200 WHERE name <> 'fresh'")
	if n, err := b.PruneSchedules(o.ctx, o.DB, 3600, 2); err != nil || n != 2 {
		t.Fatalf("prune with limit 2: %d, %v", n, err)
	}
	if n, err := b.PruneSchedules(o.ctx, o.DB, 3600, 100); err != nil || n != 1 {
		t.Fatalf("second prune: %d, %v; want the last old row", n, err)
	}
	got, _ := schedulesByName(t, o)
	if len(got) != 1 || got["fresh"].Name != "fresh" {
		t.Fatalf("left %v, want only the fresh schedule", got)
	}
}
