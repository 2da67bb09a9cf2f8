package dbqueue

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"time"

	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// ScheduleInfo is a periodic schedule (package periodic) as the
// schedulers running it recorded it in the schedules table (migration
// 00013). The schedules live in each process's code: the database knows
// only what their schedulers wrote, each when it starts and every few
// minutes (SeenAt), and the process whose push took a tick, as it pushed.
type ScheduleInfo struct {
	// Name is periodic.Job.Name; Spec is its Schedule's String (a cron
	// expression, "every 1m0s"). During a deploy that changes the spec,
	// it is the spec of the process that wrote last.
	Name, Spec string
	// NextTick is the next tick the schedule is due (zero when it has
	// none). A NextTick well in the past says no scheduler runs it.
	NextTick time.Time
	// LastTick is the newest tick pushed (zero: none since the row was
	// made), LastJobID, LastQueue and LastJob the job it pushed (its id,
	// queue and name), and LastPushed when, by the database clock. A push
	// at start (periodic.RunAtStart) counts as a tick at the instant the
	// scheduler started.
	LastTick           time.Time
	LastJobID          int64
	LastQueue, LastJob string
	LastPushed         time.Time
	// SeenAt is when a running scheduler last wrote the row, and SeenAgo
	// how long before the database's now that was: a schedule removed
	// from every process's code stops being seen, and its row is deleted
	// after a week.
	SeenAt  time.Time
	SeenAgo time.Duration
}

// The bounds of ScheduleInfo.State: a running scheduler writes its
// schedules every five minutes and pushes each tick when it is due.
const (
	scheduleUnseen = 15 * time.Minute
	scheduleLate   = time.Minute
)

// State says whether a scheduler keeps the schedule: "unseen" when none
// has written its row for 15 minutes (it was removed or renamed, or every
// process that runs it is down), "late" when its next tick is more than a
// minute past and was not pushed, "ok" otherwise.
func (s ScheduleInfo) State() string {
	now := s.SeenAt.Add(s.SeenAgo) // the database's now when read
	switch {
	case s.SeenAgo > scheduleUnseen:
		return "unseen"
	case !s.NextTick.IsZero() && now.Sub(s.NextTick) > scheduleLate && s.LastTick.Before(s.NextTick):
		return "late"
	}
	return "ok"
}

// Schedules lists the periodic schedules that schedulers keep on the
// queue's tables, by name (at most 10,000). The table comes with
// migration 00013.
func (q *Queue) Schedules(ctx context.Context) ([]ScheduleInfo, error) {
	var (
		rows []dialect.ScheduleRow
		now  int64
	)
	err := sqldb.Retry(ctx, func() (err error) {
		rows, now, err = q.sql.Schedules(ctx, q.db)
		return err
	})
	if err != nil {
		return nil, sqldb.Wrap("schedules", err)
	}
	at := func(n sql.NullInt64) time.Time {
		if !n.Valid {
			return time.Time{}
		}
		return time.Unix(n.Int64, 0)
	}
	out := make([]ScheduleInfo, 0, len(rows))
	for _, r := range rows {
		out = append(out, ScheduleInfo{
			Name: r.Name, Spec: r.Spec, NextTick: at(r.NextTick),
			LastTick: at(r.LastTick), LastJobID: r.LastJobID.Int64, LastQueue: r.Queue, LastJob: r.Job, LastPushed: at(r.LastPushedAt),
			SeenAt: time.Unix(r.SeenAt, 0), SeenAgo: time.Duration(max(now-r.SeenAt, 0)) * time.Second,
		})
	}
	return out, nil
}

// scheduleKey is the schedules table's key of a schedule name.
func scheduleKey(name string) string { return lockKey("periodic-schedule-row", name) }

// SeeSchedules writes the schedules a scheduler keeps (Name, Spec and
// NextTick of each; zero NextTick: none) to the schedules table, as seen
// now. Package periodic calls it when it starts and every few minutes.
func (e workerOps) SeeSchedules(ctx context.Context, list []ScheduleInfo) error {
	rows := make([]dialect.ScheduleRow, len(list))
	for i, s := range list {
		rows[i] = dialect.ScheduleRow{Key: scheduleKey(s.Name), Name: s.Name, Spec: s.Spec, NextTick: nullTime(s.NextTick)}
	}
	// In key order: two processes writing the same rows lock them in one
	// order.
	slices.SortFunc(rows, func(a, b dialect.ScheduleRow) int { return strings.Compare(a.Key, b.Key) })
	err := sqldb.Retry(ctx, func() error {
		return e.q.sql.SeeSchedules(ctx, e.q.db, rows)
	})
	return sqldb.Wrap("record periodic schedules", err)
}

// RecordScheduleTick writes the tick s.LastTick that this process just
// pushed (job s.LastJobID, of s.LastQueue and s.LastJob), unless a later
// tick is recorded already. Package periodic calls it after a push.
func (e workerOps) RecordScheduleTick(ctx context.Context, s ScheduleInfo) error {
	if s.LastQueue == "" {
		s.LastQueue = e.q.DefaultQueue()
	}
	r := dialect.ScheduleRow{Key: scheduleKey(s.Name), Name: s.Name, Spec: s.Spec, Queue: s.LastQueue, Job: s.LastJob,
		NextTick: nullTime(s.NextTick), LastTick: nullTime(s.LastTick), LastJobID: sql.NullInt64{Int64: s.LastJobID, Valid: true}}
	err := sqldb.Retry(ctx, func() error {
		return e.q.sql.RecordScheduleTick(ctx, e.q.db, r)
	})
	return sqldb.Wrap("record a periodic tick", err)
}

// PruneSchedules deletes up to limit schedule rows no scheduler has
// written for age seconds, and returns how many.
func (e workerOps) PruneSchedules(ctx context.Context, age int64, limit int) (int64, error) {
	var n int64
	err := sqldb.Retry(ctx, func() (err error) {
		n, err = e.q.sql.PruneSchedules(ctx, e.q.db, age, limit)
		return err
	})
	return n, sqldb.Wrap("prune periodic schedules", err)
}

func nullTime(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.Unix(), Valid: true}
}
