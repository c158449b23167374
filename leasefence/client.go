package leasefence

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	// DefaultRequestRecord is how many requests a Client remembers
	// (outstanding and recently completed) when ClientOptions.RequestRecord
	// is 0.
	DefaultRequestRecord = 1024
	// MaxClockSkew bounds ClientOptions.ClockSkew. With a grant's TTL at
	// most MaxTTL, TTL - ClockSkew cannot overflow, and a deadline that
	// sentAt + TTL - ClockSkew would put outside an Instant's range is
	// refused with ErrOutOfRange rather than wrapped.
	MaxClockSkew = MaxTTL
)

// ClientOptions configures a Client.
type ClientOptions struct {
	Clock  Clock  // required
	Holder string // required, non-empty
	// ClockSkew (>= 0, <= MaxClockSkew) is subtracted from every deadline.
	// It reserves room for drift you already estimated between this
	// clock's rate and the coordinator's; it is an assumption, not a
	// measurement. A skew at or above a grant's TTL makes a lease that is
	// expired as it is made.
	ClockSkew time.Duration
	// RequestRecord bounds the client's record of requests; 0 means
	// DefaultRequestRecord. The client remembers its last RequestRecord
	// requests, outstanding or completed: beginning one more forgets the
	// oldest, and completing that request answers ErrUnknownRequest. The
	// record grows to this size as requests are begun, and no further.
	RequestRecord int
	// Entropy is the source of request-id randomness; nil means
	// crypto/rand. Each request id takes 16 bytes from it. Request ids must
	// be unique across every client and process, so a seeded source is for
	// deterministic simulation only.
	Entropy io.Reader
	// Trace, if non-nil, observes every request begun and completed.
	Trace *ClientTrace
}

// Client is the holder's side of the protocol. It stamps each request with
// the instant it is sent and is the only thing that turns a grant into a
// Lease, anchoring the deadline at that send instant:
//
//	Deadline = sentAt + grant.TTL - ClockSkew
//
// The coordinator dates a lease from when it processed the request, which is
// necessarily after it was sent, so the holder's window always lies inside
// the coordinator's, however slow the round trip. Dating it from when the
// reply arrived would lean the other way on every exchange.
//
// A Client is safe for concurrent use. Make one with NewClient: the methods
// of the zero Client answer ErrUninitialized.
type Client struct {
	clock   Clock
	holder  string
	skew    time.Duration
	entropy io.Reader
	trace   *ClientTrace

	mu sync.Mutex
	// records is a ring of the last requests begun, each in the slot its
	// id names (see newID), so completing one is an index, not a lookup.
	// It grows to limit, then each new request overwrites the oldest.
	records []requestRecord
	limit   int
	next    int      // the slot of the next request begun
	random  [16]byte // entropy for the next id: a field, so reading it allocates nothing

	// leases are carved from a chunk (see chunk.go), and ids written one
	// after another into a shared buffer: a client in a busy loop makes
	// one allocation per chunk rather than two per request. A
	// strings.Builder never changes a byte it has written, which is what
	// lets each id be a slice of its String.
	leases chunk[Lease]
	ids    strings.Builder
}

// idRandomHex is the length of an id's random part: 128 bits in hex.
const idRandomHex = 32

type requestRecord struct {
	id       string // the request's id; "" for a slot not yet used
	kind     RequestKind
	resource string
	fence    Fence // renewals: the fence the grant must keep
	sentAt   Instant
	used     bool
}

// NewClient returns a client, or an error wrapping ErrInvalidRequest when an
// option is missing or out of range.
func NewClient(opts ClientOptions) (*Client, error) {
	switch {
	case opts.Clock == nil:
		return nil, fmt.Errorf("%w: ClientOptions.Clock is required", ErrInvalidRequest)
	case ValidateID(IDHolder, opts.Holder) != nil:
		return nil, fmt.Errorf("ClientOptions.Holder: %w", ValidateID(IDHolder, opts.Holder))
	case opts.ClockSkew < 0 || opts.ClockSkew > MaxClockSkew:
		return nil, fmt.Errorf("%w: ClientOptions.ClockSkew must be >= 0 and <= MaxClockSkew (%v), got %v", ErrInvalidRequest, MaxClockSkew, opts.ClockSkew)
	case opts.RequestRecord < 0:
		return nil, fmt.Errorf("%w: ClientOptions.RequestRecord must be >= 0, got %d", ErrInvalidRequest, opts.RequestRecord)
	}
	n := opts.RequestRecord
	if n == 0 {
		n = DefaultRequestRecord
	}
	entropy := opts.Entropy
	if entropy == nil {
		entropy = rand.Reader
	}
	return &Client{
		clock:   opts.Clock,
		holder:  opts.Holder,
		skew:    opts.ClockSkew,
		entropy: entropy,
		trace:   opts.Trace,
		limit:   n,
	}, nil
}

// errZeroClient refuses a call on the zero Client before it touches anything.
var errZeroClient = fmt.Errorf("%w: a zero Client; make one with NewClient", ErrUninitialized)

// Holder returns the holder id the client acquires under.
func (c *Client) Holder() string { return c.holder }

// BeginAcquire stamps an acquire request for resource with the client's
// clock reading, which is the send instant: call it immediately before
// sending. The client keeps its own record of that instant; the SentAt field
// of the request is informational.
//
// The request id is opaque: compare it, never parse it. It carries 128 bits
// from the client's entropy source, which is what makes it unique across
// clients and processes, plus whatever the client needs to find its record.
func (c *Client) BeginAcquire(resource string) (AcquireRequest, error) {
	if c.clock == nil {
		return AcquireRequest{}, errZeroClient
	}
	if err := ValidateID(IDResource, resource); err != nil {
		return AcquireRequest{}, err
	}
	id, sentAt, err := c.begin(requestRecord{kind: KindAcquire, resource: resource})
	if err != nil {
		return AcquireRequest{}, err
	}
	c.traceBegin(KindAcquire, id, Token{Resource: resource, Holder: c.holder}, sentAt)
	return AcquireRequest{RequestID: id, Holder: c.holder, Resource: resource, SentAt: sentAt}, nil
}

// BeginRenewal stamps a renewal of l, under the same rules as BeginAcquire.
func (c *Client) BeginRenewal(l *Lease) (RenewRequest, error) {
	if c.clock == nil {
		return RenewRequest{}, errZeroClient
	}
	if l == nil {
		return RenewRequest{}, fmt.Errorf("%w: renewal of a nil lease", ErrInvalidRequest)
	}
	if err := validateToken(l.Token); err != nil {
		return RenewRequest{}, err
	}
	if l.Token.Holder != c.holder {
		return RenewRequest{}, fmt.Errorf("%w: lease %v belongs to another holder than %q", ErrInvalidRequest, l.Token, c.holder)
	}
	id, sentAt, err := c.begin(requestRecord{kind: KindRenew, resource: l.Token.Resource, fence: l.Token.Fence})
	if err != nil {
		return RenewRequest{}, err
	}
	c.traceBegin(KindRenew, id, l.Token, sentAt)
	return RenewRequest{RequestID: id, Token: l.Token, SentAt: sentAt}, nil
}

// begin reads the send instant and records the request under a fresh id,
// in the ring slot after the last one, forgetting the request recorded there.
func (c *Client) begin(rec requestRecord) (string, Instant, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := io.ReadFull(c.entropy, c.random[:]); err != nil {
		return "", Instant{}, fmt.Errorf("leasefence: request id: %w", err)
	}
	sentAt, err := c.clock.Now()
	if err != nil {
		return "", Instant{}, fmt.Errorf("leasefence: client clock: %w", err)
	}
	slot := c.next
	rec.id = c.newID(slot)
	rec.sentAt = sentAt
	if slot == len(c.records) {
		c.records = append(c.records, rec)
	} else {
		c.records[slot] = rec
	}
	c.next = (slot + 1) % c.limit
	return rec.id, sentAt, nil
}

// newID is the id of a request recorded in slot: the random bits in hex,
// then the slot in hex. The slot lets completion go straight to the record;
// the random bits make the id unique, and completion checks that the record
// in the slot is this id's, so an id naming a slot that now holds another
// request (or another client's id) is unknown rather than confused with it.
func (c *Client) newID(slot int) string {
	var buf [idRandomHex + 16]byte
	hex.Encode(buf[:idRandomHex], c.random[:])
	id := strconv.AppendUint(buf[:idRandomHex], uint64(slot), 16)
	if c.ids.Cap()-c.ids.Len() < len(id) {
		c.ids = strings.Builder{} // earlier ids keep the old buffer alive
		c.ids.Grow(64 * chunkLen)
	}
	n := c.ids.Len()
	c.ids.Write(id)
	return c.ids.String()[n:]
}

// recordOf returns the record of the request with id, or nil if the client
// has none: an id it did not make, or one whose slot has been reused.
func (c *Client) recordOf(id string) *requestRecord {
	if len(id) <= idRandomHex {
		return nil
	}
	slot, err := strconv.ParseUint(id[idRandomHex:], 16, 64)
	if err != nil || slot >= uint64(len(c.records)) || c.records[slot].id != id {
		return nil
	}
	return &c.records[slot]
}

// CompleteAcquire turns the grant answering req into a Lease whose deadline
// is anchored at the send instant the client recorded for req.RequestID.
// It fails with ErrUnknownRequest when the client has no record of that
// acquire, ErrRequestUsed when it was already completed, and
// ErrGrantMismatch when g answers another request, holder or resource (a
// mismatched completion does not use the request up).
func (c *Client) CompleteAcquire(req AcquireRequest, g Grant) (*Lease, error) {
	return c.complete(KindAcquire, req.RequestID, g)
}

// CompleteRenewal is CompleteAcquire for a renewal; the grant must also keep
// the lease's fence.
func (c *Client) CompleteRenewal(req RenewRequest, g Grant) (*Lease, error) {
	return c.complete(KindRenew, req.RequestID, g)
}

func (c *Client) complete(kind RequestKind, id string, g Grant) (*Lease, error) {
	l, err := c.completeRecord(kind, id, g)
	if c.trace != nil && c.trace.Complete != nil {
		info := CompleteInfo{Kind: kind, RequestID: id, Grant: g, Err: err}
		if l != nil {
			info.Lease = *l
		}
		c.trace.Complete(info)
	}
	return l, err
}

func (c *Client) completeRecord(kind RequestKind, id string, g Grant) (*Lease, error) {
	if c.clock == nil {
		return nil, errZeroClient
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	rec := c.recordOf(id)
	if rec == nil || rec.kind != kind {
		return nil, fmt.Errorf("%w: no %s request %q", ErrUnknownRequest, kind, id)
	}
	if rec.used {
		return nil, fmt.Errorf("%w: %s request %q", ErrRequestUsed, kind, id)
	}
	switch {
	case g.RequestID != id:
		return nil, fmt.Errorf("%w: grant answers request %q, not %q", ErrGrantMismatch, g.RequestID, id)
	case g.Token.Holder != c.holder:
		return nil, fmt.Errorf("%w: grant is for holder %q, not %q", ErrGrantMismatch, g.Token.Holder, c.holder)
	case g.Token.Resource != rec.resource:
		return nil, fmt.Errorf("%w: grant is for resource %q, not %q", ErrGrantMismatch, g.Token.Resource, rec.resource)
	case g.Token.Fence == 0:
		return nil, fmt.Errorf("%w: grant carries fence 0, which is never issued", ErrGrantMismatch)
	case kind == KindRenew && g.Token.Fence != rec.fence:
		return nil, fmt.Errorf("%w: renewal grant has fence %d, the lease has %d", ErrGrantMismatch, g.Token.Fence, rec.fence)
	case g.TTL <= 0 || g.TTL > MaxTTL:
		return nil, fmt.Errorf("%w: grant has TTL %v, no coordinator grants that", ErrGrantMismatch, g.TTL)
	}
	// TTL in (0, MaxTTL] and skew in [0, MaxClockSkew]: the difference fits.
	deadline, ok := rec.sentAt.addChecked(g.TTL - c.skew)
	if !ok {
		return nil, fmt.Errorf("%w: deadline %v + TTL %v - skew %v", ErrOutOfRange, rec.sentAt, g.TTL, c.skew)
	}
	rec.used = true
	l := c.leases.new()
	*l = Lease{
		Token:    g.Token,
		Deadline: deadline,
		TTL:      g.TTL,
		clock:    c.clock,
	}
	return l, nil
}

func (c *Client) traceBegin(kind RequestKind, id string, t Token, sentAt Instant) {
	if c.trace != nil && c.trace.Begin != nil {
		c.trace.Begin(BeginInfo{Kind: kind, RequestID: id, Token: t, SentAt: sentAt})
	}
}

// Lease is a holder's belief that it owns a resource until Deadline, in the
// client's clock domain. It is only ever made by Client.CompleteAcquire and
// Client.CompleteRenewal.
type Lease struct {
	Token    Token
	Deadline Instant // in the client's domain
	TTL      time.Duration

	clock Clock
}

// HasExpired reports whether the lease's deadline has passed on the client's
// clock: true at and after the deadline.
//
// ADVISORY: the answer is true only at the instant it is computed. A write
// that follows a false answer may land after the lease has expired and been
// reassigned (a GC pause, a model call, a slow disk). Never branch a write on
// it: write through FenceGate.Commit, which the resource checks in the same
// operation as the write. There is deliberately no AssertValid.
//
// A Lease built by hand has no clock; HasExpired returns ErrNoClock.
func (l *Lease) HasExpired() (bool, error) {
	if l.clock == nil {
		return false, fmt.Errorf("%w: lease %v was not made by a Client", ErrNoClock, l.Token)
	}
	now, err := l.clock.Now()
	if err != nil {
		return false, err
	}
	before, err := now.Before(l.Deadline)
	if err != nil {
		return false, err
	}
	return !before, nil
}
