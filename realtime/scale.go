package realtime

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/spec"
)

// MaxTimeScale is the largest factor a scenario's times are stretched by to
// fit a store's TTL granularity: beyond it a minute-long scenario would
// take most of an hour, and that is more likely a mistake than a wish.
const MaxTimeScale = 10

// ErrUnmappable is wrapped by every error about a scenario that cannot be
// mapped onto a backend's real time.
var ErrUnmappable = errors.New("scenario cannot be mapped onto the backend")

// Scale returns sc with every duration multiplied by k: run length, TTL,
// lock-delay, skew budget, think, stall and work-gap distributions, network delays and
// retry wait, clock offsets, partitions, restarts, push delay, scripted
// instants and interventions. Drift (a rate) is unchanged. With k = 1 it
// returns sc unchanged.
func Scale(sc spec.Scenario, k float64) spec.Scenario {
	if k == 1 {
		return sc
	}
	d := func(x time.Duration) time.Duration { return time.Duration(math.Round(float64(x) * k)) }
	dist := func(x spec.Dist) spec.Dist {
		x.Min, x.Max, x.TailMin, x.TailMax = d(x.Min), d(x.Max), d(x.TailMin), d(x.TailMax)
		return x
	}
	sc.Duration, sc.TTL, sc.ClockSkew, sc.LockDelay = d(sc.Duration), d(sc.TTL), d(sc.ClockSkew), d(sc.LockDelay)
	sc.Agent.Think, sc.Agent.Stall, sc.Agent.WorkGap = dist(sc.Agent.Think), dist(sc.Agent.Stall), dist(sc.Agent.WorkGap)
	sc.Network.RequestDelay, sc.Network.ReplyDelay = dist(sc.Network.RequestDelay), dist(sc.Network.ReplyDelay)
	sc.Network.RetryAfter = d(sc.Network.RetryAfter)
	sc.Clocks.Offset.Min, sc.Clocks.Offset.Max = d(sc.Clocks.Offset.Min), d(sc.Clocks.Offset.Max)
	if sc.Clocks.Agent != nil {
		agents := make(map[string]spec.AgentClock, len(sc.Clocks.Agent))
		for name, ac := range sc.Clocks.Agent {
			ac.Offset = d(ac.Offset)
			agents[name] = ac
		}
		sc.Clocks.Agent = agents
	}
	sc.Partitions = append([]spec.Partition(nil), sc.Partitions...)
	for i := range sc.Partitions {
		sc.Partitions[i].From, sc.Partitions[i].To = d(sc.Partitions[i].From), d(sc.Partitions[i].To)
	}
	sc.Restarts = append([]spec.Restart(nil), sc.Restarts...)
	for i := range sc.Restarts {
		sc.Restarts[i].At = d(sc.Restarts[i].At)
	}
	sc.Crashes = append([]spec.Crash(nil), sc.Crashes...)
	for i := range sc.Crashes {
		sc.Crashes[i].At, sc.Crashes[i].Restart = d(sc.Crashes[i].At), d(sc.Crashes[i].Restart)
	}
	sc.Push.Delay = dist(sc.Push.Delay)
	sc.Faults = append([]spec.TimedFault(nil), sc.Faults...)
	for i := range sc.Faults {
		f := &sc.Faults[i]
		f.At, f.Duration, f.Delay = d(f.At), d(f.Duration), d(f.Delay)
	}
	sc.Script = append([]spec.Action(nil), sc.Script...)
	for i := range sc.Script {
		a := &sc.Script[i]
		a.At, a.Duration = d(a.At), d(a.Duration)
		if a.RequestDelay != nil {
			v := d(*a.RequestDelay)
			a.RequestDelay = &v
		}
		if a.ReplyDelay != nil {
			v := d(*a.ReplyDelay)
			a.ReplyDelay = &v
		}
	}
	sc.Interventions = append([]history.Intervention(nil), sc.Interventions...)
	for i := range sc.Interventions {
		sc.Interventions[i].At, sc.Interventions[i].Duration = d(sc.Interventions[i].At), d(sc.Interventions[i].Duration)
	}
	return sc
}

// WholeSecondScale is the time scale that maps a scenario TTL onto a store
// whose TTLs are whole seconds of at least minTTL (etcd): the TTL becomes
// the smallest whole number of seconds that is >= ttl and >= minTTL, and
// every other time of the scenario is stretched by the same factor, so the
// scenario keeps its shape (a stall of 1.5 TTLs stays 1.5 TTLs). A scale
// above MaxTimeScale is refused.
func WholeSecondScale(ttl, minTTL time.Duration) (float64, error) {
	if ttl <= 0 {
		return 0, fmt.Errorf("%w: ttl must be > 0, got %v", ErrUnmappable, ttl)
	}
	target := max(ceilSecond(ttl), ceilSecond(max(minTTL, time.Second)))
	k := float64(target) / float64(ttl)
	if k > MaxTimeScale {
		return 0, fmt.Errorf("%w: ttl %v would need a time scale of %.3gx to become etcd's %v (at most %dx): raise the ttl",
			ErrUnmappable, ttl, k, target, MaxTimeScale)
	}
	return k, nil
}

// CheckWholeSecondScale reports whether k maps ttl onto a whole number of
// seconds of at least minTTL: the check for a scale the user chose.
func CheckWholeSecondScale(ttl, minTTL time.Duration, k float64) error {
	if !(k > 0) || k > MaxTimeScale {
		return fmt.Errorf("%w: time scale must be in (0, %d], got %v", ErrUnmappable, MaxTimeScale, k)
	}
	scaled := time.Duration(math.Round(float64(ttl) * k))
	if scaled%time.Second != 0 || scaled < max(minTTL, time.Second) {
		return fmt.Errorf("%w: ttl %v at time scale %v is %v, and etcd takes whole seconds of at least %v",
			ErrUnmappable, ttl, k, scaled, max(minTTL, time.Second))
	}
	return nil
}

func ceilSecond(d time.Duration) time.Duration {
	return (d + time.Second - 1) / time.Second * time.Second
}

// MapOntoEtcd returns sc on etcd's time: stretched by k, or when k is 0 by
// the smallest scale that makes its TTL whole seconds of at least minTTL
// (WholeSecondScale), and the scale used. etcd keeps its own time, so a
// coordinator drift cannot be played on it and is refused; it times a
// lock-delay in whole seconds, so a lock_delay that does not become
// whole seconds is refused too (CheckEtcdLockDelay).
func MapOntoEtcd(sc spec.Scenario, minTTL time.Duration, k float64) (spec.Scenario, float64, error) {
	if sc.Clocks.CoordinatorDriftPPM != 0 {
		return sc, 0, fmt.Errorf("%w: etcd keeps its own time: clocks.coordinator_drift_ppm must be 0 on etcd, got %v",
			ErrUnmappable, sc.Clocks.CoordinatorDriftPPM)
	}
	if k == 0 {
		var err error
		if k, err = WholeSecondScale(sc.TTL, minTTL); err != nil {
			return sc, 0, err
		}
	} else if err := CheckWholeSecondScale(sc.TTL, minTTL, k); err != nil {
		return sc, 0, err
	}
	out := Scale(sc, k)
	out.TTL = time.Duration(math.Round(float64(out.TTL)/float64(time.Second))) * time.Second
	if err := CheckEtcdLockDelay(sc.LockDelay, k); err != nil {
		return sc, 0, err
	}
	return out, k, nil
}

// CheckEtcdLockDelay reports whether lock_delay d at time scale k is whole
// seconds, as an etcd lease times it (etcdlease.Options.LockDelay).
func CheckEtcdLockDelay(d time.Duration, k float64) error {
	if scaled := time.Duration(math.Round(float64(d) * k)); scaled%time.Second != 0 {
		return fmt.Errorf("%w: lock_delay %v at time scale %v is %v, and etcd times a lock-delay in whole seconds",
			ErrUnmappable, d, k, scaled)
	}
	return nil
}
