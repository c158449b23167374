package leasefence

import (
	"fmt"
	"time"
)

// MaxLockDelay is the longest lock-delay a coordinator takes without being
// told that it is meant (the AllowLongLockDelay option of each coordinator's
// options). A day is far beyond any call a stalled holder could still have
// in flight (a model call, a payment, an email: seconds to minutes), and a
// delay longer than that is most likely a unit mistake (24*time.Hour meant
// as 24*time.Second, or seconds passed as minutes) that would lock a
// resource away from everyone for days after one crash.
const MaxLockDelay = 24 * time.Hour

// ValidateLockDelay returns nil for a lock-delay a coordinator accepts:
// 0 (none), or a positive duration no longer than MaxLockDelay unless
// allowLong. Otherwise it returns an error wrapping ErrInvalidRequest that
// names option (for instance "CoordinatorOptions.LockDelay"). Every
// coordinator applies this one rule; a store with a coarser clock adds its
// own (whole seconds on etcd).
func ValidateLockDelay(option string, d time.Duration, allowLong bool) error {
	switch {
	case d < 0:
		return fmt.Errorf("%w: %s must be >= 0, got %v", ErrInvalidRequest, option, d)
	case d > MaxLockDelay && !allowLong:
		return fmt.Errorf("%w: %s %v is longer than MaxLockDelay (%v), most likely a unit mistake; set AllowLongLockDelay if it is meant", ErrInvalidRequest, option, d, MaxLockDelay)
	}
	return nil
}

// lockDelayLeft is what is left at now of the lock-delay of st, a lease
// that is not live at now: 0 when it was released, when delay is 0, or once
// delay has passed since its expiry.
func lockDelayLeft(st leaseState, delay time.Duration, now Instant) time.Duration {
	if st.released || delay == 0 {
		return 0
	}
	since, err := now.Sub(st.expiry) // same domain: both read off the coordinator's clock
	if err != nil || since >= delay {
		return 0
	}
	return delay - since
}
