package etcdbackend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/leasefence/lab/leasefence/etcdlease/etcdembed"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/realtime/etcdcluster"
	"github.com/leasefence/lab/registry"
)

// What another process needs to take part in a run set up here: an agent
// run as a process of its own reaches the run's etcd under the run's
// prefix (Share, and the attachers registered below).

// Endpoints are the client URLs of the cluster the backend uses: its
// members' proxies when they are processes.
func (e *Etcd) Endpoints() []string {
	if e.cluster != nil {
		return e.cluster.Endpoints()
	}
	if cl := e.Members(); cl != nil {
		return cl.Endpoints()
	}
	return e.opts.Endpoints
}

// AttachEtcd reaches the run whose keys are under prefix on the cluster at
// endpoints (another backend's Endpoints and Prefix). Its Close closes the
// client only: the keys, the cluster and its directory are the run's.
func AttachEtcd(endpoints []string, prefix string) (*Etcd, error) {
	if len(endpoints) == 0 || prefix == "" {
		return nil, errors.New("realtime: etcd: attaching needs the run's endpoints and prefix")
	}
	cli, err := etcdembed.Client(endpoints...)
	if err != nil {
		return nil, err
	}
	e := &Etcd{opts: EtcdOptions{Endpoints: endpoints, Members: 1}, prefix: prefix, attached: true}
	e.cli.Store(cli)
	return e, nil
}

// share is how another process reaches an Etcd backend.
type share struct {
	Endpoints []string `json:"endpoints"`
	Prefix    string   `json:"prefix"`
}

// Share implements realtime.Sharer: the cluster's endpoints and the run's
// prefix, for the backend's attacher.
func (e *Etcd) Share() (string, error) {
	b, err := json.Marshal(share{Endpoints: e.Endpoints(), Prefix: e.Prefix()})
	return string(b), err
}

// Share implements realtime.Sharer: the gates are in the backend's etcd.
func (EtcdStore) Share() (string, error) { return "", nil }

func init() {
	// A member of a cluster of several runs as this binary started anew.
	realtime.RegisterServer(etcdcluster.ServeMemberIfAsked)
	registry.SetOpener(registry.Backends, registry.Etcd, realtime.BackendAttacher(func(_ context.Context, sh string) (realtime.Backend, error) {
		var s share
		if err := json.Unmarshal([]byte(sh), &s); err != nil {
			return nil, fmt.Errorf("realtime: etcd: attaching: %w", err)
		}
		e, err := AttachEtcd(s.Endpoints, s.Prefix)
		if err != nil {
			return nil, err // not a nil *Etcd in a Backend, which Close would call
		}
		return e, nil
	}))
	registry.SetOpener(registry.Stores, registry.Etcd, realtime.StoreBeside(func(e *Etcd) realtime.Store { return EtcdStore{E: e} }))
}
