package redisdeploy

import (
	"errors"
	"net"
	"testing"
)

// A server whose port another process took before it bound it says so
// (errPortTaken), and a start that meets it is tried again on new ports,
// at most startAttempts times; any other failure is not retried.
func TestTakenPortIsTriedAgain(t *testing.T) {
	bin, err := lookServer()
	if err != nil {
		t.Skip("redis-server is not installed: scripts/redis.sh install installs it")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	s, err := newServer(t.TempDir(), "redis", port, bin, nil, serverConf(port, NoPersistence))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Kill()
	if err := s.start(t.Context()); !errors.Is(err, errPortTaken) {
		t.Fatalf("start on a port a listener took = %v, want errPortTaken", err)
	}

	// Taken by another Redis, which answers PING as this one would.
	other, err := StartServer(t.Context(), ServerOptions{Dir: t.TempDir(), Persistence: NoPersistence})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	port = other.Port
	s, err = newServer(t.TempDir(), "redis", port, bin, nil, serverConf(port, NoPersistence))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Kill()
	if err := s.start(t.Context()); !errors.Is(err, errPortTaken) {
		t.Fatalf("start on a port another Redis took = %v, want errPortTaken", err)
	}

	for _, tc := range []struct {
		name  string
		fails []error
		calls int
		want  error
	}{
		{"taken, then free", []error{errPortTaken, errPortTaken, nil}, 3, nil},
		{"always taken", []error{errPortTaken, errPortTaken, errPortTaken, nil}, startAttempts, errPortTaken},
		{"another failure", []error{ErrNotInstalled, nil}, 1, ErrNotInstalled},
	} {
		calls := 0
		err := retryTakenPort(func() error { calls++; return tc.fails[calls-1] })
		if calls != tc.calls || !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("%s: %d calls, %v; want %d calls, %v", tc.name, calls, err, tc.calls, tc.want)
		}
	}
}
