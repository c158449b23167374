package etcdcluster

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// Who sends on a proxied connection, besides a member's index.
const (
	fromClient  = -1 // a client of the cluster (the run's coordinators and gates)
	fromUnknown = -2 // a member whose request did not say which it is
)

// upstreamWait bounds how long a connection waits for the member behind
// its proxy to come up (a member restarting).
const upstreamWait = 5 * time.Second

// links is what the proxies ask of the cluster's faults: whether traffic
// from one party to a member is cut, and by how much it is delayed.
type links interface {
	cut(from, to int) bool
	delay(from, to int) time.Duration
	sender(id string) int // the member with etcd id id, or fromUnknown
}

// proxy listens on a loopback port of the parent in front of one of a
// member's ports (peer or client) and copies every connection to it,
// unless the links say that connection is cut.
type proxy struct {
	ln     net.Listener
	member int
	peer   bool // a peer port: senders are members, named by their requests
	links  links

	mu       sync.Mutex
	upstream string        // the member's own address, "" while it is down
	up       chan struct{} // closed when upstream is set
	conns    map[*proxied]struct{}
	closed   bool
	wg       sync.WaitGroup
}

// proxied is one connection through a proxy, from a sender (its from is
// guarded by the proxy's mu).
type proxied struct {
	from int
	down net.Conn

	mu     sync.Mutex
	upst   net.Conn
	closed bool
}

// attach gives the connection its upstream half, unless it was closed.
func (c *proxied) attach(upst net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		upst.Close()
		return false
	}
	c.upst = upst
	return true
}

func (c *proxied) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	c.down.Close()
	if c.upst != nil {
		c.upst.Close()
	}
}

func newProxy(member int, peer bool, l links) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, member: member, peer: peer, links: l, up: make(chan struct{}), conns: make(map[*proxied]struct{})}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// addr is the proxy's own address, which the member advertises.
func (p *proxy) addr() string { return p.ln.Addr().String() }

// setUpstream points the proxy at the member's address ("" while down).
func (p *proxy) setUpstream(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.upstream = addr
	if addr == "" {
		p.up = make(chan struct{})
		return
	}
	select {
	case <-p.up:
	default:
		close(p.up)
	}
}

func (p *proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.handle(c)
		}()
	}
}

func (p *proxy) handle(down net.Conn) {
	c := &proxied{from: fromClient, down: down}
	if !p.track(c) {
		down.Close()
		return
	}
	defer p.untrack(c)
	defer c.close()
	var head []byte
	if p.peer {
		from, h := p.identify(down)
		p.mu.Lock()
		c.from, head = from, h
		p.mu.Unlock()
	}
	if p.links.cut(c.from, p.member) {
		return
	}
	upstream, ok := p.waitUpstream()
	if !ok {
		return
	}
	upst, err := net.DialTimeout("tcp", upstream, upstreamWait)
	if err != nil || !c.attach(upst) {
		return
	}
	if len(head) > 0 {
		if _, err := upst.Write(head); err != nil {
			return
		}
	}
	done := make(chan struct{}, 2)
	go func() { p.pipe(upst, down, c.from, p.member); done <- struct{}{} }()
	go func() { p.pipe(down, upst, p.member, c.from); done <- struct{}{} }()
	<-done
	c.close()
	<-done
}

// identify reads the first request on a peer connection: etcd's peers
// name themselves in X-Server-From. It returns the sender and the bytes
// read, which go on to the member first.
func (p *proxy) identify(down net.Conn) (int, []byte) {
	var head bytes.Buffer
	down.SetReadDeadline(time.Now().Add(upstreamWait))
	defer down.SetReadDeadline(time.Time{})
	req, err := http.ReadRequest(bufio.NewReader(io.TeeReader(down, &head)))
	if err != nil {
		return fromUnknown, head.Bytes()
	}
	return p.links.sender(req.Header.Get("X-Server-From")), head.Bytes()
}

func (p *proxy) waitUpstream() (string, bool) {
	p.mu.Lock()
	up := p.up
	p.mu.Unlock()
	select {
	case <-up:
	case <-time.After(upstreamWait):
		return "", false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.upstream, p.upstream != "" && !p.closed
}

func (p *proxy) track(c *proxied) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *proxy) untrack(c *proxied) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
}

// chunk is bytes read at an instant, to be written a delay after it.
type chunk struct {
	b  []byte
	at time.Time
}

// pipe copies src to dst, each chunk held back by the links' delay from
// from to to at the time it was read.
func (p *proxy) pipe(dst, src net.Conn, from, to int) {
	q := make(chan chunk, 64)
	go func() {
		defer close(q)
		for {
			b := make([]byte, 32<<10)
			n, err := src.Read(b)
			if n > 0 {
				q <- chunk{b[:n], time.Now()}
			}
			if err != nil {
				return
			}
		}
	}()
	for ch := range q {
		if d := p.links.delay(from, to); d > 0 {
			time.Sleep(time.Until(ch.at.Add(d)))
		}
		if _, err := dst.Write(ch.b); err != nil {
			src.Close()
			for range q {
			}
			return
		}
	}
	// src is done: let dst see the end of its half.
	if tc, ok := dst.(*net.TCPConn); ok {
		tc.CloseWrite()
	} else {
		dst.Close()
	}
}

// cutNow closes every connection the links now cut.
func (p *proxy) cutNow() {
	p.mu.Lock()
	var cut []*proxied
	for c := range p.conns {
		if p.links.cut(c.from, p.member) {
			cut = append(cut, c)
		}
	}
	p.mu.Unlock()
	for _, c := range cut {
		c.close()
	}
}

// close stops the proxy: its port and every connection through it.
func (p *proxy) close() error {
	p.mu.Lock()
	p.closed = true
	conns := make([]*proxied, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	select {
	case <-p.up:
	default:
		close(p.up) // waiting connections see the proxy closed
	}
	p.mu.Unlock()
	err := p.ln.Close()
	for _, c := range conns {
		c.close()
	}
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
