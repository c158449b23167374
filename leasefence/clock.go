package leasefence

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// Domain names a clock. Two clocks have unrelated origins, so instants are
// only comparable within one domain.
type Domain string

// Instant is one reading of one clock: an offset from that clock's arbitrary
// origin, tagged with the clock's domain. The zero Instant belongs to no
// clock.
//
// Instants deliberately do not convert to time.Time or to a bare duration:
// an offset read off one clock and subtracted from another's is shaped
// exactly like a duration and wrong by the unknown distance between their
// origins, which is the failure that survives every type check.
type Instant struct {
	domain Domain
	offset time.Duration
}

// At returns the Instant at offset d of the clock named domain. It is how a
// Clock implementation builds its readings and how tests write down expected
// instants. An empty domain panics: it is a programming error.
func At(domain Domain, d time.Duration) Instant {
	mustDomain(domain)
	return Instant{domain: domain, offset: d}
}

// Domain returns the clock the instant was read from ("" for the zero Instant).
func (i Instant) Domain() Domain { return i.domain }

// Offset returns the instant's distance from its clock's origin. It is only
// meaningful next to other offsets of the same domain.
func (i Instant) Offset() time.Duration { return i.offset }

// IsZero reports whether i is the zero Instant, which belongs to no clock.
func (i Instant) IsZero() bool { return i.domain == "" }

// Add returns the instant d after i, in the same domain. The zero Instant
// stays zero. Like time.Duration arithmetic, Add does not check for
// overflow; the library's own deadlines and expiries are checked (see
// MaxTTL and ErrOutOfRange).
func (i Instant) Add(d time.Duration) Instant {
	if i.IsZero() {
		return i
	}
	return Instant{domain: i.domain, offset: i.offset + d}
}

// addChecked is i.Add(d), or false when the offset would overflow, so that
// a deadline or an expiry is never wrapped into the past.
func (i Instant) addChecked(d time.Duration) (Instant, bool) {
	sum := i.offset + d
	if (d > 0 && sum < i.offset) || (d < 0 && sum > i.offset) {
		return Instant{}, false
	}
	return i.Add(d), true
}

// Sub returns i-j. It returns a *ClockDomainError when the two instants come
// from different clocks or either is zero: never a number shaped like a
// duration.
func (i Instant) Sub(j Instant) (time.Duration, error) {
	if err := sameDomain(i, j); err != nil {
		return 0, err
	}
	return i.offset - j.offset, nil
}

// Before reports whether i is earlier than j, under the same rule as Sub.
func (i Instant) Before(j Instant) (bool, error) {
	if err := sameDomain(i, j); err != nil {
		return false, err
	}
	return i.offset < j.offset, nil
}

func sameDomain(i, j Instant) error {
	if i.domain == "" || j.domain == "" || i.domain != j.domain {
		return &ClockDomainError{Left: i.domain, Right: j.domain}
	}
	return nil
}

// String renders the instant as domain+offset, for example "agent-a+1.25s".
func (i Instant) String() string {
	if i.IsZero() {
		return "(no clock)"
	}
	return fmt.Sprintf("%s+%v", string(i.domain), i.offset)
}

type instantJSON struct {
	Domain Domain `json:"domain"`
	NS     int64  `json:"ns"`
}

// MarshalJSON encodes i as {"domain":"agent-a","ns":1250000000}, and the zero
// Instant as null.
func (i Instant) MarshalJSON() ([]byte, error) {
	if i.IsZero() {
		return []byte("null"), nil
	}
	return json.Marshal(instantJSON{Domain: i.domain, NS: int64(i.offset)})
}

// UnmarshalJSON decodes the form MarshalJSON writes. null decodes to the zero
// Instant; an object with an empty domain is an error, since it would be an
// offset of no clock.
func (i *Instant) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*i = Instant{}
		return nil
	}
	var v instantJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("leasefence: instant: %w", err)
	}
	if v.Domain == "" {
		return fmt.Errorf("leasefence: instant %s has no domain", b)
	}
	*i = Instant{domain: v.Domain, offset: time.Duration(v.NS)}
	return nil
}

// Clock is a source of Instants in one domain.
//
// Contract for implementations: Domain never changes and is never empty. Now
// never returns an Instant earlier than one it has already returned; a source
// that would go backwards makes Now return a *ClockError (ErrClockBackwards)
// and the zero Instant instead. Now is safe for concurrent use. NewClock wraps
// any source with that guard.
type Clock interface {
	Domain() Domain
	Now() (Instant, error)
}

// NewMonotonicClock returns a clock backed by Go's monotonic reading: the time
// since the clock was made. It is immune to wall-clock steps (NTP, manual
// changes), which is why the library never reads time.Now for a deadline.
func NewMonotonicClock(domain Domain) Clock {
	start := time.Now()
	return NewClock(domain, func() time.Duration { return time.Since(start) })
}

// NewClock wraps source, an offset from an origin of the caller's choosing,
// with the backwards guard: a reading lower than the highest already handed
// out is refused with a *ClockError, so a stepped-back source can never
// quietly extend how long a holder believes it owns a lease. The source is
// called with the clock's lock held, one call at a time. An empty domain or a
// nil source panics.
func NewClock(domain Domain, source func() time.Duration) Clock {
	mustDomain(domain)
	if source == nil {
		panic("leasefence: NewClock with a nil source")
	}
	return &guardedClock{domain: domain, source: source}
}

type guardedClock struct {
	domain Domain
	source func() time.Duration

	mu   sync.Mutex
	last time.Duration
	read bool
}

func (c *guardedClock) Domain() Domain { return c.domain }

func (c *guardedClock) Now() (Instant, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.source()
	if c.read && r < c.last {
		return Instant{}, &ClockError{Domain: c.domain, Previous: c.last, Reading: r}
	}
	c.last, c.read = r, true
	return Instant{domain: c.domain, offset: r}, nil
}

// ManualClock is a Clock that moves only when told to, and optionally by a
// fixed step on every read. It is safe for concurrent use.
//
// WithStepPerRead is what makes the check-to-write gap reproducible: with a
// clock that only advances between calls, a validity check and the write
// after it observe the same instant, and the overlap cannot be written down
// as a test.
type ManualClock struct {
	domain Domain

	mu   sync.Mutex
	now  time.Duration
	step time.Duration
	// spent is set by the read after which a step would have carried now
	// past the largest Duration: the clock then has no reading left.
	spent bool
}

// ManualOption configures a ManualClock.
type ManualOption func(*ManualClock)

// WithStart sets the clock's first reading (default 0).
func WithStart(d time.Duration) ManualOption { return func(c *ManualClock) { c.now = d } }

// WithStepPerRead moves the clock forward by d after every read: the first
// read returns the start, and two consecutive reads are exactly d apart. A
// negative d panics.
func WithStepPerRead(d time.Duration) ManualOption {
	if d < 0 {
		panic("leasefence: WithStepPerRead with a negative step")
	}
	return func(c *ManualClock) { c.step = d }
}

// NewManualClock returns a manual clock in domain. An empty domain panics.
func NewManualClock(domain Domain, opts ...ManualOption) *ManualClock {
	mustDomain(domain)
	c := &ManualClock{domain: domain}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Domain returns the clock's domain.
func (c *ManualClock) Domain() Domain { return c.domain }

// Now returns the current reading, then moves the clock by its step. It
// fails only once a step would carry the clock past the largest Duration
// (some 292 years from 0): rather than wrap round to a reading earlier than
// the last, every later read is then a *ClockError.
func (c *ManualClock) Now() (Instant, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.spent {
		return Instant{}, &ClockError{Domain: c.domain, Previous: c.now, Reading: c.now + c.step}
	}
	t := c.now
	if next := t + c.step; next >= t {
		c.now = next
	} else {
		c.spent = true
	}
	return Instant{domain: c.domain, offset: t}, nil
}

// Advance moves the clock forward by d. A negative d panics: a manual clock
// that went backwards would test a clock this library refuses to build. So
// does a d that would carry the clock past the largest Duration, which
// would wrap it round to a reading in the past.
func (c *ManualClock) Advance(d time.Duration) {
	if d < 0 {
		panic(fmt.Sprintf("leasefence: ManualClock.Advance(%v): clocks do not go backwards", d))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.now+d < c.now || c.spent && d > 0 {
		panic(fmt.Sprintf("leasefence: ManualClock.Advance(%v) from %v: past the largest Duration", d, c.now))
	}
	c.now += d
}

func mustDomain(d Domain) {
	if d == "" {
		panic("leasefence: a clock needs a non-empty Domain")
	}
}
