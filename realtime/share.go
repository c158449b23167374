package realtime

import (
	"context"
	"errors"
	"fmt"

	"github.com/leasefence/lab/registry"
)

// Agents run as processes of their own reach what the run's process
// opened: its backend, its store and its library contenders' servers.
// Each that can be shared (its registry entry is Shared) says how (Share),
// in a string its adapter's attacher reads in the other process: the
// attacher is registered under the entry's name (registry.SetOpener) beside
// the opener, as the opener is.

// Sharer is a backend or a store another process can reach: Share is
// what that process's attacher needs.
type Sharer interface {
	Share() (string, error)
}

// BackendAttacher reaches, from another process, the backend whose Share
// was share. Closing what it returns closes only what it opened: the
// run's keys and servers are the run's.
type BackendAttacher func(ctx context.Context, share string) (Backend, error)

// StoreAttacher reaches, from another process, the store whose Share was
// share; backend is the attached backend, for a store kept in it (nil
// when the process attached none). Closing what it returns closes only
// what it opened.
type StoreAttacher func(ctx context.Context, share string, backend Backend) (Store, error)

// ContenderAttacher reaches, from another process, the contender whose
// Share was share: the library's lock on the contender's servers, which
// closing what it returns leaves running.
type ContenderAttacher func(ctx context.Context, share string) (*Contender, error)

// ErrNotShared: what another process was asked to reach cannot be
// reached from another process (it has no Share, or no attacher is
// linked).
var ErrNotShared = errors.New("realtime: cannot be shared with another process")

// Share says how to reach what s is, for the attacher of its kind's entry
// named name; an error wraps ErrNotShared if it cannot be reached.
func Share(name string, s any) (string, error) {
	switch v := s.(type) {
	case Sharer:
		return v.Share()
	case *Contender:
		if v.Share == "" {
			return "", fmt.Errorf("%w: contender %s says not how", ErrNotShared, name)
		}
		return v.Share, nil
	}
	return "", fmt.Errorf("%w: %s", ErrNotShared, name)
}

// AttachBackend reaches backend name, whose Share was share.
func AttachBackend(ctx context.Context, name, share string) (Backend, error) {
	attach, ok := registry.Opener[BackendAttacher](registry.Backends, name)
	if !ok {
		return nil, fmt.Errorf("%w: backend %s has no attacher linked", ErrNotShared, name)
	}
	return attach(ctx, share)
}

// AttachStore reaches store name, whose Share was share, beside backend
// (nil for none).
func AttachStore(ctx context.Context, name, share string, backend Backend) (Store, error) {
	attach, ok := registry.Opener[StoreAttacher](registry.Stores, name)
	if !ok {
		return nil, fmt.Errorf("%w: resource %s has no attacher linked", ErrNotShared, name)
	}
	return attach(ctx, share, backend)
}

// AttachContender reaches contender name, whose Share was share.
func AttachContender(ctx context.Context, name, share string) (*Contender, error) {
	attach, ok := registry.Opener[ContenderAttacher](registry.Contenders, name)
	if !ok {
		return nil, fmt.Errorf("%w: contender %s has no attacher linked", ErrNotShared, name)
	}
	return attach(ctx, share)
}

// StoreBeside is the attacher of a store kept in its backend's server
// (the gates beside the leases): store on the process's attached backend,
// which must be a B.
func StoreBeside[B Backend](store func(B) Store) StoreAttacher {
	return func(_ context.Context, _ string, b Backend) (Store, error) {
		be, ok := b.(B)
		if !ok {
			return nil, fmt.Errorf("%w: the gates are in the run's backend, and the process attached %T", ErrNotShared, b)
		}
		return store(be), nil
	}
}
