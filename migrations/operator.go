package migrations

// MetricsTable is the table of per-minute job counts and timings that
// workers write (migration 00009): <jobs>_metrics, schema-qualified when
// Schema is set. It belongs to the jobs table it counts, as the
// middleware's <jobs>_limits does.
func (t Tables) MetricsTable() string { return t.qualify(t.withDefaults().Jobs + "_metrics") }

// WorkersTable is the table of running workers' heartbeats (migration
// 00009): <jobs>_workers, schema-qualified when Schema is set.
func (t Tables) WorkersTable() string { return t.qualify(t.withDefaults().Jobs + "_workers") }

// HistoryTable is the table of finished jobs workers write when
// worker.Options.HistoryRetention is set (migration 00009):
// <jobs>_history, schema-qualified when Schema is set.
func (t Tables) HistoryTable() string { return t.qualify(t.withDefaults().Jobs + "_history") }

// MetricsHourlyTable is the table of per-hour job counts and timings
// (migration 00011): <jobs>_metrics_hourly, schema-qualified when Schema
// is set. Workers add to it and to MetricsTable in one transaction, so
// long ranges read an hour's row instead of its 60 minutes.
func (t Tables) MetricsHourlyTable() string {
	return t.qualify(t.withDefaults().Jobs + "_metrics_hourly")
}

// SchedulesTable is the table where periodic schedulers record the
// schedules they keep (migration 00013): <jobs>_schedules,
// schema-qualified when Schema is set. It reports them (Queue.Schedules);
// the tick locks in UniqueTable decide what is pushed.
func (t Tables) SchedulesTable() string { return t.qualify(t.withDefaults().Jobs + "_schedules") }
