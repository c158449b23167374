package harness

import (
	"context"
	"testing"
	"time"
)

// crowdOf is the benchmark world: agents contending for resources with the
// crowd's behaviour and network.
func crowdOf(agents, resources int, d time.Duration) Scenario {
	sc, _ := Builtin("crowd")
	sc.Name = "bench"
	sc.Agents, sc.Resources, sc.Duration = agents, resources, d
	return sc
}

// BenchmarkSimulator reports simulated events per wall second and virtual
// seconds per wall second for a fenced run of 1,000 agents on 100 resources
// over 10 virtual minutes, the reference load.
func BenchmarkSimulator(b *testing.B) {
	sc := crowdOf(1000, 100, 10*time.Minute)
	b.ReportAllocs()
	var events uint64
	var wall time.Duration
	for b.Loop() {
		sim, err := NewSim(sc, Fenced)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if _, err := sim.Run(context.Background()); err != nil {
			b.Fatal(err)
		}
		wall += time.Since(start)
		events += sim.Events()
	}
	b.ReportMetric(float64(events)/wall.Seconds(), "events/s")
	b.ReportMetric(Compression(sc.Duration*time.Duration(b.N), wall), "virtual-s/s")
	b.ReportMetric(float64(events)/float64(b.N), "events/run")
}
