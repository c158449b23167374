package leaseotel

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/leasefence/lab/leasefence"
)

// metricWorld is a coordinator, a gate and clients on one manual clock,
// with the metric hooks on a wall clock the test moves too, read through
// the SDK's in-memory reader.
type metricWorld struct {
	reader *sdkmetric.ManualReader
	hooks  *Hooks
	clock  *leasefence.ManualClock
	coord  *leasefence.Coordinator
	gate   *leasefence.FenceGate

	mu   sync.Mutex
	wall time.Time
}

func newMetricWorld(t *testing.T) *metricWorld {
	t.Helper()
	w := &metricWorld{reader: sdkmetric.NewManualReader(), clock: leasefence.NewManualClock("coordinator"), wall: time.Unix(1e9, 0)}
	var err error
	w.hooks, err = newMetricHooks(sdkmetric.NewMeterProvider(sdkmetric.WithReader(w.reader)), w.now)
	if err != nil {
		t.Fatal(err)
	}
	w.coord, err = leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: w.clock, TTL: time.Second, Trace: w.hooks.Coordinator})
	if err != nil {
		t.Fatal(err)
	}
	w.gate = leasefence.NewFenceGate("res", leasefence.WithGateTrace(w.hooks.Gate))
	return w
}

func (w *metricWorld) now() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.wall
}

// advance moves the coordinator's clock and the wall clock together.
func (w *metricWorld) advance(d time.Duration) {
	w.clock.Advance(d)
	w.mu.Lock()
	w.wall = w.wall.Add(d)
	w.mu.Unlock()
}

func (w *metricWorld) client(t *testing.T, holder string) *leasefence.Client {
	t.Helper()
	c, err := leasefence.NewClient(leasefence.ClientOptions{Clock: w.clock, Holder: holder, Trace: w.hooks.Client})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// acquire asks for "res" and takes replyAfter to hear the answer.
func (w *metricWorld) acquire(t *testing.T, c *leasefence.Client, replyAfter time.Duration) *leasefence.Lease {
	t.Helper()
	req, err := c.BeginAcquire("res")
	if err != nil {
		t.Fatal(err)
	}
	w.advance(replyAfter)
	out, err := w.coord.Acquire(req)
	if err != nil {
		t.Fatal(err)
	}
	if !out.OK {
		return nil
	}
	l, err := c.CompleteAcquire(req, out.Grant)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// renew renews l, taking replyAfter, and reports whether it was renewed.
func (w *metricWorld) renew(t *testing.T, c *leasefence.Client, l *leasefence.Lease, replyAfter time.Duration) bool {
	t.Helper()
	req, err := c.BeginRenewal(l)
	if err != nil {
		t.Fatal(err)
	}
	w.advance(replyAfter)
	out, err := w.coord.Renew(req)
	if err != nil {
		t.Fatal(err)
	}
	if !out.OK {
		return false
	}
	if _, err := c.CompleteRenewal(req, out.Grant); err != nil {
		t.Fatal(err)
	}
	return true
}

// points reads every metric as "name{k=v,...}" -> value: a sum's or a
// gauge's value, a histogram's count and sum as "count/sum".
func (w *metricWorld) points(t *testing.T) map[string]string {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := w.reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != ScopeName {
			t.Errorf("scope %q, want %q", sm.Scope.Name, ScopeName)
		}
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					got[series(m.Name, p.Attributes)] = fmt.Sprint(p.Value)
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					got[series(m.Name, p.Attributes)] = fmt.Sprint(p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					got[series(m.Name, p.Attributes)] = fmt.Sprintf("%d/%.3f", p.Count, p.Sum)
				}
			default:
				t.Errorf("%s: unexpected data %T", m.Name, m.Data)
			}
		}
	}
	return got
}

func series(name string, set attribute.Set) string {
	var kv []string
	for _, a := range set.ToSlice() {
		kv = append(kv, string(a.Key)+"="+a.Value.String())
	}
	return name + "{" + strings.Join(kv, ",") + "}"
}

func wantPoints(t *testing.T, got map[string]string, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if t.Failed() {
		keys := make([]string, 0, len(got))
		for k := range got {
			keys = append(keys, k+" "+got[k])
		}
		slices.Sort(keys)
		t.Logf("every point:\n%s", strings.Join(keys, "\n"))
	}
}

// One lease's story, read from the in-memory reader at each step: grants,
// denials, renewals and their latency, the lease running out unrenewed
// and counted lost once, a newer holder, commits admitted and refused, the
// refusal logged, the floor, and a release.
func TestMetricHooks(t *testing.T) {
	w := newMetricWorld(t)
	a, b := w.client(t, "agent-a"), w.client(t, "agent-b")

	leaseA := w.acquire(t, a, 20*time.Millisecond)
	if w.acquire(t, b, 0) != nil {
		t.Fatal("agent-b got a held resource")
	}
	if err := w.gate.Commit(t.Context(), leaseA.Token, noWrite); err != nil {
		t.Fatal(err)
	}
	if !w.renew(t, a, leaseA, 5*time.Millisecond) {
		t.Fatal("renewal refused")
	}
	wantPoints(t, w.points(t), map[string]string{
		"lease.acquires{lease.outcome=granted,lease.resource=res}":                  "1",
		"lease.acquires{lease.outcome=denied,lease.reason=held,lease.resource=res}": "1",
		"lease.acquire.duration{lease.outcome=granted,lease.resource=res}":          "1/0.020",
		"lease.renewals{lease.outcome=renewed,lease.resource=res}":                  "1",
		"lease.renewal.duration{lease.outcome=renewed,lease.resource=res}":          "1/0.005",
		"lease.held{lease.resource=res}":                                            "1",
		"fence.commits{fence.outcome=admitted,lease.resource=res}":                  "1",
		"fence.floor{lease.resource=res}":                                           "1",
	})

	// agent-a stalls past its TTL: no longer held; agent-b takes over, and
	// agent-a's lease is lost (expired), counted once although its late
	// renewal is refused as well.
	w.advance(2 * time.Second)
	if got := w.points(t)["lease.held{lease.resource=res}"]; got != "0" {
		t.Errorf("lease.held past the TTL = %q, want 0", got)
	}
	leaseB := w.acquire(t, b, 0)
	if leaseB == nil {
		t.Fatal("agent-b refused a free resource")
	}
	if w.renew(t, a, leaseA, 0) {
		t.Fatal("a superseded lease renewed")
	}
	if err := w.gate.Commit(t.Context(), leaseB.Token, noWrite); err != nil {
		t.Fatal(err)
	}
	if err := w.gate.Commit(t.Context(), leaseA.Token, noWrite); !errors.Is(err, leasefence.ErrStaleFence) {
		t.Fatalf("late commit: %v, want a stale fence", err)
	}
	got := w.points(t)
	wantPoints(t, got, map[string]string{
		"lease.acquires{lease.outcome=granted,lease.resource=res}":                                         "2",
		"lease.lost{lease.reason=expired,lease.resource=res}":                                              "1",
		"lease.held{lease.resource=res}":                                                                   "1",
		"fence.commits{fence.outcome=admitted,lease.resource=res}":                                         "2",
		"fence.commits{error.type=stale_fence,fence.outcome=refused,lease.resource=res}":                   "1",
		"fence.rejections{lease.resource=res}":                                                             "1",
		"fence.floor{lease.resource=res}":                                                                  "2",
		"lease.renewals{lease.outcome=refused,lease.reason=" + refusedReason(got) + ",lease.resource=res}": "1",
	})
	for k := range got {
		if strings.HasPrefix(k, "lease.lost") && k != "lease.lost{lease.reason=expired,lease.resource=res}" {
			t.Errorf("lost counted again: %s = %s", k, got[k])
		}
	}

	// A release is not a loss, and the lease is no longer held.
	if out, err := w.coord.Release(leaseB.Token); err != nil || !out.OK {
		t.Fatalf("release: %+v, %v", out, err)
	}
	wantPoints(t, w.points(t), map[string]string{
		"lease.held{lease.resource=res}":                      "0",
		"lease.lost{lease.reason=expired,lease.resource=res}": "1",
	})
}

// refusedReason is the reason the coordinator gave the superseded renewal,
// whichever its rules name.
func refusedReason(points map[string]string) string {
	for k := range points {
		if rest, ok := strings.CutPrefix(k, "lease.renewals{lease.outcome=refused,lease.reason="); ok {
			reason, _, _ := strings.Cut(rest, ",")
			return reason
		}
	}
	return "(none)"
}

// A renewal the coordinator refuses while the lease is current is the
// loss, with the coordinator's reason; the newer grant after it is not
// counted again.
func TestMetricHooksRefusedRenewalIsTheLoss(t *testing.T) {
	w := newMetricWorld(t)
	a := w.client(t, "agent-a")
	l := w.acquire(t, a, 0)
	w.advance(2 * time.Second)
	if w.renew(t, a, l, 0) {
		t.Fatal("an expired lease renewed")
	}
	w.acquire(t, w.client(t, "agent-b"), 0)
	var lost []string
	for k, v := range w.points(t) {
		if strings.HasPrefix(k, "lease.lost") {
			lost = append(lost, k+" "+v)
		}
	}
	if want := []string{"lease.lost{lease.reason=" + string(leasefence.ReasonExpired) + ",lease.resource=res} 1"}; !slices.Equal(lost, want) {
		t.Errorf("lost = %q, want %q", lost, want)
	}
}

// Every instrument is made, named as documented, with its unit.
func TestMetricHooksUnits(t *testing.T) {
	w := newMetricWorld(t)
	a := w.client(t, "agent-a")
	l := w.acquire(t, a, 0)
	w.renew(t, a, l, 0)
	if err := w.gate.Commit(t.Context(), l.Token, noWrite); err != nil {
		t.Fatal(err)
	}
	w.advance(2 * time.Second)
	newer := w.acquire(t, w.client(t, "agent-b"), 0)
	if err := w.gate.Commit(t.Context(), newer.Token, noWrite); err != nil {
		t.Fatal(err)
	}
	if err := w.gate.Commit(t.Context(), l.Token, noWrite); err == nil {
		t.Fatal("a stale commit admitted")
	}
	var rm metricdata.ResourceMetrics
	if err := w.reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	units := map[string]string{}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		units[m.Name] = m.Unit
	}
	want := map[string]string{
		MetricAcquires: "{acquire}", MetricRenewals: "{renewal}", MetricHeld: "{lease}", MetricLost: "{lease}",
		MetricAcquireDuration: "s", MetricRenewalDuration: "s",
		MetricCommits: "{commit}", MetricRejections: "{rejection}", MetricFloor: "{fence}",
	}
	for name, unit := range want {
		if units[name] != unit {
			t.Errorf("%s: unit %q, want %q", name, units[name], unit)
		}
	}
}

// A holder's sessions are counted when they end, by why: released, or lost
// on its own deadline (read by the holder before any renewal ran).
func TestMetricHooksCountSessionEnds(t *testing.T) {
	w := newMetricWorld(t)
	svc := leasefence.Local(w.coord)
	hold := func(holder string) *leasefence.Session {
		s, err := leasefence.Hold(t.Context(), svc, w.client(t, holder), "res", leasefence.HoldOptions{Trace: w.hooks.Session})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a := hold("agent-a")
	if _, err := a.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	b := hold("agent-b")
	w.advance(2 * time.Second) // past b's deadline on its client's clock; no renewal has run
	if !errors.Is(b.Err(), leasefence.ErrLeaseLost) {
		t.Fatalf("b.Err() past the deadline = %v", b.Err())
	}
	_, _ = b.Release(t.Context()) // ends nothing more
	got := w.points(t)
	for key, want := range map[string]string{
		"lease.sessions.ended{lease.reason=released,lease.resource=res}": "1",
		"lease.sessions.ended{lease.reason=expired,lease.resource=res}":  "1",
	} {
		if got[key] != want {
			t.Errorf("%s = %q, want %s (all: %v)", key, got[key], want, got)
		}
	}
}
