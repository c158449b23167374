package leasefence

import "fmt"

// A Prover turns a token the coordinator has just granted into a credential
// that a resource can check without asking the coordinator: a signature
// over the token, typically (leasefence/fencetoken signs one). The core
// treats the credential as opaque and never parses it.
//
// The contract:
//   - Prove is called once per fresh grant, before anything is granted,
//     with the coordinator's lock held: it must not call the coordinator,
//     and it should be quick (an Ed25519 signature is some tens of
//     microseconds).
//   - A retried acquire answered from the replay record, and a renewal,
//     return the proof already made: nothing is proved twice.
//   - An error grants nothing (the resource stays free, no fence is
//     minted) and is returned by Acquire, wrapped.
//   - It is called from many goroutines at once when several coordinators
//     share it.
type Prover interface {
	Prove(t Token) (string, error)
}

// prove returns p's credential for t, or "" when there is no Prover.
func prove(p Prover, t Token) (string, error) {
	if p == nil {
		return "", nil
	}
	proof, err := p.Prove(t)
	if err != nil {
		return "", fmt.Errorf("leasefence: proving %v: %w", t, err)
	}
	return proof, nil
}

// keptProof is the proof a completed request's lease carries: the grant's,
// and for a renewal whose grant carries none, the one the lease had, since a
// renewal keeps the fence and so the proof.
func keptProof(kind RequestKind, rec *requestRecord, g Grant) string {
	if kind == KindRenew && g.Proof == "" {
		return rec.proof
	}
	return g.Proof
}
