package tracing

import (
	"context"
	"encoding/binary"
	"math/rand/v2"

	"go.opentelemetry.io/otel/trace"
)

// IDGenerator gives spans the trace and span ids a Recorder chose for
// them, and random ids to every other span. Its method set is the SDK's
// sdktrace.IDGenerator: pass it to sdktrace.WithIDGenerator. It is defined
// here, on the OpenTelemetry API's types alone, so that instrumenting does
// not link the SDK.
//
// The zero IDGenerator is ready to use and safe for concurrent use.
type IDGenerator struct{}

// NewIDGenerator returns an IDGenerator: with it, a Recorder's spans get
// the ids it derived. A Recorder derives its ids from the run alone: the
// scenario's name and seed, the mode and the lease generation (or the
// acquire), so with this generator the same simulated run recorded twice
// gives the same ids, whenever it is recorded. A real-time run also mixes
// in its start t0: its seed does not fix when things happen, so two such
// runs are two traces.
func NewIDGenerator() IDGenerator { return IDGenerator{} }

// idSlot holds the ids a Recorder wants for the span it is about to
// start. The recorder puts a pointer to its slot in the context once and
// fills the slot before each Start (under its lock), which costs no
// allocation per span; the generator takes the ids and empties the slot, so
// a span started later from the same context gets random ids.
type idSlot struct {
	trace trace.TraceID
	span  trace.SpanID
}

func (s *idSlot) set(t trace.TraceID, sp trace.SpanID) { s.trace, s.span = t, sp }

type idsKey struct{}

func withIDSlot(ctx context.Context, s *idSlot) context.Context {
	return context.WithValue(ctx, idsKey{}, s)
}

func slotOf(ctx context.Context) *idSlot {
	s, _ := ctx.Value(idsKey{}).(*idSlot)
	return s
}

// NewIDs returns the ids the Recorder set in ctx for the span being
// started, or random ones.
func (IDGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if s := slotOf(ctx); s != nil && s.trace.IsValid() && s.span.IsValid() {
		t, sp := s.trace, s.span
		*s = idSlot{}
		return t, sp
	}
	var t trace.TraceID
	for !t.IsValid() {
		binary.BigEndian.PutUint64(t[:8], rand.Uint64())
		binary.BigEndian.PutUint64(t[8:], rand.Uint64())
	}
	return t, randomSpanID()
}

// NewSpanID returns the span id the Recorder set in ctx for a span of
// trace t, or a random one.
func (IDGenerator) NewSpanID(ctx context.Context, t trace.TraceID) trace.SpanID {
	// Ids chosen for another trace are not for this span: the SDK takes the
	// trace id from the parent, which the caller may have swapped.
	if s := slotOf(ctx); s != nil && s.trace == t && s.span.IsValid() {
		sp := s.span
		*s = idSlot{}
		return sp
	}
	return randomSpanID()
}

func randomSpanID() trace.SpanID {
	var s trace.SpanID
	for !s.IsValid() {
		binary.BigEndian.PutUint64(s[:], rand.Uint64())
	}
	return s
}

// mix is SplitMix64's finaliser: a cheap bijection that spreads every input
// bit over the output, enough to make ids from small counters look random
// and never collide for distinct inputs.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// fold hashes a sequence of words into one, order-sensitively.
func fold(words ...uint64) uint64 {
	h := uint64(0x6a09e667f3bcc908)
	for _, w := range words {
		h = mix(h ^ w)
	}
	return h
}

// hashString is FNV-1a: stable across processes and platforms, unlike
// hash/maphash.
func hashString(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// traceIDFrom builds a valid trace id from a hash.
func traceIDFrom(h uint64) trace.TraceID {
	var t trace.TraceID
	binary.BigEndian.PutUint64(t[:8], mix(h))
	binary.BigEndian.PutUint64(t[8:], mix(h^0xd1b54a32d192ed03))
	if !t.IsValid() {
		t[15] = 1
	}
	return t
}

// spanIDFor is the n-th span id of trace t.
func spanIDFor(t trace.TraceID, n uint64) trace.SpanID {
	var s trace.SpanID
	binary.BigEndian.PutUint64(s[:], fold(binary.BigEndian.Uint64(t[:8]), binary.BigEndian.Uint64(t[8:]), n))
	if !s.IsValid() {
		s[7] = 1
	}
	return s
}
