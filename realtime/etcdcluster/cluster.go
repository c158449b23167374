// Package etcdcluster runs an etcd cluster whose members are separate
// processes on loopback, with the network between them in the run's
// hands, so that faults between a coordinator's own replicas can be
// played for real on one machine.
//
// Each member is the running binary re-executed as a hidden subcommand
// (MemberCommand) that runs one embedded etcd member (etcdembed): nothing
// else is installed. Each member's peer port and client port are reached
// only through TCP proxies the parent owns on loopback: the member
// advertises the proxies' addresses, so every byte between members, and
// between clients and members, passes through the parent. A peer
// connection's sender is known by the X-Server-From header of its first
// request (etcd's peers name themselves in it).
//
// The faults:
//   - Partition(i) closes every connection between member i and the other
//     members, and between member i and the clients, and refuses new ones
//     until Heal(i): the member is alone, and the clients move to the
//     others. A peer connection that did not name its sender counts as
//     another member's.
//   - Delay(i, d) holds back every byte to and from member i by d instead.
//   - Pause(i) stops member i's process (SIGSTOP) until Resume(i): its
//     connections stay open and nothing on them is answered, as in a long
//     GC pause or a frozen VM.
//
// Close ends every member process (SIGKILL), every proxy and port, and
// removes the cluster's directory; a member process also ends when its
// parent does (its standard input closes; on Linux, the parent's death
// signals it too).
package etcdcluster

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasefence/lab/internal/scratch"
	"github.com/leasefence/lab/leasefence/etcdlease/etcdembed"
)

// startTimeout bounds a member process's start, until it serves.
const startTimeout = 30 * time.Second

// Options configures a cluster.
type Options struct {
	Members int
	// Dir is where the cluster's temporary directory is made ("" for the
	// system's).
	Dir string
	// Executable is the binary to re-execute (default: this one). It must
	// call ServeMemberIfAsked.
	Executable string
}

// Cluster is a running cluster of member processes behind proxies. Its
// methods are safe for concurrent use.
type Cluster struct {
	dir, exe, token string
	members         []*member

	mu          sync.Mutex
	ids         map[string]int // etcd member id -> index
	partitioned map[int]bool
	delayed     map[int]time.Duration
	closed      bool
}

// member is one member: its proxies, and its process while it runs.
type member struct {
	name, dir    string
	peer, client *proxy

	mu     sync.Mutex
	cmd    *exec.Cmd
	stdin  interface{ Close() error }
	exited chan struct{} // closed when the process is waited for
	direct string        // its own client address, while it runs
	paused bool
}

// Start starts an n-member cluster and waits until every member serves.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	if o.Members < 1 {
		return nil, fmt.Errorf("etcdcluster: a cluster of %d members", o.Members)
	}
	exe := o.Executable
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("etcdcluster: %w", err)
		}
	}
	dir, err := scratch.MkdirTemp(o.Dir, "leasefence-etcd-members-")
	if err != nil {
		return nil, fmt.Errorf("etcdcluster: %w", err)
	}
	c := &Cluster{dir: dir, exe: exe, token: filepath.Base(dir), ids: make(map[string]int),
		partitioned: make(map[int]bool), delayed: make(map[int]time.Duration)}
	for i := range o.Members {
		m := &member{name: fmt.Sprintf("m%d", i), dir: filepath.Join(dir, fmt.Sprintf("m%d", i))}
		c.members = append(c.members, m)
		if m.peer, err = newProxy(i, true, c); err == nil {
			m.client, err = newProxy(i, false, c)
		}
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("etcdcluster: %w", err)
		}
	}
	if err := c.startAll(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Dir is the cluster's temporary directory.
func (c *Cluster) Dir() string { return c.dir }

// Size is the number of members.
func (c *Cluster) Size() int { return len(c.members) }

// Endpoints are the client URLs of every member: its client proxy.
func (c *Cluster) Endpoints() []string {
	eps := make([]string, len(c.members))
	for i, m := range c.members {
		eps[i] = "http://" + m.client.addr()
	}
	return eps
}

// Pids are the member processes running now, by member (0 for none).
func (c *Cluster) Pids() []int {
	pids := make([]int, len(c.members))
	for i, m := range c.members {
		m.mu.Lock()
		if m.cmd != nil {
			pids[i] = m.cmd.Process.Pid
		}
		m.mu.Unlock()
	}
	return pids
}

// startAll starts every member not running, together (a new cluster's
// members wait for each other), and waits until all serve.
func (c *Cluster) startAll(ctx context.Context) error {
	var initial string
	for i, m := range c.members {
		if i > 0 {
			initial += ","
		}
		initial += m.name + "=http://" + m.peer.addr()
	}
	errs := make([]error, len(c.members))
	var wg sync.WaitGroup
	for i, m := range c.members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.startMember(ctx, i, m, initial)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return c.waitServing(ctx)
}

func (c *Cluster) startMember(ctx context.Context, i int, m *member, initial string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd != nil {
		return nil
	}
	cfg, _ := json.Marshal(etcdembed.MemberConfig{Name: m.name, Dir: m.dir,
		ListenClient: "127.0.0.1:0", ListenPeer: "127.0.0.1:0",
		AdvertiseClient: "http://" + m.client.addr(), AdvertisePeer: "http://" + m.peer.addr(),
		InitialCluster: initial, Token: c.token})
	cmd := exec.Command(c.exe, MemberCommand, string(cfg))
	cmd.SysProcAttr = memberProcAttr()
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("etcdcluster: start %s: %w", m.name, err)
	}
	m.cmd, m.stdin, m.exited = cmd, stdin, make(chan struct{})
	go func(exited chan struct{}) {
		cmd.Wait()
		close(exited)
	}(m.exited)
	line := make(chan started, 1)
	go func() {
		var s started
		sc := bufio.NewScanner(stdout)
		if !sc.Scan() || json.Unmarshal(sc.Bytes(), &s) != nil {
			s.Err = "exited before it started"
		}
		line <- s
		for sc.Scan() {
		}
	}()
	var s started
	select {
	case s = <-line:
	case <-time.After(startTimeout):
		s.Err = "did not start in time"
	case <-ctx.Done():
		s.Err = ctx.Err().Error()
	}
	if s.Err != "" {
		m.killLocked()
		return fmt.Errorf("etcdcluster: member %s: %s", m.name, s.Err)
	}
	m.direct = s.Client
	m.peer.setUpstream(s.Peer)
	m.client.setUpstream(s.Client)
	c.mu.Lock()
	c.ids[s.ID] = i
	c.mu.Unlock()
	return nil
}

// waitServing waits until the cluster answers through its proxies.
func (c *Cluster) waitServing(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	cli, err := c.directClient()
	if err != nil {
		return err
	}
	defer cli.Close()
	for {
		_, err := cli.Get(ctx, "etcdcluster-ready")
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("etcdcluster: the cluster does not serve: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// directClient is a client of the members' own addresses, past the
// proxies, for the parent's questions (is it up, who leads).
func (c *Cluster) directClient() (*clientv3.Client, error) {
	var eps []string
	for _, m := range c.members {
		m.mu.Lock()
		if m.direct != "" {
			eps = append(eps, "http://"+m.direct)
		}
		m.mu.Unlock()
	}
	return clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
}

// killLocked ends the member's process and waits for it.
func (m *member) killLocked() {
	if m.cmd == nil {
		return
	}
	m.cmd.Process.Kill()
	m.stdin.Close()
	<-m.exited
	m.cmd, m.direct, m.paused = nil, "", false
	m.peer.setUpstream("")
	m.client.setUpstream("")
}

// Restart ends every member process and starts them again on their data:
// the cluster resumes where it was, behind the same proxies.
func (c *Cluster) Restart(ctx context.Context) error {
	for _, m := range c.members {
		m.mu.Lock()
		m.killLocked()
		m.mu.Unlock()
	}
	return c.startAll(ctx)
}

// Close ends every member process, proxy and port, and removes the
// cluster's directory. It is safe to call more than once.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	var errs []error
	for _, m := range c.members {
		m.mu.Lock()
		m.killLocked()
		m.mu.Unlock()
		for _, p := range []*proxy{m.peer, m.client} {
			if p != nil {
				errs = append(errs, p.close())
			}
		}
	}
	return errors.Join(append(errs, os.RemoveAll(c.dir))...)
}

// Exited reports whether member i's process has ended on its own (it
// crashed, or was killed from outside).
func (c *Cluster) Exited(i int) bool {
	m := c.members[i]
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return false
	}
	select {
	case <-m.exited:
		return true
	default:
		return false
	}
}
