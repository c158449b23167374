package etcdembed

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// MemberConfig is one member of a cluster whose members run apart (each
// in its own process), reached through addresses that are not its own:
// it listens on ListenClient and ListenPeer (host:port; port 0 takes any
// free port) and tells its cluster and clients to use AdvertiseClient and
// AdvertisePeer (URLs, e.g. of proxies in front of it).
type MemberConfig struct {
	Name string
	Dir  string // its data directory: a restart on the same one resumes

	ListenClient, ListenPeer       string
	AdvertiseClient, AdvertisePeer string

	// InitialCluster is every member's name=advertised-peer-URL, joined
	// by commas; Token names the cluster (the same for every member).
	InitialCluster, Token string
}

// Serving is a member started from a MemberConfig. Its listeners are
// bound when StartConfigured returns; it serves once Ready does.
type Serving struct {
	e *embed.Etcd
	// ClientAddr and PeerAddr are the host:port its listeners took.
	ClientAddr, PeerAddr string
}

// StartConfigured starts the member of c. It does not wait for the
// cluster: the member's listeners are bound, and Ready says when it
// serves.
func StartConfigured(c MemberConfig) (*Serving, error) {
	parse := func(what, s string) (url.URL, error) {
		u, err := url.Parse(s)
		if err != nil || u.Host == "" {
			return url.URL{}, fmt.Errorf("etcdembed: %s %q is not a URL", what, s)
		}
		return *u, nil
	}
	var urls [4]url.URL
	for i, s := range []string{"http://" + c.ListenClient, "http://" + c.ListenPeer, c.AdvertiseClient, c.AdvertisePeer} {
		u, err := parse([]string{"listen client", "listen peer", "advertise client", "advertise peer"}[i], s)
		if err != nil {
			return nil, err
		}
		urls[i] = u
	}
	m := &Member{Name: c.Name, Dir: c.Dir}
	cfg := memberConfig(m, c.InitialCluster, c.Token)
	cfg.ListenClientUrls, cfg.ListenPeerUrls = []url.URL{urls[0]}, []url.URL{urls[1]}
	cfg.AdvertiseClientUrls, cfg.AdvertisePeerUrls = []url.URL{urls[2]}, []url.URL{urls[3]}
	// Clients ping often, to find a paused member's connection dead soon.
	cfg.GRPCKeepAliveMinTime = 500 * time.Millisecond
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcdembed: start %s: %w", c.Name, err)
	}
	return &Serving{e: e, ClientAddr: e.Clients[0].Addr().String(), PeerAddr: e.Peers[0].Addr().String()}, nil
}

// Ready waits until the member serves (it has joined its cluster), it
// fails, or ctx ends.
func (s *Serving) Ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	select {
	case <-s.e.Server.ReadyNotify():
		return nil
	case err := <-s.e.Err():
		return fmt.Errorf("etcdembed: %s failed: %w", s.e.Config().Name, err)
	case <-ctx.Done():
		return fmt.Errorf("etcdembed: %s not ready: %w", s.e.Config().Name, ctx.Err())
	}
}

// ID is the member's id in its cluster, as etcd's peers name it in
// hexadecimal (X-Server-From).
func (s *Serving) ID() string { return s.e.Server.MemberID().String() }

// Err reports the member's failure after it started.
func (s *Serving) Err() <-chan error { return s.e.Err() }

// Close stops the member, waiting a bounded time for it to hand over.
func (s *Serving) Close() {
	done := make(chan struct{})
	go func() {
		s.e.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
}
