package main

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// soakTable is a soak CSV read back: its comment line, column names and
// rows.
type soakTable struct {
	header string
	cols   []string
	rows   [][]float64
}

func readSoakFile(path string) (*soakTable, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	t := &soakTable{}
	if line, err := br.ReadString('\n'); err == nil && strings.HasPrefix(line, "# ") {
		t.header = strings.TrimSpace(strings.TrimPrefix(line, "# "))
	} else {
		return nil, fmt.Errorf("%s: no header comment line; is it a soak CSV?", path)
	}
	r := csv.NewReader(br)
	if t.cols, err = r.Read(); err != nil {
		return nil, fmt.Errorf("%s: columns: %w", path, err)
	}
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		row := make([]float64, len(rec))
		for i, s := range rec {
			if row[i], err = strconv.ParseFloat(s, 64); err != nil {
				return nil, fmt.Errorf("%s: column %s: %w", path, t.cols[i], err)
			}
		}
		t.rows = append(t.rows, row)
	}
	return t, nil
}

func (t *soakTable) col(name string) []float64 {
	i := slices.Index(t.cols, name)
	if i < 0 {
		return nil
	}
	out := make([]float64, len(t.rows))
	for j, r := range t.rows {
		out[j] = r[i]
	}
	return out
}

// soakSeries are the columns the summary and the plot show: all but the
// clock and the load (which is the machine's, not the queue's).
func (t *soakTable) series() []string {
	var out []string
	for _, c := range t.cols {
		if c != "elapsed_s" && c != "load1" {
			out = append(out, c)
		}
	}
	return out
}

// spread is a series after the warm-up: its mean, range and the largest
// distance from the mean as a share of it.
type spread struct {
	mean, median, lo, hi, dev float64
	n                         int
}

func spreadOf(xs []float64) spread {
	if len(xs) == 0 {
		return spread{}
	}
	s := spread{lo: slices.Min(xs), hi: slices.Max(xs), n: len(xs), median: median(xs)}
	for _, x := range xs {
		s.mean += x
	}
	s.mean /= float64(len(xs))
	if s.mean != 0 {
		s.dev = math.Max(s.hi-s.mean, s.mean-s.lo) / math.Abs(s.mean)
	}
	return s
}

// after is the part of a column sampled at or after warm.
func (t *soakTable) after(name string, warm time.Duration) []float64 {
	el, xs := t.col("elapsed_s"), t.col(name)
	var out []float64
	for i, e := range el {
		if e >= warm.Seconds() {
			out = append(out, xs[i])
		}
	}
	return out
}

// summarizeSoakFile is a markdown table of every series after warm: mean,
// min, max and the largest distance from the mean, with whether it stayed
// within ±10%. Counters that only grow (autovacuums) show their increase.
func summarizeSoakFile(path string, warm time.Duration) (string, error) {
	t, err := readSoakFile(path)
	if err != nil {
		return "", err
	}
	el := t.col("elapsed_s")
	if len(el) == 0 {
		return "", fmt.Errorf("%s: no samples", path)
	}
	load := spreadOf(t.col("load1"))
	var b strings.Builder
	fmt.Fprintf(&b, "%d samples over %s; after the first %s (%d samples): load average %.1f–%.1f (mean %.1f)\n\n",
		len(el), time.Duration(el[len(el)-1]*float64(time.Second)).Round(time.Second), warm, len(t.after("elapsed_s", warm)), load.lo, load.hi, load.mean)
	b.WriteString("| series | mean | median | min | max | largest distance from the mean | within ±10% |\n|---|---:|---:|---:|---:|---:|---|\n")
	for _, name := range t.series() {
		xs := t.after(name, warm)
		s := spreadOf(xs)
		if name == "autovacuums" {
			fmt.Fprintf(&b, "| %s | – | – | %s | %s | %s runs in the window | – |\n", name, num(s.lo), num(s.hi), num(s.hi-s.lo))
			continue
		}
		verdict := "yes"
		if s.dev > 0.10 {
			verdict = "**no**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %.0f%% | %s |\n", name, num(s.mean), num(s.median), num(s.lo), num(s.hi), s.dev*100, verdict)
	}
	return b.String(), nil
}

func num(x float64) string {
	switch a := math.Abs(x); {
	case a >= 100:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case a >= 1:
		return strconv.FormatFloat(x, 'f', 1, 64)
	default:
		return strconv.FormatFloat(x, 'g', 3, 64)
	}
}
