// Package redisdeploy runs Redis on loopback for tests and the lab: a lone
// server (StartServer), or Redis as teams deploy it (Start): a primary,
// replicas that copy it asynchronously, and Sentinels that watch the primary
// and, when a quorum of them finds it down, promote a replica in its place.
// Each is a process of Debian's redis-server (Sentinels run
// redis-sentinel, or redis-server --sentinel where that is absent), on a
// free loopback port, with its configuration file and data under a
// directory of the deployment's own; nothing listens anywhere else.
//
// It is a runtime package, with no dependency on package testing, so that
// tests and the lab's runs start the same deployment; tests wrap it in
// t.Cleanup. The faults a test or a run plays on it are a server's:
//
//   - Pause (SIGSTOP) until Resume: the process holds its connections and
//     answers nothing, as in a frozen VM; past the Sentinels' down-after
//     time they fail over to a replica, and the paused server, once
//     resumed, is turned into a replica of the new primary.
//   - Kill (SIGKILL), as a power cut, and Restart on the same port and
//     configuration: the Sentinels rewrite a server's configuration file
//     when they change its role, so a restarted old primary comes back as
//     a replica of whichever server they promoted.
//   - Stop (SIGTERM: Redis fsyncs its append-only file and exits), and
//     RestartEmpty: back on no data, as a server that kept nothing on disk.
//
// By default every server writes each change to its append-only file with
// appendfsync always (Persistence AOFAlways: the setting under which a
// single Redis keeps its fence counter across a restart), so what a
// failover loses is what replication lost, not what a disk lost.
//
// Close ends every process (SIGKILL; a paused one too) and removes the
// directory. On Linux a server also dies with the process that started it.
package redisdeploy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Errors of this package.
var (
	// ErrNotInstalled: redis-server is not on PATH.
	ErrNotInstalled = errors.New("redisdeploy: redis-server is not on PATH: install Debian's redis-server (apt-get install redis-server redis-sentinel)")
	// ErrNoFailover: the Sentinels did not promote another server in time.
	ErrNoFailover = errors.New("redisdeploy: no failover happened in time")
)

func lookServer() (string, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", ErrNotInstalled
	}
	return bin, nil
}

// DefaultMasterName is Options.MasterName when empty.
const DefaultMasterName = "leasefence"

// Options configures a deployment. The zero value (with Dir) is a primary,
// two replicas and three Sentinels with a quorum of two, which fail over a
// primary that has not answered them for one second.
type Options struct {
	// Dir is where the deployment's directory is made; "" is the system's
	// temporary directory.
	Dir string
	// Replicas of the primary; 0 means 2. At least 1.
	Replicas int
	// Sentinels watching it; 0 means 3.
	Sentinels int
	// Quorum is how many Sentinels must find the primary down; 0 means a
	// majority of Sentinels. A failover also needs a majority to vote.
	Quorum int
	// MasterName is the name the Sentinels monitor the primary under;
	// "" means DefaultMasterName.
	MasterName string
	// DownAfter is the Sentinels' down-after-milliseconds: how long the
	// primary may not answer before a Sentinel finds it down; 0 means 1s.
	// Whole milliseconds.
	DownAfter time.Duration
	// FailoverTimeout is the Sentinels' failover-timeout; 0 means 5s.
	FailoverTimeout time.Duration
	// Persistence of every data server; the zero value is AOFAlways.
	Persistence Persistence
}

func (o *Options) fill() error {
	if o.Replicas == 0 {
		o.Replicas = 2
	}
	if o.Sentinels == 0 {
		o.Sentinels = 3
	}
	if o.Quorum == 0 {
		o.Quorum = o.Sentinels/2 + 1
	}
	if o.MasterName == "" {
		o.MasterName = DefaultMasterName
	}
	if o.DownAfter == 0 {
		o.DownAfter = time.Second
	}
	if o.FailoverTimeout == 0 {
		o.FailoverTimeout = 5 * time.Second
	}
	switch {
	case o.Replicas < 1:
		return fmt.Errorf("redisdeploy: Options.Replicas %d: a failover needs a replica", o.Replicas)
	case o.Sentinels < 1:
		return fmt.Errorf("redisdeploy: Options.Sentinels %d: at least one", o.Sentinels)
	case o.Quorum < 1 || o.Quorum > o.Sentinels:
		return fmt.Errorf("redisdeploy: Options.Quorum %d outside [1, %d Sentinels]", o.Quorum, o.Sentinels)
	case strings.ContainsAny(o.MasterName, " \t\n\"'"):
		return fmt.Errorf("redisdeploy: Options.MasterName %q has a space or a quote", o.MasterName)
	case o.DownAfter < time.Millisecond || o.DownAfter%time.Millisecond != 0:
		return fmt.Errorf("redisdeploy: Options.DownAfter %v: whole milliseconds >= 1ms", o.DownAfter)
	case o.FailoverTimeout < time.Millisecond || o.FailoverTimeout%time.Millisecond != 0:
		return fmt.Errorf("redisdeploy: Options.FailoverTimeout %v: whole milliseconds >= 1ms", o.FailoverTimeout)
	}
	return o.Persistence.check()
}

// Deployment is a running primary, its replicas and its Sentinels. Its
// methods are safe for concurrent use.
type Deployment struct {
	opts      Options
	root      string
	Servers   []*Server // the data servers: Servers[0] started as the primary
	Sentinels []*Server // the Sentinels

	closeOnce sync.Once
}

// Start starts the deployment and waits until every replica copies the
// primary and every Sentinel knows the replicas and the other Sentinels,
// so that a failover can happen from the moment it returns. On an error
// nothing it started is left running.
func Start(ctx context.Context, opts Options) (*Deployment, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	server, err := lookServer()
	if err != nil {
		return nil, err
	}
	sentinel, sentinelArgs := server, []string{"--sentinel"}
	if bin, err := exec.LookPath("redis-sentinel"); err == nil {
		sentinel, sentinelArgs = bin, nil
	}
	var d *Deployment
	err = retryTakenPort(func() error {
		root, err := os.MkdirTemp(opts.Dir, "leasefence-redis-sentinel-")
		if err != nil {
			return fmt.Errorf("redisdeploy: %w", err)
		}
		d = &Deployment{opts: opts, root: root}
		if err := d.start(ctx, server, sentinel, sentinelArgs); err != nil {
			d.Close()
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return d, nil
}

func (d *Deployment) start(ctx context.Context, server, sentinel string, sentinelArgs []string) error {
	ports, err := freePorts(1 + d.opts.Replicas + d.opts.Sentinels)
	if err != nil {
		return err
	}
	primary := ports[0]
	for i := 0; i <= d.opts.Replicas; i++ {
		name := fmt.Sprintf("redis-%d", i)
		conf := serverConf(ports[i], d.opts.Persistence) + clusterUserConf
		if i > 0 {
			conf += fmt.Sprintf("replicaof 127.0.0.1 %d\n", primary)
		}
		s, err := newServer(d.root, name, ports[i], server, nil, conf)
		if err != nil {
			return err
		}
		s.user, s.pass = AppUser, AppPassword
		d.Servers = append(d.Servers, s)
	}
	for _, s := range d.Servers {
		if err := s.start(ctx); err != nil {
			return err
		}
	}
	for i := range d.opts.Sentinels {
		port := ports[1+d.opts.Replicas+i]
		conf := sentinelConf(port, primary, d.opts)
		s, err := newServer(d.root, fmt.Sprintf("sentinel-%d", i), port, sentinel, sentinelArgs, conf)
		if err != nil {
			return err
		}
		d.Sentinels = append(d.Sentinels, s)
		if err := s.start(ctx); err != nil {
			return err
		}
	}
	return d.waitReady(ctx)
}

// serverConf is a data server's configuration file: loopback, persisted
// as p says, never by RDB snapshots. A full resync starts at once
// (repl-diskless-sync-delay 0): by default a primary waits 5s for more
// replicas to join a diskless transfer, and one that arrives during it
// waits for the next, so an old primary coming back as a replica just
// after a failover, while the other replica resyncs, took longer than a
// fault's end allows on a loaded machine.
func serverConf(port int, p Persistence) string {
	return fmt.Sprintf("bind 127.0.0.1\nport %d\nprotected-mode yes\ndaemonize no\nsave \"\"\nrepl-diskless-sync-delay 0\n%s", port, p.conf())
}

// sentinelConf is a Sentinel's configuration file, which the Sentinel
// rewrites as it learns the deployment.
func sentinelConf(port, primary int, o Options) string {
	var b strings.Builder
	fmt.Fprintf(&b, "bind 127.0.0.1\nport %d\nprotected-mode yes\ndaemonize no\n", port)
	b.WriteString("sentinel resolve-hostnames no\n")
	fmt.Fprintf(&b, "sentinel monitor %s 127.0.0.1 %d %d\n", o.MasterName, primary, o.Quorum)
	fmt.Fprintf(&b, "sentinel down-after-milliseconds %s %d\n", o.MasterName, o.DownAfter.Milliseconds())
	fmt.Fprintf(&b, "sentinel failover-timeout %s %d\n", o.MasterName, o.FailoverTimeout.Milliseconds())
	fmt.Fprintf(&b, "sentinel parallel-syncs %s 1\n", o.MasterName)
	fmt.Fprintf(&b, "sentinel auth-user %s %s\nsentinel auth-pass %s %s\n", o.MasterName, clusterUser, o.MasterName, clusterPass)
	return b.String()
}

// readyTimeout bounds Start's wait for the deployment to form.
const readyTimeout = 30 * time.Second

func (d *Deployment) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	return d.WaitSettled(ctx)
}

// WaitSettled waits until the deployment is one again: every Sentinel
// names the same primary, which answers as one, every other data server
// that runs is its replica with its link up, and every Sentinel knows all
// the replicas and all the other Sentinels, and none is in a failover or
// finds the primary down. A failover's end (WaitFailover)
// is not that: a Sentinel may learn of the new primary, or find the old
// one back, seconds later, and a fault struck before then may find no
// Sentinel ready to act on it.
func (d *Deployment) WaitSettled(ctx context.Context) error {
	notYet := "no Sentinel answered"
	err := poll(ctx, func(ctx context.Context) (bool, error) {
		addr, views, err := d.agreedPrimary(ctx)
		if err != nil || addr == "" {
			notYet = "the Sentinels disagree: " + views
			return false, err
		}
		primary := d.Server(addr)
		if primary == nil {
			return false, fmt.Errorf("the Sentinels name %s, none of the deployment's servers", addr)
		}
		if !d.replicasFollow(ctx, primary) {
			notYet = fmt.Sprintf("not every replica follows %s", primary.Name)
			return false, nil
		}
		for _, s := range d.Sentinels {
			m, err := d.sentinelMaster(ctx, s)
			if err != nil {
				return false, err
			}
			if m["flags"] != "master" {
				// A failover's leader still reconfiguring the replicas
				// (failover_in_progress), or a primary found down.
				notYet = fmt.Sprintf("%s flags the primary %s", s.Name, m["flags"])
				return false, nil
			}
			if m["num-slaves"] != strconv.Itoa(d.opts.Replicas) || m["num-other-sentinels"] != strconv.Itoa(d.opts.Sentinels-1) {
				notYet = fmt.Sprintf("%s knows %s replicas and %s other Sentinels", s.Name, m["num-slaves"], m["num-other-sentinels"])
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("redisdeploy: the deployment did not settle; last, %s: %w%s", notYet, err, d.sentinelLogs())
	}
	return nil
}

// sentinelLogs is the end of every Sentinel's log, for an error.
func (d *Deployment) sentinelLogs() string {
	var b strings.Builder
	for _, s := range d.Sentinels {
		b.WriteString(s.logTail())
	}
	return b.String()
}

// poll calls ready every 50ms until it reports true, or ctx ends; the
// error then is ready's last one, or ctx's.
func poll(ctx context.Context, ready func(context.Context) (bool, error)) error {
	var last error
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		ok, err := ready(cctx)
		cancel()
		if ok && err == nil {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
			}
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// MasterName is the name the Sentinels monitor the primary under.
func (d *Deployment) MasterName() string { return d.opts.MasterName }

// DownAfter is the Sentinels' down-after time.
func (d *Deployment) DownAfter() time.Duration { return d.opts.DownAfter }

// Dir is the deployment's directory: each process's configuration file,
// data directory and log.
func (d *Deployment) Dir() string { return d.root }

// SentinelAddrs are the Sentinels' addresses, host:port.
func (d *Deployment) SentinelAddrs() []string {
	addrs := make([]string, len(d.Sentinels))
	for i, s := range d.Sentinels {
		addrs[i] = s.Addr()
	}
	return addrs
}

// FailoverOptions are go-redis options that reach the primary through the
// Sentinels, as an application does: redis.NewFailoverClient(opts). The
// client never resends a command on its own (MaxRetries -1): a script or
// transaction whose reply was lost may have run.
func (d *Deployment) FailoverOptions() *redis.FailoverOptions {
	return &redis.FailoverOptions{
		MasterName:    d.opts.MasterName,
		SentinelAddrs: d.SentinelAddrs(),
		Username:      AppUser,
		Password:      AppPassword,
		MaxRetries:    -1,
		DialTimeout:   time.Second,
	}
}

// Server returns the data server listening on addr, or nil.
func (d *Deployment) Server(addr string) *Server {
	for _, s := range d.Servers {
		if s.Addr() == addr {
			return s
		}
	}
	return nil
}

// PrimaryAddr is the primary's address as the first Sentinel that answers
// gives it.
func (d *Deployment) PrimaryAddr(ctx context.Context) (string, error) {
	var last error
	for _, s := range d.Sentinels {
		addr, err := d.sentinelPrimary(ctx, s)
		if err == nil {
			return addr, nil
		}
		last = err
	}
	return "", fmt.Errorf("redisdeploy: no Sentinel named the primary: %w", last)
}

// Primary is the data server the Sentinels name as the primary.
func (d *Deployment) Primary(ctx context.Context) (*Server, error) {
	addr, err := d.PrimaryAddr(ctx)
	if err != nil {
		return nil, err
	}
	if s := d.Server(addr); s != nil {
		return s, nil
	}
	return nil, fmt.Errorf("redisdeploy: the Sentinels name %s, which is none of the deployment's servers", addr)
}

// Failover asks a Sentinel to fail over now (SENTINEL FAILOVER), without
// waiting for the primary to be found down; WaitFailover waits for it.
func (d *Deployment) Failover(ctx context.Context) error {
	cli := d.Sentinels[0].client()
	defer cli.Close()
	return cli.Do(ctx, "SENTINEL", "FAILOVER", d.opts.MasterName).Err()
}

// WaitFailover waits until every Sentinel that answers names a primary
// other than from, that server answers as a primary, and, of the other
// servers that answer, every one is its replica; it returns the new
// primary. A paused, killed or partitioned server is not waited for. The
// error wraps ErrNoFailover when ctx ends first, and says what the wait
// last saw and what the Sentinels' logs end with.
func (d *Deployment) WaitFailover(ctx context.Context, from string) (*Server, error) {
	var promoted *Server
	notYet := "no Sentinel answered"
	err := poll(ctx, func(ctx context.Context) (bool, error) {
		addr, views, err := d.agreedPrimary(ctx)
		switch {
		case err != nil:
			return false, err
		case addr == "":
			notYet = "the Sentinels disagree: " + views
			return false, nil
		case addr == from:
			notYet = "the Sentinels still name the old primary"
			return false, nil
		}
		if promoted = d.Server(addr); promoted == nil {
			return false, fmt.Errorf("the Sentinels name %s, none of the deployment's servers", addr)
		}
		info, err := promoted.info(ctx, "replication")
		if err != nil || info["role"] != "master" {
			notYet = fmt.Sprintf("the Sentinels name %s, which answers role %q", promoted.Name, info["role"])
			return false, err
		}
		if !d.replicasFollow(ctx, promoted) {
			notYet = fmt.Sprintf("not every replica follows %s yet", promoted.Name)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: the primary was %s; last, %s: %w%s", ErrNoFailover, from, notYet, err, d.sentinelLogs())
	}
	return promoted, nil
}

// agreedPrimary is the primary every answering Sentinel names, or "" while
// they disagree; views says what each names.
func (d *Deployment) agreedPrimary(ctx context.Context) (agreed, views string, err error) {
	var b strings.Builder
	same := true
	for _, s := range d.Sentinels {
		if s.Paused() || !s.Running() {
			continue
		}
		addr, err := d.sentinelPrimary(ctx, s)
		if err != nil {
			return "", "", err
		}
		fmt.Fprintf(&b, "%s names %s; ", s.Name, addr)
		if agreed != "" && addr != agreed {
			same = false
		}
		agreed = addr
	}
	if !same {
		return "", strings.TrimSuffix(b.String(), "; "), nil
	}
	return agreed, "", nil
}

// replicasFollow reports whether every running, unpaused, unpartitioned
// server other than primary is its replica with its link up.
func (d *Deployment) replicasFollow(ctx context.Context, primary *Server) bool {
	want := strconv.Itoa(primary.Port)
	for _, s := range d.Servers {
		if s == primary || s.Paused() || !s.Running() || s.Partitioned() {
			continue
		}
		info, err := s.info(ctx, "replication")
		if err != nil || info["role"] != "slave" || info["master_port"] != want || info["master_link_status"] != "up" {
			return false
		}
	}
	return true
}

func (d *Deployment) sentinelPrimary(ctx context.Context, s *Server) (string, error) {
	cli := s.client()
	defer cli.Close()
	addr, err := cli.Do(ctx, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", d.opts.MasterName).StringSlice()
	if err != nil {
		return "", fmt.Errorf("%s: %w", s.Name, err)
	}
	if len(addr) != 2 {
		return "", fmt.Errorf("%s: SENTINEL GET-MASTER-ADDR-BY-NAME answered %v", s.Name, addr)
	}
	return addr[0] + ":" + addr[1], nil
}

func (d *Deployment) sentinelMaster(ctx context.Context, s *Server) (map[string]string, error) {
	cli := s.client()
	defer cli.Close()
	vals, err := cli.Do(ctx, "SENTINEL", "MASTER", d.opts.MasterName).StringSlice()
	if err != nil {
		return nil, err
	}
	m := make(map[string]string, len(vals)/2)
	for i := 0; i+1 < len(vals); i += 2 {
		m[vals[i]] = vals[i+1]
	}
	return m, nil
}

// Close ends every process and removes the deployment's directory; it
// may be called more than once.
func (d *Deployment) Close() error {
	var err error
	d.closeOnce.Do(func() {
		for _, s := range append(append([]*Server{}, d.Sentinels...), d.Servers...) {
			s.Kill()
		}
		err = removeAll(d.root)
	})
	return err
}

// removeAll removes dir, trying again for a moment while it is not empty:
// a child of a server killed an instant ago (its group is killed with it)
// may finish one last file before it is gone.
func removeAll(dir string) error {
	err := os.RemoveAll(dir)
	for try := 0; err != nil && try < 20; try++ {
		time.Sleep(50 * time.Millisecond)
		err = os.RemoveAll(dir)
	}
	return err
}
