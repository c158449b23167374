package harness

import (
	"math/rand/v2"
	"time"

	"github.com/leasefence/lab/leasefence"
)

// history is what the checker reads: every lease generation the coordinator
// minted, with the true instants its holder believed in it and acted on it,
// and every write attempt as the resource recorded it.
type history struct {
	leases []leaseRec // in mint order
	writes []writeRec // in true-time order

	denials, retries, checksFailed, pushes int
}

// leaseRec is one lease generation: one fence minted by one coordinator
// incarnation (epoch) for one resource.
type leaseRec struct {
	agent, resource int32
	fence           leasefence.Fence
	epoch           int32

	granted  time.Duration // the coordinator minted it
	coordEnd time.Duration // its coordinator expiry, or the release
	released bool
	expired  bool // the coordinator's expiry passed unrenewed
	forgot   bool // a restart without persistence forgot it

	// The holder's side; -1 until the holder completes the acquire.
	start     time.Duration // the holder completed the acquire
	beliefEnd time.Duration // the true instant its own check stops passing, or it gave up
	actEnd    time.Duration // the later of beliefEnd and its last write attempt
}

// lapsed reports whether the coordinator no longer vouches for the lease.
func (r *leaseRec) lapsed() bool { return r.expired || r.released || r.forgot }

// writeRec is one write attempt at a resource.
type writeRec struct {
	at                   time.Duration
	agent, resource, rec int32
	fence                leasefence.Fence
	refused              bool
}

func (h *history) mint(r leaseRec) int32 {
	h.leases = append(h.leases, r)
	return int32(len(h.leases) - 1)
}

// sample draws from d with r.
func (d Dist) sample(r *rand.Rand) time.Duration {
	if d.TailP > 0 && r.Float64() < d.TailP {
		return uniform(r, d.TailMin, d.TailMax)
	}
	return uniform(r, d.Min, d.Max)
}

func uniform(r *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(r.Int64N(int64(hi-lo)+1))
}
