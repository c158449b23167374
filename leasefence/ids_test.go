package leasefence_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/leasetest"
)

func TestValidateID(t *testing.T) {
	good := []string{"a", "worker-a", "héllo wörld", strings.Repeat("é", leasefence.MaxIDLen/2), strings.Repeat("x", leasefence.MaxIDLen),
		"~ !\"<&>'\\", "line\u2028separator", "\u00a0no-break", "\ufffd"}
	for _, id := range good {
		if err := leasefence.ValidateID(leasefence.IDHolder, id); err != nil {
			t.Errorf("ValidateID(%.20q, %d bytes) = %v, want nil", id, len(id), err)
		}
	}
	leasetest.CheckIDError(t, "ValidateID(empty)", leasefence.ValidateID(leasefence.IDResource, ""), leasefence.IDResource, "empty")
	for _, bad := range leasetest.BadIDs() {
		t.Run(bad.Name, func(t *testing.T) {
			leasetest.CheckIDError(t, "ValidateID", leasefence.ValidateID(leasefence.IDHolder, bad.ID), leasefence.IDHolder, bad.Why)
			leasetest.CheckIDError(t, "ValidateToken(holder)", leasefence.ValidateToken(tok("r", bad.ID, 1)), leasefence.IDHolder, bad.Why)
			leasetest.CheckIDError(t, "ValidateToken(resource)", leasefence.ValidateToken(tok(bad.ID, "a", 1)), leasefence.IDResource, bad.Why)
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
	for _, bad := range leasetest.BadIDs() {
		t.Run(bad.Name, func(t *testing.T) {
			_, err := leasefence.NewClient(leasefence.ClientOptions{Clock: clock, Holder: bad.ID})
			leasetest.CheckIDError(t, "NewClient", err, leasefence.IDHolder, bad.Why)
			client := newClient(t, clock, "a", 0)
			_, err = client.BeginAcquire(bad.ID)
			leasetest.CheckIDError(t, "BeginAcquire", err, leasefence.IDResource, bad.Why)

			coord := newCoordinator(t, clock, testTTL)
			_, err = coord.Acquire(leasefence.AcquireRequest{RequestID: "1", Holder: bad.ID, Resource: "r"})
			leasetest.CheckIDError(t, "Acquire(holder)", err, leasefence.IDHolder, bad.Why)
			_, err = coord.Acquire(leasefence.AcquireRequest{RequestID: "1", Holder: "a", Resource: bad.ID})
			leasetest.CheckIDError(t, "Acquire(resource)", err, leasefence.IDResource, bad.Why)
			_, err = coord.Acquire(leasefence.AcquireRequest{RequestID: bad.ID, Holder: "a", Resource: "r"})
			leasetest.CheckIDError(t, "Acquire(request id)", err, leasefence.IDRequestID, bad.Why)
			_, err = coord.Renew(leasefence.RenewRequest{RequestID: "2", Token: tok("r", bad.ID, 1)})
			leasetest.CheckIDError(t, "Renew(holder)", err, leasefence.IDHolder, bad.Why)
			_, err = coord.Renew(leasefence.RenewRequest{RequestID: bad.ID, Token: tok("r", "a", 1)})
			leasetest.CheckIDError(t, "Renew(request id)", err, leasefence.IDRequestID, bad.Why)
			_, err = coord.Release(tok("r", bad.ID, 1))
			leasetest.CheckIDError(t, "Release", err, leasefence.IDHolder, bad.Why)
			if coord.IssuedFence() != 0 {
				t.Errorf("IssuedFence = %d after refused calls", coord.IssuedFence())
			}

			gate := leasefence.NewFenceGate("r", leasefence.WithInitialFloor(5))
			err = gate.Commit(t.Context(), tok("r", bad.ID, 1), func(context.Context) error { return nil })
			leasetest.CheckIDError(t, "FenceGate.Commit", err, leasefence.IDHolder, bad.Why)
			leasetest.CheckIDError(t, "FenceGate.Admit", gate.Admit(tok("r", bad.ID, 9)), leasefence.IDHolder, bad.Why)
			leasetest.CheckIDError(t, "AsGate.Admit", leasefence.AsGate(gate).Admit(t.Context(), tok("r", bad.ID, 9)), leasefence.IDHolder, bad.Why)
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

// FuzzValidateID: the rule's fast path (eight bytes at a time, then the
// full decoder) answers as the plain statement of the rule does.
func FuzzValidateID(f *testing.F) {
	for _, s := range []string{"", "a", "worker-a", "orders-12345678", "héllo", "caf\xc3", "\xff", "abcdefg\x80", "abcdefgh\xe2\x82", "日本語のホルダー",
		"worker-a\n", "abcdefgh\x1f", "\x7fabcdefgh", "abcdefg\x7f", "abcdefg\x20\x7e", "é\u009f", "\u00a0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		want := len(id) > 0 && len(id) <= leasefence.MaxIDLen && utf8.ValidString(id) && !strings.ContainsFunc(id, unicode.IsControl)
		if got := leasefence.ValidateID(leasefence.IDHolder, id) == nil; got != want {
			t.Fatalf("ValidateID(%q) accepts: %v, want %v", id, got, want)
		}
	})
}
