package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Series is every measured rate (jobs/s) of one system in one mode, with
// the CPU each measurement spent per job (µs) on the client and server side.
type Series struct {
	System   string
	Database Database
	Mode     Mode
	Rates    []float64
	ClientUS []float64
	ServerUS []float64
}

// Median of the rates; 0 for none.
func (s *Series) Median() float64 { return median(s.Rates) }

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	r := slices.Clone(xs)
	slices.Sort(r)
	if len(r)%2 == 1 {
		return r[len(r)/2]
	}
	return (r[len(r)/2-1] + r[len(r)/2]) / 2
}

// Min of the rates; 0 for none.
func (s *Series) Min() float64 {
	if len(s.Rates) == 0 {
		return 0
	}
	return slices.Min(s.Rates)
}

// Max of the rates; 0 for none.
func (s *Series) Max() float64 {
	if len(s.Rates) == 0 {
		return 0
	}
	return slices.Max(s.Rates)
}

// Results collects series in the order systems were first recorded.
type Results struct {
	series []*Series
}

// Add records one measurement of n jobs.
func (r *Results) Add(system string, db Database, mode Mode, n int, m Measurement) {
	var s *Series
	for _, o := range r.series {
		if o.System == system && o.Mode == mode {
			s = o
		}
	}
	if s == nil {
		s = &Series{System: system, Database: db, Mode: mode}
		r.series = append(r.series, s)
	}
	s.Rates = append(s.Rates, float64(n)/m.Elapsed.Seconds())
	s.ClientUS = append(s.ClientUS, perJobUS(m.CPU.Client, n))
	s.ServerUS = append(s.ServerUS, perJobUS(m.CPU.Server, n))
}

func perJobUS(d time.Duration, n int) float64 { return float64(d.Microseconds()) / float64(n) }

func (r *Results) find(pred func(*Series) bool) *Series {
	for _, s := range r.series {
		if pred(s) {
			return s
		}
	}
	return nil
}

// Names of the reference systems the ratios are taken against.
const (
	RiverName       = "river-pg"
	CeilingPrefix   = "ceiling-"
	riverColumnHead = "× River (PG)"
	// CeilingVariantSep separates a ceiling variant's suffix from its base
	// name ("ceiling-pg-b100"); variants are listed, never taken as the
	// reference.
	CeilingVariantSep = "-b"
)

// IsReferenceCeiling reports whether name is a ceiling loop that ratios are
// taken against: "ceiling-pg", "ceiling-mariadb", not a variant.
func IsReferenceCeiling(name string) bool {
	rest, ok := strings.CutPrefix(name, CeilingPrefix)
	return ok && !strings.Contains(rest, CeilingVariantSep)
}

// WriteMarkdown prints one table row per system and mode: median jobs/s, the
// range over rounds, the median's ratio to River's and to the ceiling loop
// of the same database (same mode), and the median CPU per job of the
// benchmark process (the queue's Go side) and of the database servers.
func (r *Results) WriteMarkdown(w io.Writer) {
	fmt.Fprintf(w, "| system | mode | median jobs/s | min | max | rounds | %s | × ceiling (same DB) | client µs/job | server µs/job |\n", riverColumnHead)
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, mode := range []Mode{ModeBurnDown, ModeEndToEnd} {
		for _, s := range r.series {
			if s.Mode != mode {
				continue
			}
			river := r.find(func(o *Series) bool { return o.System == RiverName && o.Mode == mode })
			ceil := r.find(func(o *Series) bool {
				return IsReferenceCeiling(o.System) && o.Database == s.Database && o.Mode == mode
			})
			fmt.Fprintf(w, "| %s | %s | %.0f | %.0f | %.0f | %d | %s | %s | %.1f | %.1f |\n",
				s.System, s.Mode, s.Median(), s.Min(), s.Max(), len(s.Rates),
				ratio(s, river), ratio(s, ceil), median(s.ClientUS), median(s.ServerUS))
		}
	}
}

func ratio(s, ref *Series) string {
	if ref == nil || ref.Median() == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", s.Median()/ref.Median())
}

// WriteRaw prints every measured rate, one line per system and mode.
func (r *Results) WriteRaw(w io.Writer) {
	for _, s := range r.series {
		fmt.Fprintf(w, "%s %s:", s.System, s.Mode)
		for i, x := range s.Rates {
			fmt.Fprintf(w, " %.0f (%.1f+%.1f µs)", x, s.ClientUS[i], s.ServerUS[i])
		}
		fmt.Fprintln(w)
	}
}
