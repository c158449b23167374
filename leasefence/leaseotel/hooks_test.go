package leaseotel

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/leasefence/lab/leasefence"
)

type hookWorld struct {
	spans *tracetest.SpanRecorder
	hooks *Hooks
	clock *leasefence.ManualClock
	coord *leasefence.Coordinator
	gate  *leasefence.FenceGate
}

func newHookWorld(t *testing.T, gateOpts ...leasefence.GateOption) *hookWorld {
	t.Helper()
	w := &hookWorld{spans: tracetest.NewSpanRecorder(), clock: leasefence.NewManualClock("coordinator")}
	w.hooks = NewHooks(WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(w.spans))))
	var err error
	w.coord, err = leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: w.clock, TTL: time.Second, Trace: w.hooks.Coordinator})
	if err != nil {
		t.Fatal(err)
	}
	w.gate = leasefence.NewFenceGate("res", append(gateOpts, leasefence.WithGateTrace(w.hooks.Gate))...)
	return w
}

func (w *hookWorld) client(t *testing.T, holder string) *leasefence.Client {
	t.Helper()
	c, err := leasefence.NewClient(leasefence.ClientOptions{Clock: w.clock, Holder: holder, Trace: w.hooks.Client})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (w *hookWorld) acquire(t *testing.T, c *leasefence.Client) *leasefence.Lease {
	t.Helper()
	req, err := c.BeginAcquire("res")
	if err != nil {
		t.Fatal(err)
	}
	out, err := w.coord.Acquire(req)
	if err != nil || !out.OK {
		t.Fatalf("acquire: %+v, %v", out, err)
	}
	l, err := c.CompleteAcquire(req, out.Grant)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func (w *hookWorld) last(t *testing.T, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	ended := w.spans.Ended()
	for i := len(ended) - 1; i >= 0; i-- {
		if ended[i].Name() == name {
			return ended[i]
		}
	}
	t.Fatalf("no %q span among %d", name, len(ended))
	return nil
}

func noWrite(context.Context) error { return nil }

func TestHooksRefusedCommit(t *testing.T) {
	w := newHookWorld(t)
	a, b := w.client(t, "agent-a"), w.client(t, "agent-b")
	leaseA := w.acquire(t, a)
	w.clock.Advance(time.Second)
	leaseB := w.acquire(t, b)
	if err := w.gate.Commit(t.Context(), leaseB.Token, noWrite); err != nil {
		t.Fatal(err)
	}
	err := w.gate.Commit(t.Context(), leaseA.Token, noWrite)
	if !errors.Is(err, leasefence.ErrStaleFence) {
		t.Fatalf("commit: %v, want a stale fence", err)
	}
	s := w.last(t, SpanFenceCommit)
	for k, want := range map[string]any{
		string(LeaseResource): "res", string(LeaseHolder): "agent-a", string(LeaseFence): int64(1),
		string(FenceFloor): int64(2), string(FenceFloorHolder): "agent-b",
		string(FenceOutcome): OutcomeRefused, string(ErrorType): ErrorStaleFence,
	} {
		if got := attrMap(s.Attributes())[k]; got != want {
			t.Errorf("%s = %v, want %v", k, got, want)
		}
	}
	if s.Status().Code != codes.Error || s.Status().Description != err.Error() {
		t.Errorf("status %v, want Error %q", s.Status(), err)
	}
	if len(s.Events()) != 1 || s.Events()[0].Name != "exception" {
		t.Errorf("events %v, want the recorded error", s.Events())
	}
}

// The client span runs from BeginAcquire to CompleteAcquire, so it
// encloses the coordinator's span of the same request.
func TestHooksClientSpanEnclosesServer(t *testing.T) {
	w := newHookWorld(t)
	w.acquire(t, w.client(t, "agent-a"))
	var client, server sdktrace.ReadOnlySpan
	for _, s := range w.spans.Ended() {
		switch s.SpanKind().String() {
		case "client":
			client = s
		case "server":
			server = s
		}
	}
	if client == nil || server == nil {
		t.Fatalf("want a client and a server span, got %d spans", len(w.spans.Ended()))
	}
	if server.StartTime().Before(client.StartTime()) || client.EndTime().Before(server.EndTime()) {
		t.Errorf("client [%v, %v] does not enclose server [%v, %v]", client.StartTime(), client.EndTime(), server.StartTime(), server.EndTime())
	}
	if attrMap(client.Attributes())[string(LeaseRequestID)] != attrMap(server.Attributes())[string(LeaseRequestID)] {
		t.Error("client and server spans carry different request ids")
	}
}

// A mismatched completion does not use the request up, in the client or in
// the hook: the right completion that follows still starts at the Begin.
func TestHooksMismatchKeepsTheRequest(t *testing.T) {
	w := newHookWorld(t)
	c := w.client(t, "agent-a")
	req, _ := c.BeginAcquire("res")
	out, _ := w.coord.Acquire(req)
	bad := out.Grant
	bad.RequestID = "another"
	if _, err := c.CompleteAcquire(req, bad); !errors.Is(err, leasefence.ErrGrantMismatch) {
		t.Fatalf("want a mismatch, got %v", err)
	}
	failed := w.last(t, SpanLeaseAcquire)
	if failed.Status().Code != codes.Error || attrMap(failed.Attributes())[string(ErrorType)] != "grant_mismatch" {
		t.Errorf("mismatch span: status %v, error.type %v", failed.Status(), attrMap(failed.Attributes())[string(ErrorType)])
	}
	if _, err := c.CompleteAcquire(req, out.Grant); err != nil {
		t.Fatal(err)
	}
	ok := w.last(t, SpanLeaseAcquire)
	if ok.Status().Code != codes.Unset || !ok.StartTime().Equal(failed.StartTime()) {
		t.Errorf("completion span starts %v with status %v, want %v (the Begin) and Unset", ok.StartTime(), ok.Status(), failed.StartTime())
	}
	if got := attrMap(ok.Attributes())[string(LeaseFence)]; got != int64(out.Grant.Token.Fence) {
		t.Errorf("lease.fence = %v, want %d", got, out.Grant.Token.Fence)
	}
}

func TestHooksRenewReleaseAdmit(t *testing.T) {
	w := newHookWorld(t)
	c := w.client(t, "agent-a")
	l := w.acquire(t, c)

	rr, _ := c.BeginRenewal(l)
	rout, _ := w.coord.Renew(rr)
	if _, err := c.CompleteRenewal(rr, rout.Grant); err != nil {
		t.Fatal(err)
	}
	if _, err := w.coord.Release(l.Token); err != nil {
		t.Fatal(err)
	}
	if _, err := w.coord.Release(l.Token); err != nil { // a second release is refused
		t.Fatal(err)
	}
	if err := w.gate.Admit(leasefence.Token{Resource: "res", Holder: "agent-b", Fence: 5}); err != nil {
		t.Fatal(err)
	}
	if err := w.gate.Admit(l.Token); !errors.Is(err, leasefence.ErrStaleFence) {
		t.Fatalf("admit below the floor: %v", err)
	}

	var got []string
	for _, s := range w.spans.Ended() {
		a := attrMap(s.Attributes())
		got = append(got, fmt.Sprintf("%s/%s/%v/%v/%v", s.Name(), s.SpanKind(), a[string(LeaseOutcome)], a[string(FenceOutcome)], s.Status().Code))
	}
	want := []string{
		"lease acquire/server/granted/<nil>/Unset",
		"lease acquire/client/granted/<nil>/Unset",
		"lease renew/server/renewed/<nil>/Unset",
		"lease renew/client/renewed/<nil>/Unset",
		"lease release/server/released/<nil>/Unset",
		"lease release/server/refused/<nil>/Unset",
		"fence admit/internal/<nil>/raised/Unset",
		"fence admit/internal/<nil>/below-floor/Unset",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("spans:\n%v\nwant\n%v", got, want)
	}
}

// With a gate clock, a commit span lasts from the call to its return.
func TestHooksCommitDurationFromGateClock(t *testing.T) {
	gateClock := leasefence.NewManualClock("gate", leasefence.WithStepPerRead(30*time.Millisecond))
	w := newHookWorld(t, leasefence.WithGateClock(gateClock))
	l := w.acquire(t, w.client(t, "agent-a"))
	if err := w.gate.Commit(t.Context(), l.Token, noWrite); err != nil {
		t.Fatal(err)
	}
	s := w.last(t, SpanFenceCommit)
	if d := s.EndTime().Sub(s.StartTime()); d != 30*time.Millisecond {
		t.Errorf("commit span lasts %v, want the gate clock's 30ms", d)
	}
}

func TestHooksWriteErrors(t *testing.T) {
	w := newHookWorld(t)
	l := w.acquire(t, w.client(t, "agent-a"))
	boom := errors.New("disk full")
	if err := w.gate.Commit(t.Context(), l.Token, func(context.Context) error { return boom }); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	s := w.last(t, SpanFenceCommit)
	if s.Status().Code != codes.Error || attrMap(s.Attributes())[string(ErrorType)] != "*errors.errorString" ||
		attrMap(s.Attributes())[string(FenceOutcome)] != OutcomeAdmitted {
		t.Errorf("failed write: status %v, attributes %v", s.Status(), attrMap(s.Attributes()))
	}
	func() {
		defer func() { _ = recover() }()
		_ = w.gate.Commit(t.Context(), l.Token, func(context.Context) error { panic("bug") })
	}()
	s = w.last(t, SpanFenceCommit)
	if s.Status().Code != codes.Error || attrMap(s.Attributes())[string(ErrorType)] != ErrorWritePanicked {
		t.Errorf("panicked write: status %v, attributes %v", s.Status(), attrMap(s.Attributes()))
	}
}

// The client hook's record of begun requests is bounded: the oldest is
// forgotten, and its completion still makes a span, from the completion.
func TestHooksBeginRecordIsBounded(t *testing.T) {
	h := &hooks{tracer: newConfig(nil).tracer(), begun: make(map[string]begun)}
	for i := range 3 * maxBegun {
		id := fmt.Sprint(i)
		h.clientBegin(leasefence.BeginInfo{Kind: leasefence.KindAcquire, RequestID: id})
		if i%2 == 0 {
			h.clientComplete(leasefence.CompleteInfo{Kind: leasefence.KindAcquire, RequestID: id, Err: leasefence.ErrUnknownRequest})
		}
	}
	if len(h.begun) > maxBegun || len(h.order) > 2*maxBegun+1 {
		t.Errorf("record holds %d requests in an order of %d, want at most %d", len(h.begun), len(h.order), maxBegun)
	}
	if _, ok := h.begun[fmt.Sprint(3*maxBegun-1)]; !ok {
		t.Error("the newest request was forgotten")
	}
	if _, ok := h.begun["1"]; ok {
		t.Error("the oldest request is still remembered")
	}
}

// attrMap is a span's attributes by key.
func attrMap(kvs []attribute.KeyValue) map[string]any {
	if len(kvs) == 0 {
		return nil
	}
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.AsInterface()
	}
	return m
}
