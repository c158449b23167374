package etcdlease

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasefence/lab/leasefence"
)

// grantProof returns the proof of the grant of t recorded under the acquire's
// request id, proving t and recording it first when the record has none.
//
// The fence is the revision of the transaction that grants, so the proof
// can only be made after it: the grant is written first with an unproved
// request record, and no answer carries the grant until its proof is in the
// record. Whoever records a proof first wins (the write compares the
// record's mod revision), and every answer, a retry's included, returns the
// recorded string: a proof is never replaced. A record without a proof (the
// process that granted died before recording one) is proved by the retry
// that finds it.
//
// When Prove fails, the grant is withdrawn in one transaction that deletes
// the holder key and the request record, unless a proof was recorded
// meanwhile: nobody has been answered with the grant, so the resource is
// free again and the request id unused. The last-grant key keeps the
// withdrawn grant's holder and fence: a token nobody received, which renew
// and release answer as expired.
func (c *Coordinator) grantProof(ctx context.Context, t leasefence.Token, requestID string, rec requestValue, modRev int64, replay clientv3.LeaseID) (string, error) {
	if rec.Proof != "" || c.prover == nil {
		return rec.Proof, nil
	}
	hk, rk := c.keys.holder(t.Resource), c.keys.request(requestID)
	unchanged := []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(hk), "=", int64(t.Fence)),
		clientv3.Compare(clientv3.ModRevision(rk), "=", modRev),
	}
	proof, err := c.prover.Prove(t)
	if err != nil {
		_, werr := c.cli.Txn(ctx).If(unchanged...).Then(clientv3.OpDelete(hk), clientv3.OpDelete(rk)).Commit()
		return "", errors.Join(fmt.Errorf("etcdlease: proving %v: %w (the grant was withdrawn)", t, err), werr)
	}
	rec.Proof = proof
	resp, err := c.cli.Txn(ctx).If(unchanged...).
		Then(clientv3.OpPut(rk, mustJSON(rec), clientv3.WithLease(replay))).
		Else(clientv3.OpGet(rk)).Commit()
	switch {
	case err != nil:
		return "", err // a retry finds out whether the proof was recorded
	case resp.Succeeded:
		return proof, nil
	}
	// Another answer recorded its proof first, or the lease is gone.
	if kv := firstKV(resp, 0); kv != nil && kv.CreateRevision == int64(t.Fence) {
		if won, err := decode[requestValue](kv); err != nil || won.Proof != "" {
			return won.Proof, err
		}
	}
	return "", fmt.Errorf("etcdlease: acquire %q: the grant ended before its proof was recorded; retry the request", t.Resource)
}
