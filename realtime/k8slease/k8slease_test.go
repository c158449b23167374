package k8slease_test

import (
	"context"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence/etcdlease/etcdembed"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/realtime/internal/runtest"
	"github.com/leasefence/lab/realtime/k8slease"
	"github.com/leasefence/lab/registry"
)

// acquire is one Acquire that waits at most wait for the lease.
func acquire(t *testing.T, l realtime.Lock, holder string, wait time.Duration) (realtime.Lease, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	return l.Acquire(ctx, "res-1", holder, time.Second)
}

func closeLock(t *testing.T, l *k8slease.Lock) {
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	})
}

func TestElector(t *testing.T) {
	ctx := t.Context()
	c, err := k8slease.Open(ctx, t.TempDir(), true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	if c.Info.Name != registry.K8sLeaderElectionFenced || !c.Info.Fence || c.Info.Generations != realtime.GenerationsFence {
		t.Errorf("contender %+v", c.Info)
	}
	l, err := c.New(ctx, c.Info.Name)
	if err != nil {
		t.Fatal(err)
	}
	a, err := acquire(t, l, "agent-1", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	fa, ok := a.Fence()
	if !ok || fa == 0 || a.(realtime.Ordered).Generation() != fa {
		t.Fatalf("fence %d %v, generation %d: want the acquiring revision twice", fa, ok, a.(realtime.Ordered).Generation())
	}
	if _, err := acquire(t, l, "agent-2", 300*time.Millisecond); !errors.Is(err, realtime.ErrHeld) {
		t.Fatalf("a second holder's Acquire of a led Lease: %v, want ErrHeld", err)
	}
	// The elector renews by itself: past the lease duration, it leads
	// still, its deadline moved on, its fence the same.
	time.Sleep(1500 * time.Millisecond)
	if err := a.Renew(ctx); err != nil {
		t.Fatalf("Renew of a led Lease: %v", err)
	}
	if left := time.Until(a.Deadline()); left <= 0 || left > time.Second {
		t.Errorf("deadline %v from now: want within the lease duration", left)
	}
	if f, _ := a.Fence(); f != fa {
		t.Errorf("the fence moved from %d to %d with the renewals", fa, f)
	}
	// client-go releases on cancel only if its last observed record says
	// it leads (tryRelease reads IsLeader()), and a renewal cut by the
	// cancel can leave that record stale: then it skips the release,
	// which the lock reports as ErrNotHeld, and the Lease ends at its
	// expiry instead. Anything else is an error of the lock's.
	if err := a.Release(ctx); errors.Is(err, realtime.ErrNotHeld) {
		t.Logf("client-go skipped the release (a renewal raced the cancel): %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx); !errors.Is(err, realtime.ErrNotHeld) {
		t.Errorf("a second Release: %v, want ErrNotHeld", err)
	}
	if err := a.Renew(ctx); !errors.Is(err, realtime.ErrNotHeld) {
		t.Errorf("Renew of a released Lease: %v, want ErrNotHeld", err)
	}
	// agent-2's elector stood on: it takes the released Lease.
	b, err := acquire(t, l, "agent-2", 5*time.Second)
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	if fb, _ := b.Fence(); fb <= fa {
		t.Errorf("fences %d then %d: the acquiring revisions must grow", fa, fb)
	}
	if _, err := l.Acquire(ctx, "res-1", "agent-3", 1500*time.Millisecond); !errors.Is(err, k8slease.ErrWholeSeconds) {
		t.Errorf("a ttl of 1.5s: %v, want ErrWholeSeconds", err)
	}
}

// A leader cut off from etcd stops leading when it fails to renew within
// the RenewDeadline, and another elector takes the Lease only once the
// leader's last record expired: the lease's deadline never outlives the
// takeover, so the lab charges the elector with no mutual-exclusion
// violation.
func TestLeaderCutOff(t *testing.T) {
	ctx := t.Context()
	cli := etcd(t)
	p := runtest.Proxy(t, strings.TrimPrefix(cli.Endpoints()[0], "http://"))
	cutCli, err := etcdembed.Client("http://" + p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cutCli.Close() })
	cut := &k8slease.Lock{Client: cutCli, Namespace: "ns"}
	closeLock(t, cut)
	direct := &k8slease.Lock{Client: cli, Namespace: "ns"}
	closeLock(t, direct)
	a, err := acquire(t, cut, "agent-1", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	deadline := a.Deadline()
	p.Cut()
	b, err := acquire(t, direct, "agent-2", 5*time.Second)
	granted := time.Now()
	if err != nil {
		t.Fatalf("the Lease of a leader cut off was not taken over: %v", err)
	}
	if !granted.After(deadline) {
		t.Errorf("taken over %v before the leader's deadline", deadline.Sub(granted))
	}
	if err := a.Renew(ctx); !errors.Is(err, realtime.ErrNotHeld) {
		t.Errorf("Renew of a lost Lease: %v, want ErrNotHeld", err)
	}
	if !a.Deadline().Before(granted) {
		t.Errorf("the lost lease's deadline %v is after the takeover", a.Deadline().Sub(granted))
	}
	if b.(realtime.Ordered).Generation() <= a.(realtime.Ordered).Generation() {
		t.Errorf("generations %d then %d: the acquiring revisions must grow", a.(realtime.Ordered).Generation(), b.(realtime.Ordered).Generation())
	}
	if err := b.Release(ctx); err != nil {
		t.Errorf("Release of the live lease: %v", err)
	}
}

// The contenders' version is the client-go this module pins, and their
// opener and attacher are linked with this package.
func TestRegistered(t *testing.T) {
	for _, name := range []string{registry.K8sLeaderElection, registry.K8sLeaderElectionFenced} {
		_, open := registry.Opener[realtime.ContenderOpener](registry.Contenders, name)
		_, attach := registry.Opener[realtime.ContenderAttacher](registry.Contenders, name)
		if !open || !attach {
			t.Errorf("%s: opener %v, attacher %v linked", name, open, attach)
		}
	}
	mod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	pinned := regexp.MustCompile(`(?m)^\s*k8s\.io/client-go (\S+)$`).FindSubmatch(mod)
	if pinned == nil {
		t.Fatal("go.mod requires no k8s.io/client-go")
	}
	for _, name := range []string{registry.K8sLeaderElection, registry.K8sLeaderElectionFenced} {
		if got := registry.Must(registry.Contenders, name).Version; got != string(pinned[1]) {
			t.Errorf("%s: version %q, and go.mod pins client-go %s", name, got, pinned[1])
		}
	}
}
