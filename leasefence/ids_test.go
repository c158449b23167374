package leasefence_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/leasefence/lab/leasefence"
)

// badIDs are ids every client, coordinator and gate refuses, with the
// *IDError they must answer.
var badIDs = []struct {
	name, id string
	why      string
}{
	{"too long", strings.Repeat("h", leasefence.MaxIDLen+1), "longer than MaxIDLen"},
	{"1.6 MB", strings.Repeat("h", 1600*1000), "longer than MaxIDLen"},
	{"not UTF-8", "worker-\xff\xfe", "not valid UTF-8"},
	{"a cut rune", "caf\xc3", "not valid UTF-8"},
}

// wantIDError fails t unless err is an *IDError of kind that says why and
// matches ErrInvalidRequest.
func wantIDError(t *testing.T, err error, kind leasefence.IDKind, why string) {
	t.Helper()
	var ide *leasefence.IDError
	if !errors.As(err, &ide) || !errors.Is(err, leasefence.ErrInvalidRequest) {
		t.Fatalf("err = %v, want an *IDError matching ErrInvalidRequest", err)
	}
	if ide.Kind != kind || !strings.Contains(ide.Why, why) || !strings.Contains(err.Error(), why) {
		t.Errorf("IDError = %+v (%v), want kind %q saying %q", ide, err, kind, why)
	}
	if len(err.Error()) > 300 {
		t.Errorf("the message quotes the whole id: %d bytes", len(err.Error()))
	}
}

func TestValidateID(t *testing.T) {
	good := []string{"a", "worker-a", "héllo wörld", strings.Repeat("é", leasefence.MaxIDLen/2), strings.Repeat("x", leasefence.MaxIDLen)}
	for _, id := range good {
		if err := leasefence.ValidateID(leasefence.IDHolder, id); err != nil {
			t.Errorf("ValidateID(%.20q, %d bytes) = %v, want nil", id, len(id), err)
		}
	}
	wantIDError(t, leasefence.ValidateID(leasefence.IDResource, ""), leasefence.IDResource, "empty")
	for _, bad := range badIDs {
		t.Run(bad.name, func(t *testing.T) {
			wantIDError(t, leasefence.ValidateID(leasefence.IDHolder, bad.id), leasefence.IDHolder, bad.why)
			wantIDError(t, leasefence.ValidateToken(tok("r", bad.id, 1)), leasefence.IDHolder, bad.why)
			wantIDError(t, leasefence.ValidateToken(tok(bad.id, "a", 1)), leasefence.IDResource, bad.why)
		})
	}
	if err := leasefence.ValidateToken(tok("r", "a", 0)); !errors.Is(err, leasefence.ErrInvalidRequest) {
		t.Errorf("ValidateToken(fence 0) = %v, want ErrInvalidRequest", err)
	}
}

// TestIDRuleEverywhere: the client, the coordinator and the in-memory gate
// all refuse a bad holder or resource with the one *IDError, before they
// change or log anything.
func TestIDRuleEverywhere(t *testing.T) {
	clock := leasefence.NewManualClock("c")
	for _, bad := range badIDs {
		t.Run(bad.name, func(t *testing.T) {
			_, err := leasefence.NewClient(leasefence.ClientOptions{Clock: clock, Holder: bad.id})
			wantIDError(t, err, leasefence.IDHolder, bad.why)
			client := newClient(t, clock, "a", 0)
			_, err = client.BeginAcquire(bad.id)
			wantIDError(t, err, leasefence.IDResource, bad.why)

			coord := newCoordinator(t, clock, testTTL)
			_, err = coord.Acquire(leasefence.AcquireRequest{RequestID: "1", Holder: bad.id, Resource: "r"})
			wantIDError(t, err, leasefence.IDHolder, bad.why)
			_, err = coord.Acquire(leasefence.AcquireRequest{RequestID: "1", Holder: "a", Resource: bad.id})
			wantIDError(t, err, leasefence.IDResource, bad.why)
			_, err = coord.Acquire(leasefence.AcquireRequest{RequestID: bad.id, Holder: "a", Resource: "r"})
			wantIDError(t, err, leasefence.IDRequestID, bad.why)
			_, err = coord.Renew(leasefence.RenewRequest{RequestID: "2", Token: tok("r", bad.id, 1)})
			wantIDError(t, err, leasefence.IDHolder, bad.why)
			_, err = coord.Renew(leasefence.RenewRequest{RequestID: bad.id, Token: tok("r", "a", 1)})
			wantIDError(t, err, leasefence.IDRequestID, bad.why)
			_, err = coord.Release(tok("r", bad.id, 1))
			wantIDError(t, err, leasefence.IDHolder, bad.why)
			if coord.IssuedFence() != 0 {
				t.Errorf("IssuedFence = %d after refused calls", coord.IssuedFence())
			}

			gate := leasefence.NewFenceGate("r", leasefence.WithInitialFloor(5))
			err = gate.Commit(t.Context(), tok("r", bad.id, 1), func(context.Context) error { return nil })
			wantIDError(t, err, leasefence.IDHolder, bad.why)
			wantIDError(t, gate.Admit(tok("r", bad.id, 9)), leasefence.IDHolder, bad.why)
			wantIDError(t, leasefence.AsGate(gate).Admit(t.Context(), tok("r", bad.id, 9)), leasefence.IDHolder, bad.why)
			if n := gate.RejectionCount(); n != 0 || gate.Floor().Fence != 5 {
				t.Errorf("after refused calls: %d rejections, floor %v", n, gate.Floor())
			}
		})
	}
}

// BenchmarkValidateToken is the rule's cost on a gate's path, for the
// short ids every real caller has.
func BenchmarkValidateToken(b *testing.B) {
	t := tok("orders", "worker-a", 7)
	for b.Loop() {
		if leasefence.ValidateToken(t) != nil {
			b.Fatal("refused")
		}
	}
}
