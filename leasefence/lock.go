package leasefence

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"time"
)

// DefaultHolder returns a holder name for a program that was given none:
// "<hostname>-<pid>-<8 random hex digits>", unique to the call, so two
// sessions (in one process or in two) never share a name, while an
// operator reading a gate's floor or refusal log still sees which host and
// process held it. A host whose name cannot be read is "host".
func DefaultHolder() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "host"
	}
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// DefaultLockSkew is the ClockSkew a one-call Lock entry reserves when it
// is given none: a tenth of the TTL. It is a margin for drift between the
// holder's clock and the store's, an assumption as ClientOptions.ClockSkew
// says, sized so that a clock running 10% fast still gives up its lease
// before the store lets it go.
func DefaultLockSkew(ttl time.Duration) time.Duration { return ttl / 10 }

// NewLockClient returns the Client the stores' one-call Lock entries
// (etcdlease.Lock, redislease.Lock) hold with: holder "" means
// DefaultHolder(), skew 0 means DefaultLockSkew(ttl), and its clock is a
// monotonic clock named after the holder. A negative skew is an error
// wrapping ErrInvalidRequest.
func NewLockClient(holder string, ttl, skew time.Duration) (*Client, error) {
	if skew < 0 {
		return nil, fmt.Errorf("%w: ClockSkew must be >= 0, got %v", ErrInvalidRequest, skew)
	}
	if holder == "" {
		holder = DefaultHolder()
	}
	if skew == 0 {
		skew = DefaultLockSkew(ttl)
	}
	return NewClient(ClientOptions{Clock: NewMonotonicClock(Domain(holder)), Holder: holder, ClockSkew: skew})
}
