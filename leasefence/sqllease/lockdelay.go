package sqllease

import (
	"time"

	"github.com/leasefence/lab/leasefence"
)

// The lock-delay (Options.LockDelay) in SQL.
//
// A resource's row already keeps what the delay needs: its latest lease's
// expiry on the database's clock (expires_us), and whether that lease was
// released (released, set only by a release of the live lease: an expired
// holder's release changes nothing). So the acquire's transaction, under
// the row lock it takes anyway and at the database-clock reading it makes
// anyway, refuses a lease that was not released while that reading is
// before expires_us + LockDelay. No column, no extra write, no background
// work: the refusal is decided in the same transaction as the grant it
// withholds, from the row every coordinator on the table reads, so a
// coordinator started after the expiry refuses alike, and the delay runs
// from the expiry itself, to the microsecond. What a column would add is a
// delay chosen at the grant rather than by the asking coordinator:
// coordinators that share a table share one LockDelay, as they share the
// table's schema.

// checkLockDelay applies leasefence's lock-delay rule, and the database
// clock's resolution, to opts.LockDelay.
func checkLockDelay(opts Options) error {
	if err := leasefence.ValidateLockDelay("Options.LockDelay", opts.LockDelay, opts.AllowLongLockDelay); err != nil {
		return err
	}
	if opts.LockDelay > 0 {
		return wholeMicros("Options.LockDelay", opts.LockDelay)
	}
	return nil
}

// lockDelayLeft is what is left at nowUS of the lock-delay of r, a row
// whose lease is not live: 0 when it was released (or never granted), when
// the coordinator has no delay, or once the delay has passed.
func (c *Coordinator) lockDelayLeft(r row, nowUS int64) time.Duration {
	if c.delay == 0 || r.holder == "" || r.released {
		return 0
	}
	return max(micros(r.expiresUS+c.delay.Microseconds()-nowUS), 0)
}
