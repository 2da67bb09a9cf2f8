package dashboard

import (
	"fmt"
	"html/template"
	"math"
	"strings"
	"time"
)

// chart is a line chart drawn on the server as inline SVG: no script, and
// nothing for the page's Content-Security-Policy to refuse (colours are
// classes of the style sheet). Its numbers are also a table (Rows), the
// text alternative a screen reader or a copy-and-paste wants.
type chart struct {
	ID    string // unique on the page: the SVG's title and desc ids
	Title string
	// Unit is what every value is in, shown on the axis and in the
	// table's headings: "jobs/min", "ms".
	Unit   string
	Times  []time.Time // one per point
	Series []series
	// Empty is the note shown instead of lines when no series has a
	// value.
	Empty string
}

// series is one line. A NaN value is no value: the line breaks there.
type series struct {
	Label  string
	Class  string // s-processed, s-failed, …: the colour
	Values []float64
}

// chart geometry, in the SVG's own units.
const (
	chartW, chartH = 600, 200
	chartL, chartR = 58, 8
	chartT, chartB = 24, 22
)

// SVG draws the chart.
func (c chart) SVG() template.HTML {
	var b strings.Builder
	esc := template.HTMLEscapeString
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %d %d" preserveAspectRatio="none" role="img" aria-labelledby="%s-title %s-desc">`,
		chartW, chartH, esc(c.ID), esc(c.ID))
	fmt.Fprintf(&b, `<title id="%s-title">%s, %s</title><desc id="%s-desc">%s</desc>`,
		esc(c.ID), esc(c.Title), esc(c.Unit), esc(c.ID), esc(c.Summary()))
	top := 0.0
	for _, s := range c.Series {
		for _, v := range s.Values {
			if !math.IsNaN(v) && v > top {
				top = v
			}
		}
	}
	if !c.hasValues() {
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" class="chart-note">%s</text></svg>`, chartW/2, chartH/2, esc(c.Empty))
		return template.HTML(b.String())
	}
	top = nice(top * 1.05)
	n := len(c.Times)
	x := func(i int) float64 {
		if n < 2 {
			return chartL
		}
		return chartL + float64(chartW-chartL-chartR)*float64(i)/float64(n-1)
	}
	y := func(v float64) float64 { return chartT + float64(chartH-chartT-chartB)*(1-v/top) }
	for _, f := range []float64{0, 0.5, 1} {
		v := top * f
		fmt.Fprintf(&b, `<line class="grid" x1="%d" x2="%d" y1="%.1f" y2="%.1f"/>`, chartL, chartW-chartR, y(v), y(v))
		fmt.Fprintf(&b, `<text class="axis" x="%d" y="%.1f" text-anchor="end">%s</text>`, chartL-4, y(v)+4, esc(short(v)))
	}
	fmt.Fprintf(&b, `<text class="axis unit-label" x="%d" y="12" text-anchor="end">%s</text>`, chartL-4, esc(c.Unit))
	if n > 0 {
		fmt.Fprintf(&b, `<text class="axis" x="%d" y="%d">%s</text>`, chartL, chartH-4, esc(clock(c.Times[0])))
		fmt.Fprintf(&b, `<text class="axis" x="%d" y="%d" text-anchor="end">%s</text>`, chartW-chartR, chartH-4, esc(clock(c.Times[n-1])))
	}
	for _, s := range c.Series {
		var pts [][2]float64
		flush := func() {
			switch len(pts) {
			case 0:
			case 1: // a lone point between gaps: a dot
				fmt.Fprintf(&b, `<circle class="%s" cx="%.1f" cy="%.1f" r="2.5"/>`, esc(s.Class), pts[0][0], pts[0][1])
			default:
				fmt.Fprintf(&b, `<polyline class="%s" points="`, esc(s.Class))
				for i, p := range pts {
					if i > 0 {
						b.WriteByte(' ')
					}
					fmt.Fprintf(&b, "%.1f,%.1f", p[0], p[1])
				}
				b.WriteString(`"/>`)
			}
			pts = pts[:0]
		}
		for i, v := range s.Values {
			if math.IsNaN(v) {
				flush()
				continue
			}
			pts = append(pts, [2]float64{x(i), y(v)})
		}
		flush()
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// hasValues reports whether any series has a value to draw.
func (c chart) hasValues() bool {
	for _, s := range c.Series {
		for _, v := range s.Values {
			if !math.IsNaN(v) {
				return true
			}
		}
	}
	return false
}

// Summary is the chart in a sentence, for its SVG description: each
// series' latest value and its highest, with the unit.
func (c chart) Summary() string {
	if !c.hasValues() {
		return c.Empty
	}
	var parts []string
	for _, s := range c.Series {
		last, peak := math.NaN(), math.NaN()
		for _, v := range s.Values {
			if math.IsNaN(v) {
				continue
			}
			last = v
			if math.IsNaN(peak) || v > peak {
				peak = v
			}
		}
		if math.IsNaN(last) {
			parts = append(parts, s.Label+": no data")
			continue
		}
		parts = append(parts, fmt.Sprintf("%s: latest %s %s, highest %s %s", s.Label, short(last), c.Unit, short(peak), c.Unit))
	}
	span := ""
	if n := len(c.Times); n > 1 {
		span = fmt.Sprintf(" from %s to %s UTC", clock(c.Times[0]), clock(c.Times[n-1]))
	}
	return c.Title + span + ". " + strings.Join(parts, "; ") + "."
}

// Rows are the chart's numbers for its table, the points with a value
// only.
func (c chart) Rows() [][]string {
	var out [][]string
	for i, t := range c.Times {
		row := []string{clock(t)}
		any := false
		for _, s := range c.Series {
			if i < len(s.Values) && !math.IsNaN(s.Values[i]) {
				row = append(row, short(s.Values[i]))
				any = true
			} else {
				row = append(row, "—")
			}
		}
		if any {
			out = append(out, row)
		}
	}
	return out
}

// nice rounds a chart's top up to a round number, so the axis reads well.
func nice(v float64) float64 {
	if !(v > 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, s := range []float64{1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10} {
		if s*p >= v {
			return s * p
		}
	}
	return 10 * p
}

// short formats a number for an axis or a table cell: 0.25, 3.5, 42,
// 1,250, 12k.
func short(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100000:
		return fmt.Sprintf("%.0fk", v/1000)
	case a >= 100:
		return group(int64(math.Round(v)))
	case a >= 10:
		return fmt.Sprintf("%.0f", v)
	case a >= 1:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", v), ".0")
	case a == 0:
		return "0"
	case a < 0.001:
		return "<0.001"
	}
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3f", v), "0"), ".")
}

// group writes an integer with thousands separators: 1,250,000.
func group(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// clock is a time of day in UTC, with the date when it is not today's.
func clock(t time.Time) string {
	t = t.UTC()
	if now := time.Now().UTC(); t.YearDay() == now.YearDay() && t.Year() == now.Year() {
		return t.Format("15:04")
	}
	return t.Format("Jan 2 15:04")
}
