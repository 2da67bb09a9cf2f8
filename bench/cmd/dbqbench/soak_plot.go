package main

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"os"
	"strings"
	"time"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// The plot's geometry and colours.
const (
	plotCols    = 3
	panelW      = 420
	panelH      = 190
	plotMarginL = 64
	plotMarginR = 14
	plotMarginT = 24
	plotMarginB = 22
)

var (
	colBack  = color.RGBA{255, 255, 255, 255}
	colAxis  = color.RGBA{120, 120, 120, 255}
	colGrid  = color.RGBA{232, 232, 232, 255}
	colBand  = color.RGBA{214, 234, 214, 255}
	colLine  = color.RGBA{31, 90, 170, 255}
	colWarm  = color.RGBA{200, 120, 40, 255}
	colText  = color.RGBA{20, 20, 20, 255}
	colOver  = color.RGBA{190, 30, 30, 255}
	lineFace = basicfont.Face7x13
)

// plotSoakFile draws every series of a soak CSV as its own panel: the
// samples as a line, the band ±10% around the mean after the warm-up in
// green, the warm-up's end as an orange line; a panel's title turns red
// when its series left the band. Drawn with the standard library's image
// packages and one bitmap font, so the plot needs no tool outside Go.
func plotSoakFile(csvPath, pngPath string) error {
	t, err := readSoakFile(csvPath)
	if err != nil {
		return err
	}
	el := t.col("elapsed_s")
	if len(el) == 0 {
		return fmt.Errorf("%s: no samples to plot", csvPath)
	}
	warm := soakWarmup(time.Duration(el[len(el)-1] * float64(time.Second)))
	names := append(t.series(), "load1") // the machine's, beside the queue's, to read the rest against
	headerLines := wrap(t.header, (plotCols*panelW-20)/7)
	top := 10 + 15*len(headerLines) + 8
	rows := (len(names) + plotCols - 1) / plotCols
	img := image.NewRGBA(image.Rect(0, 0, plotCols*panelW, top+rows*panelH))
	draw.Draw(img, img.Bounds(), image.NewUniform(colBack), image.Point{}, draw.Src)
	for i, l := range headerLines {
		text(img, 10, 20+15*i, l, colText)
	}
	for i, name := range names {
		x0, y0 := (i%plotCols)*panelW, top+(i/plotCols)*panelH
		panel(img, image.Rect(x0, y0, x0+panelW, y0+panelH), name, el, t.col(name), warm)
	}
	f, err := os.Create(pngPath)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func panel(img *image.RGBA, r image.Rectangle, name string, el, ys []float64, warm time.Duration) {
	area := image.Rect(r.Min.X+plotMarginL, r.Min.Y+plotMarginT, r.Max.X-plotMarginR, r.Max.Y-plotMarginB)
	var after []float64
	for i, e := range el {
		if e >= warm.Seconds() {
			after = append(after, ys[i])
		}
	}
	s := spreadOf(after)
	lo, hi := minMax(ys)
	banded := len(after) > 0 && name != "autovacuums" && name != "load1"
	if banded {
		lo, hi = math.Min(lo, s.mean*0.9), math.Max(hi, s.mean*1.1)
	}
	lo = math.Min(lo, 0) // from zero, so a small wobble on a large value looks small
	if hi <= lo {
		hi = lo + 1
	}
	hi += (hi - lo) * 0.05
	xMax := math.Max(el[len(el)-1], 1)
	px := func(e float64) int { return area.Min.X + int(e/xMax*float64(area.Dx()-1)) }
	py := func(v float64) int { return area.Max.Y - 1 - int((v-lo)/(hi-lo)*float64(area.Dy()-1)) }

	for k := 0; k <= 4; k++ { // horizontal grid
		y := area.Min.Y + k*(area.Dy()-1)/4
		hline(img, area.Min.X, area.Max.X, y, colGrid)
	}
	if banded {
		band := image.Rect(px(warm.Seconds()), py(s.mean*1.1), area.Max.X, py(s.mean*0.9)+1).Intersect(area)
		draw.Draw(img, band, image.NewUniform(colBand), image.Point{}, draw.Src)
	}
	vline(img, px(warm.Seconds()), area.Min.Y, area.Max.Y, colWarm)
	hline(img, area.Min.X, area.Max.X, area.Max.Y, colAxis)
	vline(img, area.Min.X, area.Min.Y, area.Max.Y, colAxis)
	for i := 1; i < len(el); i++ {
		line(img, px(el[i-1]), py(ys[i-1]), px(el[i]), py(ys[i]), colLine)
	}
	for i := range el {
		dot(img, px(el[i]), py(ys[i]), colLine)
	}
	title, tc := name, colText
	if name == "load1" {
		title = "load1 (the machine's load average, not the queue's)"
	}
	if banded {
		title = fmt.Sprintf("%s  mean %s, +/-%.0f%%", name, num(s.mean), s.dev*100)
		if s.dev > 0.10 {
			tc = colOver
		}
	}
	text(img, area.Min.X, r.Min.Y+15, title, tc)
	text(img, r.Min.X+4, area.Min.Y+10, short(hi), colAxis)
	text(img, r.Min.X+4, area.Max.Y, short(lo), colAxis)
	text(img, area.Min.X, area.Max.Y+15, "0", colAxis)
	end := fmt.Sprintf("%.0f min", xMax/60)
	if xMax < 600 {
		end = fmt.Sprintf("%.0f s", xMax)
	}
	text(img, area.Max.X-7*len(end), area.Max.Y+15, end, colAxis)
}

func minMax(xs []float64) (float64, float64) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, x := range xs {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	return lo, hi
}

func short(x float64) string {
	switch a := math.Abs(x); {
	case a >= 1e6:
		return fmt.Sprintf("%.1fM", x/1e6)
	case a >= 1e4:
		return fmt.Sprintf("%.0fk", x/1e3)
	default:
		return num(x)
	}
}

func text(img *image.RGBA, x, y int, s string, c color.Color) {
	d := font.Drawer{Dst: img, Src: image.NewUniform(c), Face: lineFace, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

func hline(img *image.RGBA, x0, x1, y int, c color.Color) {
	for x := x0; x < x1; x++ {
		img.Set(x, y, c)
	}
}

func vline(img *image.RGBA, x, y0, y1 int, c color.Color) {
	for y := y0; y < y1; y++ {
		img.Set(x, y, c)
	}
}

func dot(img *image.RGBA, x, y int, c color.Color) {
	for dx := -1; dx <= 1; dx++ {
		for dy := -1; dy <= 1; dy++ {
			img.Set(x+dx, y+dy, c)
		}
	}
}

// line is Bresenham's, two pixels thick.
func line(img *image.RGBA, x0, y0, x1, y1 int, c color.Color) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := sign(x1-x0), sign(y1-y0)
	e := dx + dy
	for {
		img.Set(x0, y0, c)
		img.Set(x0, y0+1, c)
		if x0 == x1 && y0 == y1 {
			return
		}
		e2 := 2 * e
		if e2 >= dy {
			e += dy
			x0 += sx
		}
		if e2 <= dx {
			e += dx
			y0 += sy
		}
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func sign(x int) int {
	switch {
	case x < 0:
		return -1
	case x > 0:
		return 1
	}
	return 0
}

// wrap breaks s into lines of at most width characters at spaces.
func wrap(s string, width int) []string {
	var lines []string
	var cur strings.Builder
	for _, w := range strings.Fields(s) {
		if cur.Len() > 0 && cur.Len()+1+len(w) > width {
			lines = append(lines, cur.String())
			cur.Reset()
		}
		if cur.Len() > 0 {
			cur.WriteByte(' ')
		}
		cur.WriteString(w)
	}
	if cur.Len() > 0 {
		lines = append(lines, cur.String())
	}
	return lines
}
