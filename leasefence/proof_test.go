package leasefence_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence"
)

// countingProver proves a token as "proof(token)#n", n counting calls, so a
// test sees both what was proved and whether it was proved again; it fails
// while err is set.
type countingProver struct {
	calls atomic.Int64
	err   error
}

func (p *countingProver) Prove(t leasefence.Token) (string, error) {
	n := p.calls.Add(1)
	if p.err != nil {
		return "", p.err
	}
	return fmt.Sprintf("proof(%s)#%d", t, n), nil
}

func newProvingCoordinator(t *testing.T, p leasefence.Prover) (*leasefence.Coordinator, *leasefence.ManualClock) {
	t.Helper()
	clock := leasefence.NewManualClock("coordinator")
	c, err := leasefence.NewCoordinator(leasefence.CoordinatorOptions{Clock: clock, TTL: testTTL, Prover: p})
	if err != nil {
		t.Fatal(err)
	}
	return c, clock
}

func TestProverProvesEachFreshGrantOnce(t *testing.T) {
	p := &countingProver{}
	coord, _ := newProvingCoordinator(t, p)
	client := newClient(t, leasefence.NewManualClock("client"), "alice", 0)

	req, err := client.BeginAcquire("db")
	if err != nil {
		t.Fatal(err)
	}
	first, err := coord.Acquire(req)
	if err != nil || !first.OK {
		t.Fatalf("Acquire = %+v, %v", first, err)
	}
	want := fmt.Sprintf("proof(%s)#1", first.Grant.Token)
	if first.Grant.Proof != want {
		t.Fatalf("Grant.Proof = %q, want %q", first.Grant.Proof, want)
	}
	retried, err := coord.Acquire(req)
	if err != nil || retried.Grant.Proof != want {
		t.Fatalf("retried Acquire = %+v, %v; want the same proof %q", retried, err, want)
	}
	lease, err := client.CompleteAcquire(req, retried.Grant)
	if err != nil || lease.Proof != want {
		t.Fatalf("CompleteAcquire: lease proof %q, %v; want %q", lease.Proof, err, want)
	}
	rreq, err := client.BeginRenewal(lease)
	if err != nil {
		t.Fatal(err)
	}
	renewed, err := coord.Renew(rreq)
	if err != nil || !renewed.OK || renewed.Grant.Proof != want {
		t.Fatalf("Renew = %+v, %v; want proof %q", renewed, err, want)
	}
	again, err := client.CompleteRenewal(rreq, renewed.Grant)
	if err != nil || again.Proof != want {
		t.Fatalf("CompleteRenewal: lease proof %q, %v; want %q", again.Proof, err, want)
	}
	if n := p.calls.Load(); n != 1 {
		t.Fatalf("Prove called %d times, want once: a replay and a renewal are never proved again", n)
	}
}

// A coordinator across a network may answer a renewal without the proof:
// the renewed lease keeps the one it had.
func TestCompleteRenewalKeepsTheLeasesProof(t *testing.T) {
	coord, _ := newProvingCoordinator(t, &countingProver{})
	client := newClient(t, leasefence.NewManualClock("client"), "alice", 0)
	lease, g := acquireLease(t, client, coord, "db")
	rreq, err := client.BeginRenewal(lease)
	if err != nil {
		t.Fatal(err)
	}
	out, err := coord.Renew(rreq)
	if err != nil || !out.OK {
		t.Fatalf("Renew = %+v, %v", out, err)
	}
	out.Grant.Proof = ""
	renewed, err := client.CompleteRenewal(rreq, out.Grant)
	if err != nil || renewed.Proof != g.Proof || g.Proof == "" {
		t.Fatalf("renewed lease proof %q, %v; want %q", renewed.Proof, err, g.Proof)
	}
}

func TestProverFailureGrantsNothing(t *testing.T) {
	boom := errors.New("signing key unavailable")
	p := &countingProver{err: boom}
	coord, _ := newProvingCoordinator(t, p)
	req := leasefence.AcquireRequest{RequestID: "r1", Holder: "alice", Resource: "db"}
	out, err := coord.Acquire(req)
	if !errors.Is(err, boom) || out.OK {
		t.Fatalf("Acquire with a failing Prover = %+v, %v; want no grant and an error wrapping %v", out, err, boom)
	}
	if f := coord.IssuedFence(); f != 0 {
		t.Fatalf("IssuedFence = %d after a failed proof, want 0: no fence is minted", f)
	}
	p.err = nil
	// The resource stayed free and the request id unused: another holder
	// gets fence 1, and the first request is a fresh one, answered "held".
	other, err := coord.Acquire(leasefence.AcquireRequest{RequestID: "r2", Holder: "bob", Resource: "db"})
	if err != nil || !other.OK || other.Grant.Token.Fence != 1 {
		t.Fatalf("Acquire after the failure = %+v, %v; want bob granted fence 1", other, err)
	}
	if out, err := coord.Acquire(req); err != nil || out.Reason != leasefence.ReasonHeld {
		t.Fatalf("retry of the failed request = %+v, %v; want held (it was never granted)", out, err)
	}
}

func TestNoProverNoProof(t *testing.T) {
	coord := newCoordinator(t, leasefence.NewManualClock("coordinator"), testTTL)
	client := newClient(t, leasefence.NewManualClock("client"), "alice", 0)
	lease, g := acquireLease(t, client, coord, "db")
	if g.Proof != "" || lease.Proof != "" {
		t.Fatalf("proof without a Prover: grant %q, lease %q", g.Proof, lease.Proof)
	}
	b, err := json.Marshal(g)
	if err != nil || strings.Contains(string(b), "proof") {
		t.Fatalf("a grant without a proof marshals as %s, %v: want no proof member", b, err)
	}
}

func TestProofJSON(t *testing.T) {
	g := leasefence.Grant{RequestID: "r", Token: tok("db", "alice", 7), Proof: "p.q.r"}
	b, err := json.Marshal(g)
	if err != nil || !strings.Contains(string(b), `"proof":"p.q.r"`) {
		t.Fatalf("Grant marshals as %s, %v", b, err)
	}
	var back leasefence.Grant
	if err := json.Unmarshal(b, &back); err != nil || back != g {
		t.Fatalf("round trip = %+v, %v", back, err)
	}
	l := leasefence.Lease{Token: g.Token, Proof: g.Proof}
	b, err = json.Marshal(l)
	if err != nil || !strings.Contains(string(b), `"proof":"p.q.r"`) {
		t.Fatalf("Lease marshals as %s, %v", b, err)
	}
}

// A session renews its lease under the same fence, so under the same proof,
// and the proof is made once.
func TestSessionKeepsTheProof(t *testing.T) {
	p := &countingProver{}
	coord, err := leasefence.NewCoordinator(leasefence.CoordinatorOptions{
		Clock: leasefence.NewMonotonicClock("coordinator"), TTL: 300 * time.Millisecond, Prover: p,
	})
	if err != nil {
		t.Fatal(err)
	}
	client := newClient(t, leasefence.NewMonotonicClock("client"), "alice", 0)
	s, err := leasefence.Hold(t.Context(), leasefence.Local(coord), client, "db", leasefence.HoldOptions{RenewEvery: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release(context.Background())
	first := s.Lease()
	if first.Proof == "" {
		t.Fatal("the session's lease has no proof")
	}
	for s.Lease().Deadline == first.Deadline {
		select {
		case <-s.Lost():
			t.Fatalf("session lost: %v", s.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	if got := s.Lease().Proof; got != first.Proof || p.calls.Load() != 1 {
		t.Fatalf("after a renewal the proof is %q (%d Prove calls), want %q proved once", got, p.calls.Load(), first.Proof)
	}
}
