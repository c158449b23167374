package spec_test

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/leasefence/lab/spec"
)

// A log-normal's draws have the median and 99th percentile it was given
// (within sampling error over 100,000 draws), and the same seed draws the
// same durations.
func TestLogNormalQuantiles(t *testing.T) {
	d := spec.Dist{LogNormal: spec.LogNormal{Median: 300 * time.Millisecond, P99: 4 * time.Second}}
	draw := func(seed uint64) []time.Duration {
		r := rand.New(rand.NewPCG(seed, 0))
		xs := make([]time.Duration, 100_000)
		for i := range xs {
			xs[i] = d.Sample(r)
		}
		return xs
	}
	xs := draw(1)
	if !slices.Equal(xs, draw(1)) {
		t.Fatal("the same seed drew different durations")
	}
	slices.Sort(xs)
	median, p99 := xs[len(xs)/2], xs[len(xs)*99/100]
	if median < 280*time.Millisecond || median > 320*time.Millisecond {
		t.Errorf("median %v, want about 300ms", median)
	}
	if p99 < 3500*time.Millisecond || p99 > 4500*time.Millisecond {
		t.Errorf("p99 %v, want about 4s", p99)
	}
	if m := d.Mean(); m < 540*time.Millisecond || m > 580*time.Millisecond {
		t.Errorf("Mean %v, want about 560ms", m)
	}
}
