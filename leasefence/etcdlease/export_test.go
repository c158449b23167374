package etcdlease

import clientv3 "go.etcd.io/etcd/client/v3"

// SpareLeases are the coordinator's spare leases, oldest first.
func (c *Coordinator) SpareLeases() []clientv3.LeaseID {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := make([]clientv3.LeaseID, len(c.spares))
	for i, s := range c.spares {
		ids[i] = s.id
	}
	return ids
}
