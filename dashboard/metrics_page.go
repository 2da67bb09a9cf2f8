package dashboard

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/dbqueue/dbqueue"
)

// span is a range the metrics page offers: how far back, and the length
// of each point (a week of minutes is more points than a chart can show).
type span struct {
	Name, Label string
	Window      time.Duration
	Step        time.Duration
}

var spans = []span{
	{"hour", "Last hour", time.Hour, time.Minute},
	{"day", "Last day", 24 * time.Hour, 15 * time.Minute},
	{"week", "Last week", 7 * 24 * time.Hour, 2 * time.Hour},
}

// maxGroupRows bounds the per queue and kind table: the database returns
// the busiest rows (MetricsQuery.TopGroups) and one sum of the rest, which
// the table shows as its last row.
const maxGroupRows = 200

// groupRow is one queue and kind's line of the metrics table.
type groupRow struct {
	Queue, Kind                 string
	Processed, Failed, Released int64
	PerMin                      string // finished jobs per minute over the range
	FailedPct                   string
	RuntimeP50, RuntimeP95      string // ms
	WaitP50, WaitP95            string // ms
}

type metricsData struct {
	Span, Queue, Kind string
	Spans             []span
	Missing           string // the metrics table is missing: what to do
	Total             groupRow
	Charts            []chart
	Groups            []groupRow
	// Other sums the GroupsLeftOut quieter pairs the table leaves out.
	Other         groupRow
	GroupsLeftOut int
	// Filter is the query string of the queue and kind filters, for the
	// range links.
	Filter string
}

func (d *Dashboard) metricsPage(w http.ResponseWriter, r *http.Request) {
	query := r.URL.Query()
	data := metricsData{Span: query.Get("range"), Queue: query.Get("queue"), Kind: query.Get("kind"), Spans: spans}
	if data.Span == "" {
		data.Span = "hour"
	}
	i := slices.IndexFunc(spans, func(s span) bool { return s.Name == data.Span })
	if i < 0 {
		d.fail(w, r, http.StatusBadRequest, fmt.Errorf("range=%q: use hour, day or week", data.Span))
		return
	}
	sp := spans[i]
	filter := url.Values{}
	for _, k := range []string{"queue", "kind"} {
		if v := query.Get(k); v != "" {
			filter.Set(k, v)
		}
	}
	data.Filter = filter.Encode()
	m, err := d.q.Metrics(r.Context(), dbqueue.MetricsQuery{Window: sp.Window, Step: sp.Step, Queue: data.Queue, Kind: data.Kind,
		TopGroups: maxGroupRows})
	if err != nil {
		d.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	data.Charts = metricCharts(m, "m")
	data.Total = newGroupRow("", "", m.Total.Processed, m.Total.Failed, m.Total.Released, m.Total, m.Until.Sub(m.Since))
	// The busiest first, as the database ranked them.
	rows := make([]groupRow, 0, len(m.Groups))
	for _, g := range m.Groups {
		rows = append(rows, newGroupRow(g.Queue, g.Kind, g.Processed, g.Failed, g.Released, g.MetricsPoint, m.Until.Sub(m.Since)))
	}
	data.Groups = rows
	if m.OtherGroups > 0 {
		data.GroupsLeftOut = m.OtherGroups
		data.Other = newGroupRow("", "", m.Other.Processed, m.Other.Failed, m.Other.Released, m.Other, m.Until.Sub(m.Since))
	}
	d.render(w, r, http.StatusOK, "metrics", d.view(w, r, "Metrics", "metrics", data))
}

// noMetrics is what an empty metrics chart says.
const noMetrics = "no jobs finished in this range (Go workers record them each minute; PHP workers do not)"

// metricCharts are the throughput, runtime and wait charts of m; prefix
// keeps their ids apart from another set on the page.
func metricCharts(m dbqueue.Metrics, prefix string) []chart {
	n := len(m.Points)
	times := make([]time.Time, n)
	perMin := m.Step.Minutes()
	processed, failed, released := make([]float64, n), make([]float64, n), make([]float64, n)
	rt50, rt95, wt50, wt95 := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	seen := false
	for i, p := range m.Points {
		times[i] = p.Start
		processed[i] = float64(p.Processed) / perMin
		failed[i] = float64(p.Failed) / perMin
		released[i] = float64(p.Released) / perMin
		rt50[i], rt95[i], wt50[i], wt95[i] = math.NaN(), math.NaN(), math.NaN(), math.NaN()
		if p.Finished() > 0 {
			seen = true
			rt50[i], rt95[i] = ms(p.RuntimeP50), ms(p.RuntimeP95)
		}
		if p.Processed+p.Failed+p.Released > 0 {
			wt50[i], wt95[i] = ms(p.WaitP50), ms(p.WaitP95)
		}
	}
	if !seen { // no line at zero for a range nobody recorded
		for i := range processed {
			processed[i], failed[i], released[i] = math.NaN(), math.NaN(), math.NaN()
		}
	}
	step := "per minute"
	if m.Step > time.Minute {
		step = "per minute, averaged over " + shortDuration(m.Step)
	}
	return []chart{
		{ID: prefix + "-throughput", Title: "Jobs finished " + step, Unit: "jobs/min", Times: times, Empty: noMetrics, Series: []series{
			{"processed", "s-processed", processed}, {"failed", "s-failed", failed}, {"released", "s-released", released},
		}},
		{ID: prefix + "-runtime", Title: "Handler runtime", Unit: "ms", Times: times, Empty: noMetrics, Series: []series{
			{"median", "s-p50", rt50}, {"95th percentile", "s-p95", rt95},
		}},
		{ID: prefix + "-wait", Title: "Wait from due to start", Unit: "ms", Times: times, Empty: noMetrics, Series: []series{
			{"median", "s-p50", wt50}, {"95th percentile", "s-p95", wt95},
		}},
	}
}

func newGroupRow(queue, kind string, processed, failed, released int64, p dbqueue.MetricsPoint, over time.Duration) groupRow {
	g := groupRow{Queue: queue, Kind: kind, Processed: processed, Failed: failed, Released: released,
		PerMin: "—", FailedPct: "—", RuntimeP50: "—", RuntimeP95: "—", WaitP50: "—", WaitP95: "—"}
	if over > 0 {
		g.PerMin = short(float64(processed+failed+released) / over.Minutes())
	}
	if processed+failed > 0 {
		g.FailedPct = short(100 * p.FailureRate())
	}
	if p.Finished() > 0 {
		g.RuntimeP50, g.RuntimeP95 = short(ms(p.RuntimeP50)), short(ms(p.RuntimeP95))
		g.WaitP50, g.WaitP95 = short(ms(p.WaitP50)), short(ms(p.WaitP95))
	}
	return g
}

// throughputCache keeps the queues page's chart for an Interval, as the
// sampler keeps the counts: the metrics are per minute, and many open
// pages should not each sum an hour of every queue.
type throughputCache struct {
	mu    sync.Mutex
	chart chart
	at    time.Time
}

// recentThroughput is the queues page's chart: jobs finished per minute
// over the last hour, as workers recorded them. A database without the
// metrics table gets a chart that says to migrate, not an error page: the
// counts above it still work.
func (d *Dashboard) recentThroughput(ctx context.Context) chart {
	d.throughput.mu.Lock()
	defer d.throughput.mu.Unlock()
	if time.Since(d.throughput.at) < d.opts.Interval {
		return d.throughput.chart
	}
	m, err := d.q.Metrics(ctx, dbqueue.MetricsQuery{Window: time.Hour, NoGroups: true})
	if err != nil {
		return chart{ID: "q-throughput", Title: "Jobs finished per minute", Unit: "jobs/min",
			Empty: "metrics unavailable: " + err.Error()}
	}
	c := metricCharts(m, "q")[0]
	c.Title += ", last hour"
	d.throughput.chart, d.throughput.at = c, time.Now()
	return c
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// shortDuration is 15 min, 2 h.
func shortDuration(d time.Duration) string {
	if d >= time.Hour && d%time.Hour == 0 {
		return fmt.Sprintf("%d h", d/time.Hour)
	}
	return fmt.Sprintf("%d min", d/time.Minute)
}
