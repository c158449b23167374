package leaseotel_test

import (
	"context"
	"fmt"
	"log"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/leaseotel"
)

// Metrics of a production coordinator, client and gate: set the metric
// hooks in their options. Here the SDK's in-memory reader collects them; in
// a service, pass the MeterProvider your exporter feeds (or nil, for the
// global one).
func ExampleNewMetricHooks() {
	reader := sdkmetric.NewManualReader()
	hooks, err := leaseotel.NewMetricHooks(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	if err != nil {
		log.Fatal(err)
	}

	clock := leasefence.NewManualClock("coordinator")
	coord, _ := leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: clock, TTL: time.Second, Trace: hooks.Coordinator})
	client, _ := leasefence.NewClient(leasefence.ClientOptions{Clock: clock, Holder: "agent-a", Trace: hooks.Client})
	gate := leasefence.NewFenceGate("deploy-slot", leasefence.WithGateTrace(hooks.Gate))

	req, _ := client.BeginAcquire("deploy-slot")
	out, _ := coord.Acquire(req)
	lease, _ := client.CompleteAcquire(req, out.Grant)
	_ = gate.Commit(context.Background(), lease.Token, func(context.Context) error { return nil })

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		log.Fatal(err)
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		switch d := m.Data.(type) {
		case metricdata.Sum[int64]:
			fmt.Printf("%s %s: %d\n", m.Name, m.Unit, d.DataPoints[0].Value)
		case metricdata.Gauge[int64]:
			fmt.Printf("%s %s: %d\n", m.Name, m.Unit, d.DataPoints[0].Value)
		case metricdata.Histogram[float64]:
			fmt.Printf("%s %s: %d measured\n", m.Name, m.Unit, d.DataPoints[0].Count)
		}
	}
	// Unordered output:
	// lease.acquires {acquire}: 1
	// lease.acquire.duration s: 1 measured
	// lease.held {lease}: 1
	// fence.commits {commit}: 1
	// fence.floor {fence}: 1
}
