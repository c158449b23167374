package realtime_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/realtime/internal/runtest"
	"github.com/leasefence/lab/registry"
)

// The in-memory coordinator plays the scenario's lock_delay: a lease that
// expired unreleased is followed by a refusal for "lock-delay", and the
// resource sits idle while agent-2 waits, in both modes.
func TestLockDelayOnMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for 5.5s")
	}
	t.Parallel()
	res, file := runtest.RunRecorded(t, runtest.LockDelayScript(3*time.Second, 5*time.Second), realtime.Options{})
	runtest.AssertInvariants(t, res)
	runtest.CheckRoundTrip(t, res, file)
	runtest.CheckLockDelayed(t, res, file, 3*time.Second)
}

// etcd's coordinator plays it too. It times the delay from the acquire
// that finds the expiry (agent-2's at 2s, etcdlease's lockdelay.go says
// why), on an etcd lease that ends up to a second late, so agent-2 asks
// again at 7s.
func TestLockDelayOnEtcd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs etcd for 7.5s")
	}
	t.Parallel()
	s := runtest.EtcdSetup(t, 0, runtest.LockDelayScript(3*time.Second, 7*time.Second))
	res, file := runtest.RunRecorded(t, s.Scenario, realtime.Options{Backend: s.Backend, Store: s.Store})
	runtest.AssertInvariants(t, res)
	runtest.CheckRoundTrip(t, res, file)
	runtest.CheckLockDelayed(t, res, file, 5*time.Second)
}

// A lock_delay that is not whole seconds on etcd's time is refused before
// anything starts, naming the field and etcd's resolution: as written,
// or once a time scale stretched it.
func TestEtcdRefusesALockDelayOffWholeSeconds(t *testing.T) {
	for _, tc := range []struct {
		delay time.Duration
		scale float64
		want  string
	}{
		{1500 * time.Millisecond, 0, "lock_delay 1.5s at time scale 1 is 1.5s, and etcd times a lock-delay in whole seconds"},
		{1250 * time.Millisecond, 2, "lock_delay 1.25s at time scale 2 is 2.5s, and etcd times a lock-delay in whole seconds"},
	} {
		err := realtime.Config{Backend: registry.Etcd, TimeScale: tc.scale}.Check(runtest.LockDelayScript(tc.delay, 5*time.Second))
		var ce *realtime.ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, realtime.ErrUnmappable) || ce.Setting != "scenario" || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("lock_delay %v at scale %v: %v, want a refusal of the scenario saying %q", tc.delay, tc.scale, err, tc.want)
		}
		if _, _, err := realtime.MapOntoEtcd(runtest.LockDelayScript(tc.delay, 5*time.Second), time.Second, tc.scale); !errors.Is(err, realtime.ErrUnmappable) {
			t.Errorf("MapOntoEtcd of lock_delay %v at scale %v: %v, want ErrUnmappable", tc.delay, tc.scale, err)
		}
	}
	if err := (realtime.Config{Backend: registry.Etcd}).Check(runtest.LockDelayScript(2*time.Second, 5*time.Second)); err != nil {
		t.Errorf("a whole-second lock_delay on etcd: %v", err)
	}
}

// A lock that is not the lab's has no lock-delay: a run that would give
// it one is refused, naming the scenario's field, not run without it.
func TestLockDelayRefusedForALock(t *testing.T) {
	lock := &realtime.Contender{Info: history.Contender{Name: "lock"}}
	_, err := realtime.New(runtest.LockDelayScript(3*time.Second, 5*time.Second), realtime.Options{Modes: []history.Mode{"lock"}, Backend: lock})
	if !errors.Is(err, registry.ErrContender) || !strings.Contains(err.Error(), "contender lock: cannot play the lab coordinator's lock-delay (lock_delay)") {
		t.Errorf("New with a Contender and a lock_delay: %v, want the lock refused, naming lock_delay", err)
	}
}

// plainBackend is a backend whose coordinators have no lock-delay (it
// hides the in-memory backend's OpenLockDelay).
type plainBackend struct{ realtime.Backend }

// A backend whose coordinators have no lock-delay fails the run that
// would give them one, rather than run it without.
func TestLockDelayOnABackendWithout(t *testing.T) {
	r, err := realtime.New(runtest.LockDelayScript(3*time.Second, 5*time.Second), realtime.Options{Backend: plainBackend{realtime.NewMemory()}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(t.Context()); !errors.Is(err, realtime.ErrNoLockDelay) || !strings.Contains(err.Error(), "lock_delay 3s") {
		t.Errorf("Run: %v, want ErrNoLockDelay naming lock_delay", err)
	}
}
