package leasefence

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// DefaultRejectionLog is how many refusals a FenceGate retains when
// WithRejectionLog is not given.
const DefaultRejectionLog = 4096

// FenceGate lives at the resource and admits a write only if its token's
// fence is not below the highest fence it has admitted (the floor). The
// check and the write are one operation: the floor is raised before the
// write callback runs, and admitted writes never run at the same time, so
// nothing can happen between the check and the write. Every refusal is
// logged: the log is the evidence that two holders overlapped.
//
// A FenceGate is safe for concurrent use. Floor, WouldAdmit, Rejections,
// RejectionsSince and Admit never wait for a running write.
//
// Make one with NewFenceGate: the zero FenceGate guards no resource and
// answers every Commit and Admit with ErrUninitialized.
type FenceGate struct {
	resource string
	clock    Clock      // optional: stamps trace reports
	trace    *GateTrace // optional

	// writing is held by the one Commit whose write runs, from before its
	// check until its write has returned (or it was refused). Waiting for
	// it can be given up when a ctx ends (see lockCtx).
	writing sync.Mutex
	// ctxs carves the write contexts of the Commits that do not raise the
	// floor (a holder's writes under its lease), a chunk at a time; it is
	// guarded by writing, so only a Commit that is not nested uses it.
	ctxs chunk[writeCtx]

	// floor points at the highest token admitted; its Holder is "" for an
	// initial floor nobody has written under yet. A Token pointed at is
	// never changed: raising the floor swaps the pointer (compare-and-swap,
	// since a Commit, the Commits nested in its write and Admit may raise
	// it at once), so the admitted path reads the floor with one atomic
	// load and takes no lock but writing, and readers never wait at all.
	floor atomic.Pointer[Token]

	// mu guards log and raised. It is held only to log a refusal, read the
	// log or carve a raisedWrite, never while a write callback or a trace
	// hook runs.
	mu     sync.Mutex
	log    rejectionLog
	raised chunk[raisedWrite] // see newRaised
}

// GateOption configures a FenceGate.
type GateOption func(*FenceGate)

// WithInitialFloor refuses tokens below f from the start, to resume after a
// restart of the resource. The initial floor has no holder: fence f itself
// is admitted from any holder.
func WithInitialFloor(f Fence) GateOption {
	return func(g *FenceGate) {
		if f > 0 {
			g.floor.Store(&Token{Resource: g.resource, Fence: f})
		}
	}
}

// WithGateClock stamps the gate's trace reports with readings of c. Without
// it the gate reads no clock at all.
func WithGateClock(c Clock) GateOption { return func(g *FenceGate) { g.clock = c } }

// WithGateTrace reports every decided Commit and every Admit to t.
func WithGateTrace(t *GateTrace) GateOption { return func(g *FenceGate) { g.trace = t } }

// WithRejectionLog retains the newest n refusals (default
// DefaultRejectionLog). Older ones are dropped from Rejections and
// RejectionsSince but never from RejectionCount, so a reader that polls
// RejectionsSince learns how many it missed. The log grows as refusals are
// logged, up to n and no further: a large n costs nothing until it is used.
// An n below 1 panics in NewFenceGate, before the gate exists.
func WithRejectionLog(n int) GateOption {
	return func(g *FenceGate) {
		if n < 1 {
			panic(fmt.Sprintf("leasefence: WithRejectionLog(%d): the log must retain at least one refusal", n))
		}
		g.log.limit = n
	}
}

// NewFenceGate returns a gate for resource. An empty resource panics.
func NewFenceGate(resource string, opts ...GateOption) *FenceGate {
	if resource == "" {
		panic("leasefence: NewFenceGate with an empty resource")
	}
	g := &FenceGate{resource: resource}
	g.floor.Store(&Token{})
	g.log.limit = DefaultRejectionLog
	for _, o := range opts {
		o(g)
	}
	return g
}

// Resource returns the resource the gate guards.
func (g *FenceGate) Resource() string { return g.resource }

// errEscapedWrite refuses a Commit made, after a write of the gate has
// returned, with that write's context or one derived from it.
var errEscapedWrite = fmt.Errorf("leasefence: Commit with the context of a write that has returned: %w", context.Canceled)

// Commit runs write if t may write: t is for this gate's resource and its
// fence is not below the floor. The floor is raised to t before write runs
// and stays raised whatever write does, since the resource may already carry
// part of the newer write. Commit returns write's error as is.
//
// A token below the floor is refused with a *StaleFenceError and logged; the
// floor's fence under another holder is refused with ErrTokenConflict and
// logged; a token for another resource is ErrWrongResource and not logged. A
// nil ctx or write is ErrInvalidRequest and a zero FenceGate
// ErrUninitialized, before anything is touched.
//
// Admitted writes run one at a time. A Commit that must wait for a running write returns ctx.Err() if ctx is done
// first, with no write and the floor untouched; a stale token is refused
// without waiting. A panic in write propagates after the gate has been left
// usable.
//
// write receives a context of its own, derived from ctx: it carries ctx's
// values and deadline, is done when ctx is, and is cancelled when write
// returns. A Commit to the same gate made with that context (or one derived
// from it) while write runs is nested: it is handled in place rather than
// waiting for write, and with an older fence it is refused and logged like
// any other. Nested Commits may come from goroutines that write starts and
// waits for; they too run their writes one at a time, and
// each nested write gets a context of its own, which its own nested Commits
// must use (a nested write that commits with its parent's context waits for
// itself until that context is done). As far as the gate is concerned,
// write has not returned until the nested Commits it let in have.
//
// Keeping write's context after write returns is misuse: a Commit made with
// it is refused with an error matching context.Canceled and writes nothing,
// and the context reports Canceled. It never carries another write's values.
func (g *FenceGate) Commit(ctx context.Context, t Token, write func(ctx context.Context) error) error {
	if err := g.checkCall(ctx, t, write); err != nil {
		return err
	}
	// What the admitted path costs beyond the sync.Mutex a resource
	// without fencing would take (bench/leasefence_test.go measures it),
	// and why each cost stays:
	//   - ctx.Value, to find a Commit nested in a write of this gate, which
	//     must be handled in place or it would wait for itself; and
	//     ctx.Err, so a done ctx writes nothing.
	//   - checkCall's comparisons of the token with the resource, and
	//     raise's one atomic load and comparison with the floor: the check
	//     itself. The string comparisons end at the pointer when the
	//     strings share bytes, as a holder's own tokens do.
	//   - The write's own context. Per-call state per call, like
	//     net/http's: a context kept past its write (a transport's
	//     goroutine) can only ever answer for that write. A Commit that
	//     raises the floor shares one allocation with the new floor's
	//     Token (raisedWrite); the others' are carved from a chunk of
	//     chunkLen (ctxs), each used once, so a holder's writes under its
	//     lease allocate once per chunkLen. The price: a context kept past
	//     its write keeps its chunk's others reachable (never usable).
	//   - One atomic Or and one load as the write returns (writeCtx.finish),
	//     so a Commit made with that context afterwards is refused, not
	//     nested.
	// There is no second lock: the floor is an atomic pointer, and mu is
	// taken only to log a refusal.
	if w, ok := ctx.Value(gateKey{g}).(*writeCtx); ok {
		return g.commitNested(w, ctx, t, write)
	}
	start := g.commitStart()
	if err := ctx.Err(); err != nil {
		return err
	}
	if !g.writing.TryLock() {
		// A stale token is refused at once rather than after the wait.
		if floor := g.loadFloor(); !admits(floor, t) {
			return g.refuse(t, floor, nil, start)
		}
		if err := lockCtx(ctx, &g.writing); err != nil {
			return err
		}
	}
	w, floor, ok := g.raise(t)
	if !ok {
		g.writing.Unlock()
		return g.refuse(t, floor, nil, start)
	}
	if w == nil {
		w = g.ctxs.new() // under writing
	}
	return g.runWrite(ctx, t, floor, write, w, nil, start, &g.writing)
}

// checkCall refuses a Commit before any judgement: a zero gate, a nil ctx
// or write, a token for another resource or one no coordinator could have
// issued.
func (g *FenceGate) checkCall(ctx context.Context, t Token, write func(ctx context.Context) error) error {
	switch {
	case g.resource == "":
		return fmt.Errorf("%w: Commit at a zero FenceGate; make one with NewFenceGate", ErrUninitialized)
	case ctx == nil:
		return fmt.Errorf("%w: Commit with a nil context", ErrInvalidRequest)
	case write == nil:
		return fmt.Errorf("%w: Commit with a nil write", ErrInvalidRequest)
	}
	return g.checkToken(t)
}

// checkToken refuses a token for another resource, or one no coordinator
// could have issued.
func (g *FenceGate) checkToken(t Token) error {
	if t.Resource != g.resource {
		return fmt.Errorf("%w: token %v at the gate of %q", ErrWrongResource, t, g.resource)
	}
	return validateToken(t)
}

// commitNested handles a Commit made with the context of w, a write of this
// gate: the enclosing Commit owns the gate, so waiting for it would
// deadlock. Nested Commits on w hold w.nested, so their writes run one at a
// time, and w's write is not over, for the gate, while one is in flight.
func (g *FenceGate) commitNested(w *writeCtx, ctx context.Context, t Token, write func(ctx context.Context) error) error {
	start := g.commitStart()
	if !w.enter() {
		return errEscapedWrite
	}
	if err := lockCtx(ctx, &w.nested); err != nil {
		w.exit()
		return err
	}
	nw, floor, ok := g.raise(t)
	if !ok {
		w.nested.Unlock()
		return g.refuse(t, floor, w, start)
	}
	if nw == nil {
		nw = new(writeCtx) // not from ctxs: writing is the enclosing Commit's, maybe on another goroutine
	}
	return g.runWrite(ctx, t, floor, write, nw, w, start, &w.nested)
}

// runWrite runs an admitted write with w, a context of its own (raise's,
// or one never used before). However write ends, it then marks that context
// returned and waits for the nested Commits write let in, unlocks held
// (which the Commit was admitted under), lets the enclosing write know if
// this one is nested in it, and only then reports the Commit, so that a
// trace hook runs outside the gate.
func (g *FenceGate) runWrite(ctx context.Context, t, floor Token, write func(ctx context.Context) error, w, enclosing *writeCtx, start Instant, held *sync.Mutex) (err error) {
	w.parent, w.gate = ctx, g
	panicked := true
	defer func() {
		w.finish()
		held.Unlock()
		if enclosing != nil {
			enclosing.exit()
		}
		if g.trace != nil && g.trace.Commit != nil {
			g.reportCommit(CommitInfo{Token: t, Admitted: true, Nested: enclosing != nil, Floor: floor, Err: err, Panicked: panicked, Start: start})
		}
	}()
	err = write(w)
	panicked = false
	return err
}

// admits reports whether floor admits a write under t: a higher fence, or
// the floor's own fence from its holder (from anyone, for an initial floor
// nobody has written under).
func admits(floor, t Token) bool {
	return t.Fence > floor.Fence || t.Fence == floor.Fence && (floor.Holder == "" || floor.Holder == t.Holder)
}

// raise judges t against the floor and, if the floor admits t, raises it
// to t. It returns the context of t's write if it made one (see
// raisedWrite), the floor t was judged against, and whether that floor
// admitted t.
//
// The floor moves by compare-and-swap, as Admit and the Commits nested in a
// write may raise it while a Commit judges. A failed swap means the floor
// rose meanwhile, and t is judged again against the new one: the floor is
// never replaced by a lower one, and t is admitted only by the floor it
// replaces.
func (g *FenceGate) raise(t Token) (w *writeCtx, floor Token, ok bool) {
	var rw *raisedWrite
	for {
		p := g.floor.Load()
		floor = *p
		switch {
		case t.Fence == floor.Fence && t.Holder == floor.Holder:
			// The floor already (t has a holder, so not an initial floor): a
			// holder committing again under its lease writes nothing here.
			return nil, floor, true
		case !admits(floor, t):
			return nil, floor, false
		}
		if rw == nil {
			rw = g.newRaised(t)
		}
		if g.floor.CompareAndSwap(p, &rw.floor) {
			return &rw.w, floor, true
		}
	}
}

// raisedWrite is what a Commit that raises the floor needs: the write's
// context and the Token the floor then points at, side by side, so that
// raising costs no allocation of its own. The price is that the write's
// context stays reachable (not usable: it has returned) until the floor
// moves on, one per gate.
type raisedWrite struct {
	w     writeCtx
	floor Token
}

// newRaised returns a raisedWrite for a raise of the floor to t, never
// used before, carved from the gate's chunk under mu (Commits and Admit
// may raise at once): a gate allocates once per chunkLen raises. The
// chunk stays reachable while the floor, or a context kept past its
// write, points into it.
func (g *FenceGate) newRaised(t Token) *raisedWrite {
	g.mu.Lock()
	rw := g.raised.new()
	g.mu.Unlock()
	rw.floor = t
	return rw
}

// loadFloor reads the floor: the zero Token at a zero FenceGate.
func (g *FenceGate) loadFloor() Token {
	if p := g.floor.Load(); p != nil {
		return *p
	}
	return Token{}
}

// refuse logs the refusal of t by floor, then, holding nothing, lets the
// write it was nested in know it has returned (enclosing, nil if it was
// not nested), reports it and returns its error.
func (g *FenceGate) refuse(t, floor Token, enclosing *writeCtx, start Instant) error {
	g.mu.Lock()
	r := g.logLocked(t, floor)
	g.mu.Unlock()
	if enclosing != nil {
		enclosing.exit()
	}
	return g.refused(t, floor, r, enclosing != nil, start)
}

// logLocked logs the refusal of t by floor. The caller holds g.mu.
func (g *FenceGate) logLocked(t, floor Token) Rejection {
	return g.log.add(Rejection{
		Resource: g.resource, Holder: t.Holder, Fence: t.Fence,
		FloorHolder: floor.Holder, FloorFence: floor.Fence,
	})
}

// refused reports the logged refusal r of t by floor, once nothing is held
// for it, and returns its error.
func (g *FenceGate) refused(t, floor Token, r Rejection, nested bool, start Instant) error {
	err := RejectionError(r)
	if g.trace != nil && g.trace.Commit != nil {
		g.reportCommit(CommitInfo{Token: t, Nested: nested, Floor: floor, Rejection: r, Err: err, Start: start})
	}
	return err
}

// Admit raises the floor to t without writing: a coordinator's push at
// reassignment, which closes the window in which a stale holder could write
// before the new holder has. It never waits for a running write. An Admit
// below the floor changes nothing, is not logged, and returns a
// *StaleFenceError whose Seq is 0; the floor's fence under another holder
// returns ErrTokenConflict, also unlogged.
func (g *FenceGate) Admit(t Token) error {
	if g.resource == "" {
		return fmt.Errorf("%w: Admit at a zero FenceGate; make one with NewFenceGate", ErrUninitialized)
	}
	if err := g.checkToken(t); err != nil {
		return err
	}
	_, floor, ok := g.raise(t) // the context it may make never runs a write
	after := g.loadFloor()
	var err error
	if !ok {
		err = RejectionError(Rejection{
			Resource: g.resource, Holder: t.Holder, Fence: t.Fence,
			FloorHolder: floor.Holder, FloorFence: floor.Fence,
		})
	}
	if g.trace != nil && g.trace.Admit != nil {
		g.trace.Admit(AdmitInfo{Token: t, Raised: ok && floor != t, Floor: after, Err: err, At: g.now()})
	}
	return err
}

// WouldAdmit reports whether Commit would admit t at this instant.
//
// ADVISORY, like Lease.HasExpired: the floor may rise between this answer and
// a write. Never branch a write on it; Commit is the check.
func (g *FenceGate) WouldAdmit(t Token) bool {
	if g.resource == "" || g.checkToken(t) != nil {
		return false
	}
	return admits(g.loadFloor(), t)
}

// Floor returns the highest token admitted: the zero Token if none, or
// Token{Resource, Fence: f} for an initial floor f nobody has written under.
func (g *FenceGate) Floor() Token { return g.loadFloor() }

// Rejections returns a copy of the retained refusals, oldest first: the
// newest WithRejectionLog (default DefaultRejectionLog) of them. Their Seqs
// are consecutive and the last one is RejectionCount().
func (g *FenceGate) Rejections() []Rejection {
	rs, _ := g.RejectionsSince(0)
	return rs
}

// RejectionsSince returns a copy of the retained refusals whose Seq is
// above seq, oldest first, and how many refusals above seq are no longer
// retained (missed). A reader that passes the Seq of the last refusal it
// saw reads each refusal once, and learns from missed how many it lost to
// the log's bound.
func (g *FenceGate) RejectionsSince(seq uint64) (rs []Rejection, missed uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.log.since(seq)
}

// RejectionCount returns the number of refusals logged so far, retained or
// not, which is also the Seq of the newest one.
func (g *FenceGate) RejectionCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return int(g.log.total)
}

// commitStart is the Start of a Commit's report: a reading of the gate's
// clock if there is a hook to report to, else the zero Instant.
func (g *FenceGate) commitStart() Instant {
	if g.trace == nil || g.trace.Commit == nil {
		return Instant{}
	}
	return g.now()
}

func (g *FenceGate) now() Instant {
	if g.clock == nil {
		return Instant{}
	}
	t, _ := g.clock.Now() // a failed reading stamps the report with no instant
	return t
}

func (g *FenceGate) reportCommit(info CommitInfo) {
	info.End = g.now()
	g.trace.Commit(info)
}

// rejectionLog is a gate's refusal log: every refusal is counted, the
// newest limit are retained. It is guarded by the gate's mu.
type rejectionLog struct {
	limit int    // refusals retained at most; 0 (a zero gate) means DefaultRejectionLog
	total uint64 // refusals logged: the Seq of the newest
	// ring holds the retained refusals. It grows to limit; after that the
	// refusal with Seq s sits at ring[(s-1)%limit].
	ring []Rejection
}

// add numbers r with the next Seq, retains it, and returns it.
func (l *rejectionLog) add(r Rejection) Rejection {
	limit := l.limit
	if limit == 0 {
		limit = DefaultRejectionLog
	}
	l.total++
	r.Seq = l.total
	if len(l.ring) < limit {
		l.ring = append(l.ring, r)
	} else {
		l.ring[(r.Seq-1)%uint64(limit)] = r
	}
	return r
}

// since returns copies of the retained refusals with Seq > seq, oldest
// first, and how many such refusals are no longer retained.
func (l *rejectionLog) since(seq uint64) (rs []Rejection, missed uint64) {
	if seq >= l.total {
		return nil, 0
	}
	// The Seq of the oldest retained; seq < total, so seq+1 cannot overflow.
	oldest := l.total - uint64(len(l.ring)) + 1
	if seq+1 < oldest {
		missed = oldest - (seq + 1)
		seq = oldest - 1
	}
	rs = make([]Rejection, 0, l.total-seq)
	n := uint64(len(l.ring))
	for s := seq + 1; s <= l.total; s++ {
		rs = append(rs, l.ring[(s-1)%n])
	}
	return rs, missed
}
