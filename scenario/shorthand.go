package scenario

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/leasefence/lab/spec"
)

// ParseDist reads the one-line form of a distribution of durations, the
// same in a file and on the command line:
//
//	50ms                    always 50ms
//	10ms-50ms               uniform in [10ms, 50ms]
//	10ms-50ms,5%:1.5s-4s    as above, but with probability 5% uniform in [1.5s, 4s]
//	10ms-50ms,0.05:2s       the tail probability as a fraction, the tail a constant
//	0                       always 0
//
// It checks the syntax only; Scenario.Validate checks the ranges.
func ParseDist(s string) (spec.Dist, error) {
	var d spec.Dist
	base, tail, hasTail := strings.Cut(strings.TrimSpace(s), ",")
	var err error
	if d.Min, d.Max, err = parseSpan(base); err != nil {
		return spec.Dist{}, err
	}
	if !hasTail {
		return d, nil
	}
	p, span, ok := strings.Cut(tail, ":")
	if !ok {
		return spec.Dist{}, fmt.Errorf("the tail %q needs the form P:MIN-MAX, e.g. 5%%:1.5s-4s", tail)
	}
	if d.TailP, err = parseProbability(p); err != nil {
		return spec.Dist{}, err
	}
	if d.TailMin, d.TailMax, err = parseSpan(span); err != nil {
		return spec.Dist{}, err
	}
	return d, nil
}

// parseSpan reads "D" or "MIN-MAX" (durations, not negative: "-" is the
// separator).
func parseSpan(s string) (lo, hi time.Duration, err error) {
	s = strings.TrimSpace(s)
	a, b, isRange := strings.Cut(s, "-")
	if lo, err = parseDuration(a); err != nil {
		return 0, 0, err
	}
	if !isRange {
		return lo, lo, nil
	}
	if hi, err = parseDuration(b); err != nil {
		return 0, 0, err
	}
	return lo, hi, nil
}

func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("a duration is missing (write e.g. 950ms)")
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (write e.g. 950ms or 1.5s)", s)
	}
	return d, nil
}

// parseProbability reads "5%" or "0.05".
func parseProbability(s string) (float64, error) {
	s = strings.TrimSpace(s)
	num, percent := strings.CutSuffix(s, "%")
	p, err := parseFinite(num)
	if err != nil {
		return 0, fmt.Errorf("%q is not a probability (write e.g. 5%% or 0.05)", s)
	}
	if percent {
		p /= 100
	}
	return p, nil
}

func parseFinite(s string) (float64, error) {
	x, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
		return 0, fmt.Errorf("%q is not a finite number", s)
	}
	return x, nil
}

// FormatDist writes d in the form ParseDist reads, and false if that form
// cannot hold it exactly (a negative duration, a tail probability that
// is not finite, or a log-normal, which is written as a mapping).
func FormatDist(d spec.Dist) (string, bool) {
	if d.LogNormal.On() || d.Min < 0 || d.Max < 0 || d.TailMin < 0 || d.TailMax < 0 || math.IsNaN(d.TailP) || math.IsInf(d.TailP, 0) {
		return "", false
	}
	s := formatSpan(d.Min, d.Max)
	if d.TailP != 0 || d.TailMin != 0 || d.TailMax != 0 {
		s += "," + formatProbability(d.TailP) + ":" + formatSpan(d.TailMin, d.TailMax)
	}
	return s, true
}

func formatSpan(lo, hi time.Duration) string {
	if lo == hi {
		return lo.String()
	}
	return lo.String() + "-" + hi.String()
}

// formatProbability prefers a percentage, when it reads back exactly.
func formatProbability(p float64) string {
	pct := strconv.FormatFloat(p*100, 'g', -1, 64) + "%"
	if back, err := parseProbability(pct); err == nil && back == p {
		return pct
	}
	return strconv.FormatFloat(p, 'g', -1, 64)
}

// ParseRange reads a closed interval of numbers: "MIN:MAX", or one number
// for an interval of one point. Drift in ppm is written this way:
// "-5000:5000", "-20000".
func ParseRange(s string) (spec.Range, error) {
	a, b, isRange := strings.Cut(s, ":")
	lo, err := parseFinite(a)
	if err != nil {
		return spec.Range{}, err
	}
	if !isRange {
		return spec.Range{Min: lo, Max: lo}, nil
	}
	hi, err := parseFinite(b)
	if err != nil {
		return spec.Range{}, err
	}
	return spec.Range{Min: lo, Max: hi}, nil
}

// FormatRange writes r in the form ParseRange reads.
func FormatRange(r spec.Range) string {
	if r.Min == r.Max {
		return strconv.FormatFloat(r.Min, 'g', -1, 64)
	}
	return strconv.FormatFloat(r.Min, 'g', -1, 64) + ":" + strconv.FormatFloat(r.Max, 'g', -1, 64)
}

// ParseDurationRange reads a closed interval of durations: "MIN:MAX", or
// one duration. Clock offsets are written this way: "-50ms:50ms".
func ParseDurationRange(s string) (spec.DurationRange, error) {
	a, b, isRange := strings.Cut(s, ":")
	lo, err := parseDuration(a)
	if err != nil {
		return spec.DurationRange{}, err
	}
	if !isRange {
		return spec.DurationRange{Min: lo, Max: lo}, nil
	}
	hi, err := parseDuration(b)
	if err != nil {
		return spec.DurationRange{}, err
	}
	return spec.DurationRange{Min: lo, Max: hi}, nil
}

// FormatDurationRange writes r in the form ParseDurationRange reads.
func FormatDurationRange(r spec.DurationRange) string {
	if r.Min == r.Max {
		return r.Min.String()
	}
	return r.Min.String() + ":" + r.Max.String()
}
