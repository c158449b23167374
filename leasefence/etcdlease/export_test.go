package etcdlease

import clientv3 "go.etcd.io/etcd/client/v3"

// SpareLease is the coordinator's spare lease, 0 when it has none.
func (c *Coordinator) SpareLease() clientv3.LeaseID {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.spare
}
