package etcdmutex_test

import (
	"errors"
	"testing"
	"time"

	"github.com/leasefence/lab/labtest"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/realtime/etcdmutex"
	"github.com/leasefence/lab/registry"
)

func open(t *testing.T, fenced bool) realtime.Lock {
	t.Helper()
	c, err := etcdmutex.Open(t.Context(), t.TempDir(), fenced)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	l, err := c.New(t.Context(), c.Info.Name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestMutexAgainstEmbeddedEtcd(t *testing.T) {
	ctx := t.Context()
	l := open(t, true)
	a, err := l.Acquire(ctx, "r", "agent-1", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire(ctx, "r", "agent-2", time.Second); !errors.Is(err, realtime.ErrHeld) {
		t.Fatalf("a second Acquire of a held lock: %v, want ErrHeld", err)
	}
	fa, ok := a.Fence()
	if !ok || fa == 0 || a.(realtime.Ordered).Generation() != fa {
		t.Fatalf("fence %d %v, generation %d: want the create revision twice", fa, ok, a.(realtime.Ordered).Generation())
	}
	if left := time.Until(a.Deadline()); left <= 0 || left > time.Second {
		t.Errorf("deadline %v from now: want within the TTL", left)
	}
	if err := a.Renew(ctx); err != nil {
		t.Fatalf("Renew of a live lease: %v", err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := l.Acquire(ctx, "r", "agent-2", time.Second)
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	if fb, _ := b.Fence(); fb <= fa {
		t.Errorf("fences %d then %d: the create revisions must grow", fa, fb)
	}
	// Unrenewed, the orphaned session's lease expires, and the lock with it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := l.Acquire(ctx, "r", "agent-3", time.Second)
		if err == nil {
			if err := b.Renew(ctx); err == nil {
				t.Error("Renew of an expired lease succeeded")
			}
			c.Release(ctx)
			break
		}
		if !errors.Is(err, realtime.ErrHeld) || time.Now().After(deadline) {
			t.Fatalf("the unrenewed lock was not taken over: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := l.Acquire(ctx, "r", "agent-1", 1500*time.Millisecond); !errors.Is(err, etcdmutex.ErrWholeSeconds) {
		t.Errorf("a ttl of 1.5s: %v, want ErrWholeSeconds", err)
	}
}

// The published finding, with etcd's own Mutex: a holder stalled past its
// lease's TTL still writes after etcd gave the lock to another (stale
// writes, naive, which fail the run only when asked, as here); writing
// through the gate with the create revision as the fence lands none.
func TestMutexUnderStalls(t *testing.T) {
	for _, tc := range []struct {
		fenced bool
		opts   []labtest.Option
	}{
		{false, []labtest.Option{labtest.Naive(), labtest.RequireNoStaleWrites()}},
		{true, []labtest.Option{labtest.Fenced()}},
	} {
		t.Run(map[bool]string{false: registry.EtcdMutex, true: registry.EtcdMutexFenced}[tc.fenced], func(t *testing.T) {
			t.Parallel()
			rec := &recorder{TB: t}
			name := map[bool]string{false: registry.EtcdMutex, true: registry.EtcdMutexFenced}[tc.fenced]
			opts := append(tc.opts, labtest.Name(name), labtest.HistoryDir(t.TempDir()))
			res := labtest.Run(rec, "testdata/paused-holder.yaml", open(t, tc.fenced), opts...)
			t.Logf("%s: %d acquisitions, %d landed, %d stale writes, %d refused, %d mutual-exclusion violations",
				res.Mode, res.Acquisitions, res.CommitsAdmitted, res.StaleWritesLanded, res.CommitsRefused, res.MutualExclusionViolations)
			if res.Contender.Generations != map[bool]string{false: "server", true: "fence"}[tc.fenced] {
				t.Errorf("generations %q", res.Contender.Generations)
			}
			if res.MutualExclusionViolations != 0 {
				t.Errorf("etcd's Mutex granted a lock twice: %+v", res.MutualExclusion)
			}
			if tc.fenced {
				if res.StaleWritesLanded != 0 || res.CommitsRefused != 1 || rec.failed {
					t.Errorf("fenced: %d stale writes, %d refused: want none landed and some refused", res.StaleWritesLanded, res.CommitsRefused)
				}
			} else if res.StaleWritesLanded != 1 || !rec.failed {
				t.Errorf("naive: no stale write landed under stalls past the TTL")
			}
		})
	}
}

type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Errorf(string, ...any) { r.failed = true }
