package leasefence

import (
	"context"
	"errors"
	"testing"
)

func TestAsGate(t *testing.T) {
	g := NewFenceGate("res")
	gate := AsGate(g)
	ctx := t.Context()
	if gate.Resource() != "res" {
		t.Fatalf("Resource = %q", gate.Resource())
	}
	high := Token{Resource: "res", Holder: "b", Fence: 2}
	low := Token{Resource: "res", Holder: "a", Fence: 1}
	if err := gate.Admit(ctx, high); err != nil {
		t.Fatal(err)
	}
	if err := g.Commit(ctx, low, func(context.Context) error { return nil }); !errors.Is(err, ErrStaleFence) {
		t.Fatalf("stale commit: %v", err)
	}
	if f, err := gate.Floor(ctx); err != nil || f != high {
		t.Fatalf("Floor = %v, %v", f, err)
	}
	rs, missed, err := gate.RejectionsSince(ctx, 0)
	if err != nil || missed != 0 || len(rs) != 1 || rs[0].Seq != 1 || rs[0].Holder != "a" {
		t.Fatalf("RejectionsSince = %v, %d, %v", rs, missed, err)
	}
	if n, err := gate.RejectionCount(ctx); err != nil || n != 1 {
		t.Fatalf("RejectionCount = %d, %v", n, err)
	}
}

func TestAsGateRefusesBadCalls(t *testing.T) {
	gate := AsGate(NewFenceGate("res"))
	var nilCtx context.Context
	if err := gate.Admit(nilCtx, Token{Resource: "res", Holder: "a", Fence: 1}); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("Admit(nil ctx) = %v", err)
	}
	if _, err := gate.Floor(nilCtx); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("Floor(nil ctx) = %v", err)
	}
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	if _, _, err := gate.RejectionsSince(ended, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("RejectionsSince(ended ctx) = %v", err)
	}
	zero := AsGate(&FenceGate{})
	if _, err := zero.RejectionCount(t.Context()); !errors.Is(err, ErrUninitialized) {
		t.Errorf("RejectionCount at a zero gate = %v", err)
	}
}
