package etcdlease

import clientv3 "go.etcd.io/etcd/client/v3"

// SpareLeases are the etcd leases the coordinator has granted ahead for its
// next acquires, oldest first: none of them carries a key. It is for
// diagnostics and tests, which watch the spares from outside the package.
func (c *Coordinator) SpareLeases() []clientv3.LeaseID {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := make([]clientv3.LeaseID, len(c.spares))
	for i, s := range c.spares {
		ids[i] = s.id
	}
	return ids
}
