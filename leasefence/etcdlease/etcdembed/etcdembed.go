// Package etcdembed runs real etcd members inside the current process, for
// tests and labs that must not depend on anything installed: a single
// member or a cluster on loopback ports, in a directory of the caller's
// choosing, that can be stopped and restarted member by member.
//
// Members use a short heartbeat (50 ms) and election timeout (500 ms), so
// that a leader change takes about a second and etcd's minimum lease TTL
// (1.5 election timeouts) is below one second: 1 s leases are allowed.
// Logging is off. Ports are picked free by the kernel; since another
// process may take a port between the pick and etcd's bind, a failed first
// start is retried on fresh ports.
//
// Everything here returns errors and imports no package testing, so a
// program (the lab's etcd backend) can link it; the testing.TB helpers,
// which stop everything in t.Cleanup, are package etcdtest.
package etcdembed

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Timing of every member.
const (
	HeartbeatMs = 50
	ElectionMs  = 500
)

// readyTimeout bounds the wait for a member to join its cluster.
const readyTimeout = 30 * time.Second

// startAttempts is how many sets of fresh ports a first start tries.
const startAttempts = 5

// Member is one embedded etcd server. Its methods are safe for concurrent
// use.
type Member struct {
	Name string
	Dir  string // its data directory

	mu     sync.Mutex
	cfg    *embed.Config
	etcd   *embed.Etcd // nil while stopped
	client url.URL
	peer   url.URL
}

// Cluster is a set of embedded members that form one etcd cluster.
type Cluster struct {
	Members []*Member
}

// StartMember starts a single-member cluster with its data under dir.
func StartMember(dir string) (*Member, error) {
	c, err := StartCluster(dir, 1)
	if err != nil {
		return nil, err
	}
	return c.Members[0], nil
}

// StartCluster starts an n-member cluster, member i with its data under
// dir/m<i>, and waits until every member has joined.
func StartCluster(dir string, n int) (*Cluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("etcdembed: a cluster of %d members", n)
	}
	var lastErr error
	for range startAttempts {
		c, err := startCluster(dir, n)
		if err == nil {
			return c, nil
		}
		lastErr = err
		if !isAddrInUse(err) {
			break
		}
	}
	return nil, lastErr
}

func startCluster(dir string, n int) (*Cluster, error) {
	token := fmt.Sprintf("etcdembed-%d", time.Now().UnixNano())
	c := &Cluster{}
	var initial []string
	for i := range n {
		client, peer, err := freeURLs()
		if err != nil {
			return nil, err
		}
		m := &Member{Name: fmt.Sprintf("m%d", i), Dir: filepath.Join(dir, fmt.Sprintf("m%d-%s", i, token)), client: client, peer: peer}
		c.Members = append(c.Members, m)
		initial = append(initial, m.Name+"="+peer.String())
	}
	for _, m := range c.Members {
		m.cfg = memberConfig(m, strings.Join(initial, ","), token)
	}
	if err := c.Restart(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func memberConfig(m *Member, initialCluster, token string) *embed.Config {
	cfg := embed.NewConfig()
	cfg.Name = m.Name
	cfg.Dir = m.Dir
	cfg.ListenClientUrls = []url.URL{m.client}
	cfg.AdvertiseClientUrls = []url.URL{m.client}
	cfg.ListenPeerUrls = []url.URL{m.peer}
	cfg.AdvertisePeerUrls = []url.URL{m.peer}
	cfg.InitialCluster = initialCluster
	cfg.InitialClusterToken = token
	cfg.TickMs = HeartbeatMs
	cfg.ElectionMs = ElectionMs
	cfg.Logger = "zap"
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	return cfg
}

// start starts the member from its config and waits until it serves.
func (m *Member) start() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.etcd != nil {
		return nil
	}
	e, err := embed.StartEtcd(m.cfg)
	if err != nil {
		return fmt.Errorf("etcdembed: start %s: %w", m.Name, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return fmt.Errorf("etcdembed: %s failed: %w", m.Name, err)
	case <-time.After(readyTimeout):
		e.Close()
		return fmt.Errorf("etcdembed: %s not ready after %v", m.Name, readyTimeout)
	}
	m.etcd = e
	return nil
}

// Stop stops the member; its data stays. Stopping a stopped member does
// nothing.
func (m *Member) Stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.etcd != nil {
		m.etcd.Close()
		m.etcd = nil
	}
}

// Restart starts a stopped member again on the same ports and data. The
// member waits for a quorum, so restart a majority at once (Cluster.Restart)
// when a majority is down.
func (m *Member) Restart() error {
	return m.start()
}

// Running reports whether the member is started.
func (m *Member) Running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.etcd != nil
}

// IsLeader reports whether the running member is its cluster's leader.
func (m *Member) IsLeader() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.etcd != nil && m.etcd.Server.Leader() == m.etcd.Server.MemberID()
}

// CommittedIndex is the running member's Raft commit index (0 while
// stopped): one entry per write, lease grant, lease revocation, membership
// change or leader's empty entry. Benchmarks count Raft writes with it.
func (m *Member) CommittedIndex() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.etcd == nil {
		return 0
	}
	return m.etcd.Server.CommittedIndex()
}

// Endpoint is the member's client URL.
func (m *Member) Endpoint() string { return m.client.String() }

// Endpoints are the client URLs of every member, running or not.
func (c *Cluster) Endpoints() []string {
	var eps []string
	for _, m := range c.Members {
		eps = append(eps, m.Endpoint())
	}
	return eps
}

// Leader returns the running member that is leader, or nil if none is (an
// election in progress).
func (c *Cluster) Leader() *Member {
	for _, m := range c.Members {
		if m.IsLeader() {
			return m
		}
	}
	return nil
}

// WaitLeader waits until some running member is leader, or ctx ends.
func (c *Cluster) WaitLeader(ctx context.Context) (*Member, error) {
	for {
		if l := c.Leader(); l != nil {
			return l, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("etcdembed: no leader: %w", ctx.Err())
		case <-time.After(HeartbeatMs * time.Millisecond):
		}
	}
}

// Restart starts every stopped member, together (members of a new cluster,
// or of one that lost its quorum, wait for each other), and waits until all
// serve.
func (c *Cluster) Restart() error {
	errs := make([]error, len(c.Members))
	var wg sync.WaitGroup
	for i, m := range c.Members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = m.start()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Close stops every member.
func (c *Cluster) Close() {
	for _, m := range c.Members {
		m.Stop()
	}
}

// Client returns a client of the given endpoints with logging off.
func Client(endpoints ...string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
}

// freeURLs picks two free loopback ports.
func freeURLs() (client, peer url.URL, err error) {
	var ports [2]int
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return url.URL{}, url.URL{}, err
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		defer l.Close()
	}
	return url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[0])},
		url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[1])}, nil
}

func isAddrInUse(err error) bool {
	return err != nil && strings.Contains(err.Error(), "address already in use")
}
