package etcdcluster

import (
	"bufio"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// fakeLinks cuts or delays the traffic of the senders it is told to.
type fakeLinks struct {
	mu   sync.Mutex
	cuts map[int]bool
	lag  time.Duration
}

func (f *fakeLinks) cut(from, _ int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cuts[from]
}

func (f *fakeLinks) delay(int, int) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lag
}

func (f *fakeLinks) sender(id string) int {
	if id == "a1" {
		return 1
	}
	return fromUnknown
}

// echo is an upstream that writes back every line it reads.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

func startProxy(t *testing.T, peer bool, l links) *proxy {
	t.Helper()
	p, err := newProxy(0, peer, l)
	if err != nil {
		t.Fatal(err)
	}
	p.setUpstream(echo(t))
	t.Cleanup(func() { p.close() })
	return p
}

// roundTrip sends a line through the proxy and reads it back.
func roundTrip(c net.Conn, r *bufio.Reader, line string) (string, error) {
	c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.WriteString(c, line); err != nil {
		return "", err
	}
	return r.ReadString('\n')
}

func TestProxyDelaysBothWays(t *testing.T) {
	l := &fakeLinks{lag: 150 * time.Millisecond}
	p := startProxy(t, false, l)
	c, err := net.Dial("tcp", p.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	got, err := roundTrip(c, bufio.NewReader(c), "hello\n")
	if err != nil || got != "hello\n" {
		t.Fatalf("round trip: %q, %v", got, err)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("a round trip took %v, want at least twice the 150ms delay", d)
	}
}

// A peer connection is known by its first request's X-Server-From: a cut
// sender's connections are closed, at once and when it connects again,
// and another's pass.
func TestProxyCutsASender(t *testing.T) {
	l := &fakeLinks{cuts: map[int]bool{}}
	p := startProxy(t, true, l)
	req := "GET /raft/stream HTTP/1.1\r\nHost: x\r\nX-Server-From: a1\r\n\r\n"
	c, err := net.Dial("tcp", p.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if got, err := roundTrip(c, r, req); err != nil || got != "GET /raft/stream HTTP/1.1\r\n" {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}
	l.mu.Lock()
	l.cuts[1] = true
	l.mu.Unlock()
	p.cutNow()
	// What was echoed before the cut is read; then the connection ends,
	// well before the deadline.
	if _, err := io.Copy(io.Discard, r); err != nil {
		t.Errorf("the cut sender's connection did not end: %v", err)
	}
	for _, tc := range []struct {
		req  string
		pass bool
	}{{req, false}, {"GET / HTTP/1.1\r\nHost: x\r\n\r\n", true}} {
		c, err := net.Dial("tcp", p.addr())
		if err != nil {
			t.Fatal(err)
		}
		got, err := roundTrip(c, bufio.NewReader(c), tc.req)
		c.Close()
		if (err == nil) != tc.pass {
			t.Errorf("%q: read %q, %v; want pass %v", tc.req, got, err, tc.pass)
		}
	}
}

// A partition cuts the partitioned member's traffic both ways, and every
// peer connection that did not say who sent it, which could be its.
func TestPartitionCutsUnnamedSenders(t *testing.T) {
	c := &Cluster{partitioned: map[int]bool{2: true}}
	for _, tc := range []struct {
		from, to int
		cut      bool
	}{
		{2, 0, true}, {0, 2, true}, {fromClient, 2, true},
		{fromUnknown, 0, true}, {fromUnknown, 2, true},
		{0, 1, false}, {fromClient, 0, false}, {2, 2, false},
	} {
		if got := c.cut(tc.from, tc.to); got != tc.cut {
			t.Errorf("cut(%d, %d) = %v, want %v", tc.from, tc.to, got, tc.cut)
		}
	}
	healed := &Cluster{partitioned: map[int]bool{}}
	if healed.cut(fromUnknown, 0) {
		t.Error("an unnamed sender is cut with no member partitioned")
	}
}
