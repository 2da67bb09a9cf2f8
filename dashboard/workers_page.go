package dashboard

import (
	"net/http"
	"slices"
	"strings"

	"github.com/dbqueue/dbqueue"
)

// maxWorkerRows bounds the workers page; a fleet larger than this is
// summed in the line above the table.
const maxWorkerRows = 500

type workersData struct {
	Workers  []dbqueue.WorkerInfo
	LeftOut  int
	Running  int64 // jobs held, over every worker
	Capacity int64 // goroutines, over every worker
	// Schedules are the periodic schedules their schedulers recorded;
	// SchedulesErr says why they could not be read (the table of
	// migration 00013 missing), without failing the page.
	Schedules    []dbqueue.ScheduleInfo
	SchedulesErr string
}

// workersPage lists the workers' heartbeat rows: who is running, where,
// on which queues, and how busy; and the periodic schedules, what pushes
// jobs on a clock.
func (d *Dashboard) workersPage(w http.ResponseWriter, r *http.Request) {
	list, err := d.q.Workers(r.Context())
	if err != nil {
		d.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	slices.SortStableFunc(list, func(a, b dbqueue.WorkerInfo) int {
		if c := strings.Compare(a.Host, b.Host); c != 0 {
			return c
		}
		return int(a.PID - b.PID)
	})
	data := workersData{}
	for _, wi := range list {
		data.Running += wi.Running
		data.Capacity += wi.Concurrency
	}
	if len(list) > maxWorkerRows {
		data.LeftOut = len(list) - maxWorkerRows
		list = list[:maxWorkerRows]
	}
	data.Workers = list
	if data.Schedules, err = d.q.Schedules(r.Context()); err != nil {
		data.SchedulesErr = "schedules unavailable: " + err.Error()
	}
	d.render(w, r, http.StatusOK, "workers", d.view(w, r, "Workers", "workers", data))
}
