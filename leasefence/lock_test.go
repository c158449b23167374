package leasefence_test

import (
	"context"
	"errors"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence"
)

// Release runs HoldOptions.OnRelease once, after the lease is released,
// and joins its error; a second Release does not run it again.
func TestSessionOnRelease(t *testing.T) {
	f := newSessionFixture(t)
	errClose := errors.New("closing failed")
	calls := 0
	s := f.hold(t, leasefence.HoldOptions{OnRelease: func() error {
		calls++
		if got := f.svc.releases.Load(); got != 1 {
			t.Errorf("OnRelease ran with %d releases sent, want it after the release", got)
		}
		return errClose
	}})
	out, err := s.Release(context.Background())
	if !errors.Is(err, errClose) || !out.OK {
		t.Fatalf("Release = %+v, %v; want released and an error matching %v", out, err, errClose)
	}
	if _, err := s.Release(context.Background()); errors.Is(err, errClose) {
		t.Errorf("the second Release ran OnRelease again: %v", err)
	}
	if calls != 1 {
		t.Errorf("OnRelease ran %d times, want 1", calls)
	}
}

func TestDefaultHolder(t *testing.T) {
	a, b := leasefence.DefaultHolder(), leasefence.DefaultHolder()
	if a == b {
		t.Errorf("two calls gave the same holder %q", a)
	}
	re := regexp.MustCompile(`^.+-` + strconv.Itoa(os.Getpid()) + `-[0-9a-f]{8}$`)
	if !re.MatchString(a) {
		t.Errorf("DefaultHolder() = %q, want <host>-<pid>-<8 hex>", a)
	}
}

func TestNewLockClient(t *testing.T) {
	c, err := leasefence.NewLockClient("", 10*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	if c.Holder() == "" {
		t.Error("no default holder")
	}
	named, err := leasefence.NewLockClient("worker-7", 10*time.Second, 0)
	if err != nil || named.Holder() != "worker-7" {
		t.Fatalf("NewLockClient(worker-7) = %v, %v", named, err)
	}
	if _, err := leasefence.NewLockClient("w", 10*time.Second, -time.Second); !errors.Is(err, leasefence.ErrInvalidRequest) {
		t.Errorf("negative skew: %v, want ErrInvalidRequest", err)
	}
	if got := leasefence.DefaultLockSkew(10 * time.Second); got != time.Second {
		t.Errorf("DefaultLockSkew(10s) = %v, want 1s", got)
	}
}

// The default skew is reserved from the lease: a 10 s grant gives the
// holder 9 s from its send.
func TestNewLockClientReservesTheDefaultSkew(t *testing.T) {
	m := newManualTime()
	coord := newCoordinator(t, m.coord, 10*time.Second)
	c, err := leasefence.NewLockClient("w", 10*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	s, err := leasefence.Hold(t.Context(), leasefence.Local(coord), c, "r", leasefence.HoldOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release(context.Background())
	left, err := s.Remaining()
	if err != nil || left > 9*time.Second || left < 8*time.Second {
		t.Errorf("Remaining() = %v, %v; want just under 9s (10s less a 1s skew)", left, err)
	}
}
