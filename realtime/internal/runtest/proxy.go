package runtest

import (
	"io"
	"net"
	"sync"
	"testing"
)

// TCPProxy relays connections to a server until Cut, and then relays
// nothing: every connection closed, every new one refused. It is a
// server's network gone, as its clients see it.
type TCPProxy struct {
	Addr string // host:port to dial in place of the server's
	l    net.Listener

	mu    sync.Mutex
	conns []net.Conn
}

// Proxy relays to the server at target (host:port) until Cut, or the
// test's end.
func Proxy(t *testing.T, target string) *TCPProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &TCPProxy{Addr: l.Addr().String(), l: l}
	t.Cleanup(p.Cut)
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			go io.Copy(in, out)
			go io.Copy(out, in)
		}
	}()
	return p
}

// Cut closes every connection relayed and refuses new ones.
func (p *TCPProxy) Cut() {
	p.l.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}
