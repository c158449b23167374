// Package etcdbackend is the real-time runner's adapter for etcd: the
// backend etcd (Etcd: an etcdlease Coordinator per mode on an embedded
// cluster, or on given endpoints) and the store etcd (EtcdStore: an
// etcdlease Gate per resource, its record a key per write in the write's
// own transaction, ordered by etcd's revision). It registers both with the
// registry when linked (realtime/adapters links it).
//
// An embedded cluster of one member runs in this process
// (leasefence/etcdlease's etcdembed); of more, as processes behind
// proxies (realtime/etcdcluster), so that the scenario's member faults
// can be played on it (Etcd.BeginFault, realtime's FaultPlayer). What etcd differs in, the
// backend states through realtime's optional interfaces: its retry hints
// are whole seconds, only an embedded cluster restarts, and a restart that
// loses etcd's state takes the etcd gates' floors with it. AttachEtcd lets
// another process (an agent run as an OS process) reach a run's keys.
package etcdbackend
