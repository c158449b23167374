package redislocks_test

import (
	"errors"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/labtest"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/registry"
)

func open(t *testing.T, name string) realtime.Lock {
	t.Helper()
	opener, ok := registry.Opener[realtime.ContenderOpener](registry.Contenders, name)
	if !ok {
		t.Fatalf("no opener registered for %s", name)
	}
	c, err := opener(t.Context(), t.TempDir())
	closeAfter(t, c, err)
	// (Info.Version is the linked module's, from the build information,
	// which a test binary does not carry: lab contenders shows it.)
	if c.Info.Fence || c.Info.Library == "" {
		t.Errorf("contender %+v: want a library, and no fence", c.Info)
	}
	l, err := c.New(t.Context(), c.Info.Name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

var names = []string{registry.Redsync, registry.Redislock, registry.Redlock}

func TestAgainstRedisServer(t *testing.T) {
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			l := open(t, name)
			ttl := 300 * time.Millisecond
			if name == registry.Redlock {
				// redsync bounds each server's call by a twentieth of
				// the expiry: 100ms, not 15, on a loaded machine.
				ttl = 2 * time.Second
			}
			a, err := l.Acquire(ctx, "r", "agent-1", ttl)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.Acquire(ctx, "r", "agent-2", ttl); !errors.Is(err, realtime.ErrHeld) {
				t.Fatalf("a second Acquire of a held lock: %v, want ErrHeld", err)
			}
			if _, ok := a.Fence(); ok {
				t.Error("a fence from a lock that has none")
			}
			if left := time.Until(a.Deadline()); left <= 0 || left > ttl {
				t.Errorf("deadline %v from now: want within the TTL", left)
			}
			if err := a.Renew(ctx); err != nil {
				t.Fatalf("Renew of a live lease: %v", err)
			}
			if err := a.Release(ctx); err != nil {
				t.Fatal(err)
			}
			b, err := l.Acquire(ctx, "r", "agent-2", ttl)
			if err != nil {
				t.Fatalf("Acquire after Release: %v", err)
			}
			time.Sleep(2 * ttl) // unrenewed, the key expires
			c, err := l.Acquire(ctx, "r", "agent-3", ttl)
			if err != nil {
				t.Fatalf("Acquire after the TTL: %v", err)
			}
			if err := b.Renew(ctx); err == nil {
				t.Error("Renew of an expired lease succeeded")
			}
			if err := b.Release(ctx); err == nil {
				t.Error("Release of an expired lease succeeded")
			}
			if err := c.Release(ctx); err != nil {
				t.Errorf("Release of the live lease after the stale one's: %v", err)
			}
		})
	}
}

// The published finding, with the libraries' own code: a holder paused
// past its TTL writes after Redis gave the lock to another (a stale write,
// which fails the run only when asked, as here).
func TestPausedHolderLandsStaleWrite(t *testing.T) {
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rec := &recorder{TB: t}
			res := labtest.Run(rec, "testdata/paused-holder.yaml", open(t, name), labtest.RequireNoStaleWrites(), labtest.Name(name), labtest.HistoryDir(t.TempDir()))
			t.Logf("%s: %d acquisitions, %d landed, %d stale writes, %d mutual-exclusion violations",
				res.Mode, res.Acquisitions, res.CommitsAdmitted, res.StaleWritesLanded, res.MutualExclusionViolations)
			if res.Contender.Discipline != history.DisciplineNaive || res.Contender.Generations != realtime.GenerationsObserved {
				t.Errorf("ran %+v: want naive, numbered as observed", res.Contender)
			}
			if res.StaleWritesLanded != 1 || !rec.failed {
				t.Errorf("%d stale writes: want the paused holder's", res.StaleWritesLanded)
			}
			if res.MutualExclusionViolations != 0 {
				t.Errorf("the lock granted a key twice: %+v", res.MutualExclusion)
			}
		})
	}
}

type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Errorf(string, ...any) { r.failed = true }
