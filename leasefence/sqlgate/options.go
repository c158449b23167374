package sqlgate

import (
	"fmt"
	"math"
	"regexp"
	"time"

	"github.com/leasefence/lab/leasefence"
)

// Option configures a Gate.
type Option func(*config)

type config struct {
	dialect      Dialect
	prefix       string
	initialFloor leasefence.Fence
	attempts     int
	backoff      time.Duration
	leaseTable   string // WithCurrentLease's table; "" checks no lease
	err          error  // the first option that was out of range
}

// The defaults: 8 attempts, the waits between them drawn from [0, 2ms),
// [0, 4ms), ... capped at maxBackoff, about half a second in all at worst.
const (
	defaultPrefix   = "leasefence_"
	defaultAttempts = 8
	defaultBackoff  = 2 * time.Millisecond
	maxBackoff      = 250 * time.Millisecond
)

func newConfig(opts []Option) config {
	c := config{prefix: defaultPrefix, attempts: defaultAttempts, backoff: defaultBackoff}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return c
}

func (c *config) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("%w: "+format, append([]any{leasefence.ErrInvalidRequest}, args...)...)
	}
}

// WithDialect names the database's dialect instead of inferring it from the
// driver.
func WithDialect(d Dialect) Option {
	return func(c *config) {
		if !d.valid() {
			c.fail("sqlgate.WithDialect(%v): not SQLite or Postgres", d)
			return
		}
		c.dialect = d
	}
}

// prefixPattern is a table name prefix that makes plain identifiers: an
// optional schema (PostgreSQL) or attached database (SQLite) and a dot, then
// letters, digits and underscores. Names are spliced into statements, so
// nothing else is let through.
var prefixPattern = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*\.)?([A-Za-z_][A-Za-z0-9_]*)?$`)

// WithTablePrefix names the gate's tables prefix+"floor" and
// prefix+"rejections" instead of "leasefence_floor" and
// "leasefence_rejections". The prefix may start with a schema and a dot
// ("gates.lf_"); it may hold only letters, digits and underscores besides.
// Gates of several resources share the tables of one prefix.
func WithTablePrefix(prefix string) Option {
	return func(c *config) {
		if !prefixPattern.MatchString(prefix) {
			c.fail("sqlgate.WithTablePrefix(%q): only letters, digits and underscores, optionally after a schema and a dot", prefix)
			return
		}
		c.prefix = prefix
	}
}

// tablePattern is a table name: a plain identifier, optionally after a
// schema (PostgreSQL) or attached database (SQLite) and a dot.
var tablePattern = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*\.)?[A-Za-z_][A-Za-z0-9_]*$`)

// WithCurrentLease makes Commit admit a token only if it is also the
// resource's current, live lease in table, a lease table of sqllease's
// layout in the same database ("leasefence_leases" by default there):
// its row for the resource has the token's holder and fence, is not
// released, and expires after the database's clock now. It is checked in
// the write's own transaction, with the floor row locked and before write
// runs; on PostgreSQL the lease row is read FOR SHARE, in the statement
// that locks or raises the floor row (the check adds no round trip), so
// no acquire can replace the lease until the write has committed or
// rolled back. A token the floor admits but whose lease has ended
// (expired, released, superseded) is refused with a *LeaseNotLiveError
// (ErrLeaseNotLive) and logged like a floor refusal: a stale holder is
// refused before any newer holder has written. Admit checks the floor
// only. The table's layout is the one sqllease's package doc fixes, read
// by name, so this package imports nothing of sqllease.
func WithCurrentLease(table string) Option {
	return func(c *config) {
		if !tablePattern.MatchString(table) {
			c.fail("sqlgate.WithCurrentLease(%q): only letters, digits and underscores, optionally after a schema and a dot", table)
			return
		}
		c.leaseTable = table
	}
}

// WithInitialFloor refuses tokens below f from the start, as
// leasefence.WithInitialFloor does: New raises a floor below f to f, with no
// holder, so fence f itself is admitted from any holder. A floor at or above
// f is left alone.
func WithInitialFloor(f leasefence.Fence) Option {
	return func(c *config) {
		if f > math.MaxInt64 {
			c.fail("sqlgate.WithInitialFloor(%d): %v", f, ErrFenceRange)
			return
		}
		c.initialFloor = f
	}
}

// WithRetry sets how many times an operation is attempted when the database
// answers busy or aborts it to serialise it (attempts >= 1; 1 means no
// retry), and the first backoff (> 0), which doubles with each retry up to a
// quarter of a second. Each wait is drawn at random below its bound, so that
// processes that collided do not collide again. The default is 8 attempts
// from 2ms.
func WithRetry(attempts int, backoff time.Duration) Option {
	return func(c *config) {
		if attempts < 1 || backoff <= 0 {
			c.fail("sqlgate.WithRetry(%d, %v): needs attempts >= 1 and backoff > 0", attempts, backoff)
			return
		}
		c.attempts, c.backoff = attempts, backoff
	}
}
