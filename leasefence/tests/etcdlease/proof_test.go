package etcdlease_test

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/etcdlease"
)

// countingProver proves a token as "name:token#n", n counting its calls, so
// a test sees which coordinator proved a grant and whether it proved it
// twice; it fails while fail is set.
type countingProver struct {
	name  string
	calls atomic.Int64
	fail  atomic.Bool
}

var errNoKey = errors.New("signing key unavailable")

func (p *countingProver) Prove(t leasefence.Token) (string, error) {
	n := p.calls.Add(1)
	if p.fail.Load() {
		return "", errNoKey
	}
	return fmt.Sprintf("%s:%s#%d", p.name, t, n), nil
}

// A retry answered by another coordinator process returns the proof
// recorded with the request id, never a new one; the renewed lease keeps it.
func TestProofRecordedWithTheRequest(t *testing.T) {
	prefix := newPrefix()
	pa, pb := &countingProver{name: "a"}, &countingProver{name: "b"}
	first := newCoordinator(t, etcdlease.Options{Prefix: prefix, Prover: pa})
	second := newCoordinator(t, etcdlease.Options{Prefix: prefix, Prover: pb})
	client := holderClient(t, "agent-a")
	req, _ := client.BeginAcquire("r")
	granted, err := first.Acquire(t.Context(), req)
	if err != nil || !granted.OK {
		t.Fatalf("Acquire = %+v, %v", granted, err)
	}
	want := fmt.Sprintf("a:%s#1", granted.Grant.Token)
	if granted.Grant.Proof != want {
		t.Fatalf("Grant.Proof = %q, want %q", granted.Grant.Proof, want)
	}
	retried, err := second.Acquire(t.Context(), req)
	if err != nil || !retried.OK || retried.Grant.Proof != want {
		t.Fatalf("retry through another coordinator = %+v, %v; want proof %q", retried, err, want)
	}
	if pa.calls.Load() != 1 || pb.calls.Load() != 0 {
		t.Fatalf("Prove calls: first %d, second %d; want 1 and 0 (a replay is never re-signed)", pa.calls.Load(), pb.calls.Load())
	}
	lease, err := client.CompleteAcquire(req, retried.Grant)
	if err != nil || lease.Proof != want {
		t.Fatalf("CompleteAcquire: proof %q, %v", lease.Proof, err)
	}
	rreq, _ := client.BeginRenewal(lease)
	renewed, err := second.Renew(t.Context(), rreq)
	if err != nil || !renewed.OK {
		t.Fatalf("Renew = %+v, %v", renewed, err)
	}
	again, err := client.CompleteRenewal(rreq, renewed.Grant)
	if err != nil || again.Proof != want {
		t.Fatalf("CompleteRenewal: proof %q, %v; want %q kept", again.Proof, err, want)
	}
}

// A grant whose process died before recording its proof (here: granted by
// a coordinator with no Prover) is proved by the retry that finds it, once:
// later retries return that recorded proof.
func TestRetryProvesAnUnprovedRecordOnce(t *testing.T) {
	prefix := newPrefix()
	unproved := newCoordinator(t, etcdlease.Options{Prefix: prefix})
	p := &countingProver{name: "b"}
	proving := newCoordinator(t, etcdlease.Options{Prefix: prefix, Prover: p})
	req, _ := holderClient(t, "agent-a").BeginAcquire("r")
	granted, err := unproved.Acquire(t.Context(), req)
	if err != nil || !granted.OK || granted.Grant.Proof != "" {
		t.Fatalf("Acquire without a Prover = %+v, %v", granted, err)
	}
	var proofs []string
	for range 3 {
		out, err := proving.Acquire(t.Context(), req)
		if err != nil || !out.OK || out.Grant.Token != granted.Grant.Token {
			t.Fatalf("retry = %+v, %v", out, err)
		}
		proofs = append(proofs, out.Grant.Proof)
	}
	want := fmt.Sprintf("b:%s#1", granted.Grant.Token)
	if proofs[0] != want || proofs[1] != want || proofs[2] != want || p.calls.Load() != 1 {
		t.Fatalf("retries' proofs %q after %d Prove calls; want %q three times, proved once", proofs, p.calls.Load(), want)
	}
}

// When Prove fails, nothing is granted: the resource is free for the next
// holder and the request id unused.
func TestProverFailureWithdrawsTheGrant(t *testing.T) {
	p := &countingProver{name: "a"}
	p.fail.Store(true)
	coord := newCoordinator(t, etcdlease.Options{Prover: p})
	req, _ := holderClient(t, "agent-a").BeginAcquire("r")
	out, err := coord.Acquire(t.Context(), req)
	if !errors.Is(err, errNoKey) || out.OK {
		t.Fatalf("Acquire with a failing Prover = %+v, %v; want an error wrapping %v", out, err, errNoKey)
	}
	p.fail.Store(false)
	other := acquireOnce(t, coord, holderClient(t, "agent-b"), "r")
	if !other.OK || other.Grant.Proof == "" {
		t.Fatalf("next holder after the failure = %+v; want a proved grant on the free resource", other)
	}
	if out, err := coord.Acquire(t.Context(), req); err != nil || out.Reason != leasefence.ReasonHeld {
		t.Fatalf("retry of the failed request = %+v, %v; want held by agent-b (the id was never used)", out, err)
	}
}
