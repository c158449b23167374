// Command plot draws the simulator's scaling from `go test -bench` output as
// an SVG, by hand, with no dependencies:
//
//	go run ./bench/plot new.txt > bench/scaling.svg
//
// It reads the results of BenchmarkSimulatorAgents and
// BenchmarkSimulatorResources (from a file, or standard input when the
// argument is missing or "-") and draws three panels: events per wall
// second against agents, virtual seconds per wall second against agents, and
// events per wall second against resources. Each point is the median of the
// runs of that benchmark; runs at different GOMAXPROCS (-cpu) are separate
// lines. Every other line of the input is ignored.
package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "plot:", err)
		os.Exit(1)
	}
}

func run(args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) > 1 {
		return fmt.Errorf("want at most one argument, the benchmark output file, got %d", len(args))
	}
	in, name := stdin, "standard input"
	if len(args) == 1 && args[0] != "-" {
		f, err := os.Open(args[0])
		if err != nil {
			return err
		}
		defer f.Close()
		in, name = f, args[0]
	}
	results, err := parse(in)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	svg, err := draw(results)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	_, err = io.WriteString(stdout, svg)
	return err
}

// result is one line of benchmark output.
type result struct {
	name    string            // without the GOMAXPROCS suffix, e.g. BenchmarkSimulatorAgents/agents=10/resources=1
	procs   int               // GOMAXPROCS: the -N suffix, 1 when there is none
	params  map[string]string // the key=value parts of the name
	metrics map[string]float64
}

// parse reads the benchmark lines of go test output: a name beginning with
// "Benchmark", an iteration count, then value-unit pairs.
func parse(r io.Reader) ([]result, error) {
	var out []result
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for line := 1; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if len(f) < 4 || len(f)%2 != 0 {
			// go test prints the name alone when a benchmark fails or
			// logs before its result: not a result line.
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		res := result{procs: 1, params: map[string]string{}, metrics: map[string]float64{}}
		res.name = f[0]
		if i := strings.LastIndexByte(f[0], '-'); i > 0 {
			if n, err := strconv.Atoi(f[0][i+1:]); err == nil && n > 0 {
				res.name, res.procs = f[0][:i], n
			}
		}
		for _, part := range strings.Split(res.name, "/")[1:] {
			if k, v, ok := strings.Cut(part, "="); ok {
				res.params[k] = v
			}
		}
		for i := 2; i < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("line %d: %q is not a number (the value of %s)", line, f[i], f[i+1])
			}
			res.metrics[f[i+1]] = v
		}
		out = append(out, res)
	}
	return out, sc.Err()
}

// point is the median of one metric over the runs of one benchmark.
type point struct{ x, y float64 }

// series is one line of a panel: the results at one GOMAXPROCS.
type series struct {
	procs  int
	points []point // by x
}

// collect gathers, for the benchmark named bench, the median of metric
// against the integer parameter xParam, one series per GOMAXPROCS.
func collect(results []result, bench, xParam, metric string) []series {
	samples := map[int]map[float64][]float64{}
	for _, r := range results {
		if !strings.HasPrefix(r.name, bench+"/") {
			continue
		}
		y, ok := r.metrics[metric]
		if !ok {
			continue
		}
		x, err := strconv.ParseFloat(r.params[xParam], 64)
		if err != nil || x <= 0 {
			continue
		}
		if samples[r.procs] == nil {
			samples[r.procs] = map[float64][]float64{}
		}
		samples[r.procs][x] = append(samples[r.procs][x], y)
	}
	var out []series
	for procs, byX := range samples {
		s := series{procs: procs}
		for x, ys := range byX {
			s.points = append(s.points, point{x, median(ys)})
		}
		slices.SortFunc(s.points, func(a, b point) int { return cmpFloat(a.x, b.x) })
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b series) int { return a.procs - b.procs })
	return out
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// panel is one chart of the figure.
type panel struct {
	title, xLabel, yLabel string
	logY                  bool
	target                float64 // a dashed horizontal line, 0 for none
	targetLabel           string
	series                []series
}

// The figure's geometry, in SVG user units.
const (
	panelW, panelH = 320, 300
	marginL        = 62
	marginR        = 14
	marginT        = 52
	marginB        = 48
	plotW          = panelW - marginL - marginR
	plotH          = panelH - marginT - marginB
	legendH        = 28
)

// colours of the series, by position; the figure has few.
var colours = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd"}

// draw renders the figure, or says which results are missing.
func draw(results []result) (string, error) {
	panels := []panel{
		{
			title: "events per wall second", xLabel: "agents (resources = agents/10)", yLabel: "events/s",
			target: 2e6, targetLabel: "target 2M",
			series: collect(results, "BenchmarkSimulatorAgents", "agents", "events/s"),
		},
		{
			title: "time compression", xLabel: "agents (resources = agents/10)", yLabel: "virtual-s/s", logY: true,
			series: collect(results, "BenchmarkSimulatorAgents", "agents", "virtual-s/s"),
		},
		{
			title: "events per wall second", xLabel: "resources (1,000 agents)", yLabel: "events/s",
			target: 2e6, targetLabel: "target 2M",
			series: collect(results, "BenchmarkSimulatorResources", "resources", "events/s"),
		},
	}
	if len(panels[0].series) == 0 && len(panels[2].series) == 0 {
		return "", errors.New("no results of BenchmarkSimulatorAgents or BenchmarkSimulatorResources with an events/s metric")
	}
	var procs []int
	for _, p := range panels {
		for _, s := range p.series {
			if !slices.Contains(procs, s.procs) {
				procs = append(procs, s.procs)
			}
		}
	}
	slices.Sort(procs)
	colour := func(n int) string { return colours[slices.Index(procs, n)%len(colours)] }

	var b strings.Builder
	w, h := panelW*len(panels), panelH+legendH
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	b.WriteString(`<text x="8" y="18" font-size="14" font-weight="bold">Simulator scaling: crowd behaviour, fenced mode, median of runs</text>` + "\n")
	for i, p := range panels {
		drawPanel(&b, float64(i*panelW), p, colour)
	}
	// Legend, along the bottom.
	x := 8.0
	for _, n := range procs {
		y := float64(panelH + legendH/2)
		fmt.Fprintf(&b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="2"/>`+"\n", num(x), num(y), num(x+18), num(y), colour(n))
		fmt.Fprintf(&b, `<text x="%s" y="%s" dominant-baseline="middle">GOMAXPROCS=%d</text>`+"\n", num(x+22), num(y), n)
		x += 120
	}
	b.WriteString("</svg>\n")
	return b.String(), nil
}

// axis maps data values to one dimension of a panel, on a linear or a
// log10 scale.
type axis struct {
	lo, hi   float64 // data range (decades when log)
	log      bool
	from, to float64 // pixel range
}

func (a axis) at(v float64) float64 {
	if a.log {
		v = math.Log10(v)
	}
	return a.from + (v-a.lo)/(a.hi-a.lo)*(a.to-a.from)
}

// ticks are the values to label: each decade on a log axis, and about five
// round steps on a linear one.
func (a axis) ticks() []float64 {
	var out []float64
	if a.log {
		for e := math.Ceil(a.lo - 1e-9); e <= a.hi+1e-9; e++ {
			out = append(out, math.Pow(10, e))
		}
		return out
	}
	step := niceStep((a.hi - a.lo) / 5)
	for v := math.Ceil(a.lo/step) * step; v <= a.hi+step*1e-9; v += step {
		out = append(out, v)
	}
	return out
}

// niceStep rounds x up to 1, 2 or 5 times a power of ten.
func niceStep(x float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= x {
			return m * p
		}
	}
	return 10 * p
}

// dataRange returns the x and y ranges of the panel's points (and target).
func dataRange(p panel) (xs, ys []float64) {
	for _, s := range p.series {
		for _, pt := range s.points {
			xs, ys = append(xs, pt.x), append(ys, pt.y)
		}
	}
	if p.target > 0 {
		ys = append(ys, p.target)
	}
	return xs, ys
}

func drawPanel(b *strings.Builder, left float64, p panel, colour func(int) string) {
	x0, y0 := left+marginL, float64(marginT)
	fmt.Fprintf(b, `<text x="%s" y="%d" font-size="12" font-weight="bold" text-anchor="middle">%s</text>`+"\n", num(x0+plotW/2), marginT-14, p.title)
	fmt.Fprintf(b, `<rect x="%s" y="%s" width="%d" height="%d" fill="none" stroke="#999"/>`+"\n", num(x0), num(y0), plotW, plotH)
	fmt.Fprintf(b, `<text x="%s" y="%d" text-anchor="middle">%s</text>`+"\n", num(x0+plotW/2), panelH-10, p.xLabel)
	fmt.Fprintf(b, `<text transform="translate(%s %s) rotate(-90)" text-anchor="middle">%s</text>`+"\n", num(left+12), num(y0+plotH/2), p.yLabel)
	xs, ys := dataRange(p)
	if len(xs) == 0 {
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle" fill="#999">no results</text>`+"\n", num(x0+plotW/2), num(y0+plotH/2))
		return
	}
	xa := axis{lo: math.Floor(math.Log10(slices.Min(xs))), hi: math.Ceil(math.Log10(slices.Max(xs))), log: true, from: x0 + 10, to: x0 + plotW - 10}
	if xa.hi == xa.lo {
		xa.lo, xa.hi = xa.lo-1, xa.hi+1
	}
	// Headroom above the highest point, for its label.
	top := slices.Max(ys) * 1.08
	step := niceStep(top / 5)
	ya := axis{lo: 0, hi: math.Ceil(top/step) * step, from: y0 + plotH, to: y0 + 8}
	if p.logY {
		ya.lo, ya.hi, ya.log = math.Floor(math.Log10(slices.Min(ys))), math.Ceil(math.Log10(slices.Max(ys))), true
		if ya.hi == ya.lo {
			ya.hi++
		}
	}
	for _, t := range xa.ticks() {
		x := xa.at(t)
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#eee"/>`+"\n", num(x), num(y0), num(x), num(y0+plotH))
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle">%s</text>`+"\n", num(x), num(y0+plotH+14), short(t))
	}
	for _, t := range ya.ticks() {
		y := ya.at(t)
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#eee"/>`+"\n", num(x0), num(y), num(x0+plotW), num(y))
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", num(x0-4), num(y), short(t))
	}
	if p.target > 0 {
		y := ya.at(p.target)
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#555" stroke-dasharray="5 4"/>`+"\n", num(x0), num(y), num(x0+plotW), num(y))
		fmt.Fprintf(b, `<text x="%s" y="%s" fill="#555">%s</text>`+"\n", num(x0+4), num(y-4), p.targetLabel)
	}
	// A point's label goes above it if it is the highest at its x, below
	// otherwise, so that close lines do not print over each other.
	highest := map[float64]float64{}
	for _, s := range p.series {
		for _, pt := range s.points {
			highest[pt.x] = max(highest[pt.x], pt.y)
		}
	}
	for _, s := range p.series {
		var pts []string
		for _, pt := range s.points {
			pts = append(pts, num(xa.at(pt.x))+","+num(ya.at(pt.y)))
		}
		fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), colour(s.procs))
		for _, pt := range s.points {
			x, y := xa.at(pt.x), ya.at(pt.y)
			dy := -6.0
			if pt.y < highest[pt.x] {
				dy = 13
			}
			fmt.Fprintf(b, `<circle cx="%s" cy="%s" r="3" fill="%s"><title>%s %s at %s: %s</title></circle>`+"\n",
				num(x), num(y), colour(s.procs), p.yLabel, fmt.Sprintf("GOMAXPROCS=%d", s.procs), short(pt.x), short(pt.y))
			fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle" fill="%s" font-size="9">%s</text>`+"\n", num(x), num(y+dy), colour(s.procs), short(pt.y))
		}
	}
}

// num prints a coordinate with at most one decimal, so the file is small
// and stable.
func num(v float64) string { return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) }

// short prints a value for a label: 2.5M, 950k, 24.8, 0.5.
func short(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e6:
		return trim(v/1e6) + "M"
	case a >= 1e3:
		return trim(v/1e3) + "k"
	}
	return trim(v)
}

// trim prints v with three significant digits and no trailing zeros.
func trim(v float64) string {
	return strconv.FormatFloat(v, 'g', 3, 64)
}
