package etcdlease

import (
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasefence/lab/leasefence"
)

// grantKey names one grant: the holder key of a resource with one create
// revision (the fence), held by one holder. A token names the grant it
// was issued for, and only that grant.
type grantKey struct {
	resource, holder string
	fence            int64
}

func keyOf(t leasefence.Token) (grantKey, bool) {
	fence, ok := fenceInt64(t.Fence)
	return grantKey{resource: t.Resource, holder: t.Holder, fence: fence}, ok
}

// grantLease is the etcd lease a grant's holder key is attached to, and
// when the request that last started the lease's TTL was sent.
type grantLease struct {
	id   clientv3.LeaseID
	sent time.Time
}

// minPrune is the fewest remembered grants at which the coordinator looks
// for ones to forget.
const minPrune = 256

// remember records that grant k's holder key is attached to lease id, as
// the coordinator learnt from the transaction that created the key or from
// a read of the key of k's create revision: a key's lease is set when it is
// created (acquires create it only where there is none) and never changes,
// so the record stays true for as long as the key lives.
//
// What is remembered only spares a renewal its first read (see
// renewKnown); forgetting costs a renewal that read and nothing else. So
// once the coordinator remembers pruneAt grants, it forgets those whose
// lease was last started more than two TTLs ago (expired, or renewed
// through another coordinator), and waits until it has twice as many as
// it kept before looking again: the record stays in proportion to the
// grants it keeps alive.
func (c *Coordinator) remember(k grantKey, id clientv3.LeaseID, sent time.Time) {
	c.grantedMu.Lock()
	defer c.grantedMu.Unlock()
	if c.granted == nil {
		c.granted = make(map[grantKey]grantLease)
	}
	c.granted[k] = grantLease{id: id, sent: sent}
	if len(c.granted) < max(c.pruneAt, minPrune) {
		return
	}
	old := 2 * time.Duration(c.ttl) * time.Second
	for gk, gl := range c.granted {
		if time.Since(gl.sent) > old {
			delete(c.granted, gk)
		}
	}
	c.pruneAt = 2 * len(c.granted)
}

// recall returns the etcd lease remembered for grant k, unless the
// coordinator last started it a TTL or more ago: by then it has expired
// unless it was renewed elsewhere, and renewKnown, which sends the
// keep-alive before it knows the key, is kept to leases last known alive.
func (c *Coordinator) recall(k grantKey) (clientv3.LeaseID, bool) {
	c.grantedMu.Lock()
	defer c.grantedMu.Unlock()
	gl, ok := c.granted[k]
	if !ok || time.Since(gl.sent) >= time.Duration(c.ttl)*time.Second {
		return 0, false
	}
	return gl.id, true
}

// forget drops what is remembered of grant k: it was released, or is no
// longer the resource's live lease.
func (c *Coordinator) forget(k grantKey) {
	c.grantedMu.Lock()
	defer c.grantedMu.Unlock()
	delete(c.granted, k)
}
