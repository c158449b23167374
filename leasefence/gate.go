package leasefence

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"
)

// FenceGate lives at the resource and admits a write only if its token's
// fence is not below the highest fence it has admitted (the floor). The
// check and the write are one operation: the floor is raised before the
// write callback runs, and admitted writes never run at the same time, so
// nothing can happen between the check and the write. Every refusal is
// logged: the log is the evidence that two holders overlapped.
//
// A FenceGate is safe for concurrent use. Floor, WouldAdmit, Rejections and
// Admit never wait for a running write.
type FenceGate struct {
	resource string
	clock    Clock      // optional: stamps trace reports
	trace    *GateTrace // optional

	// floor is the highest token admitted; its Holder is "" for an initial
	// floor nobody has written under yet. The Token it points to is never
	// modified: raising the floor swaps in a new one, by compare-and-swap
	// against the floor the token was judged under (see raise), so readers
	// never wait and committing under the current floor allocates nothing.
	floor atomic.Pointer[Token]

	// state is who may write: the writing bit is held by the one Commit
	// that owns the gate, from before its check until its write has
	// returned (or it was refused); the queued bit is set while Commits wait
	// in waiters. Taking and giving up
	// an uncontended gate are one compare-and-swap each (0 <-> writing); a
	// set queued bit sends both to the paths under mu, and it changes only
	// under mu, so while it is set nothing outside mu changes state.
	state atomic.Uint32

	mu         sync.Mutex      // guards rejections and waiters, and every change to the queued bit
	rejections []Rejection     // Seq order
	waiters    []chan struct{} // Commits waiting for the gate, in the order they are woken

	// wctx is the context handed to the running write. It is reused for
	// every write, which is why a ctx that escapes its write is misuse.
	wctx writeCtx

	// floors supplies the Tokens a Commit raises the floor to. Only the
	// Commit that holds the writing bit touches it, so it needs no lock;
	// Admit, which does not hold that bit, allocates its own.
	floors chunk[Token]
}

// The bits of FenceGate.state.
const (
	writing uint32 = 1 << iota // a Commit owns the gate
	queued                     // FenceGate.waiters is not empty
)

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

// NewFenceGate returns a gate for resource. An empty resource panics.
func NewFenceGate(resource string, opts ...GateOption) *FenceGate {
	if resource == "" {
		panic("leasefence: NewFenceGate with an empty resource")
	}
	g := &FenceGate{resource: resource}
	g.floor.Store(&Token{})
	g.wctx.gate = g
	g.wctx.Context = writeReturned
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
// logged; a token for another resource is ErrWrongResource and not logged.
//
// Admitted writes run one at a time. A Commit that must wait for a running
// write returns ctx.Err() if ctx is done first, with no write and the floor
// untouched; a stale token is refused without waiting. A panic in write
// propagates after the gate has been left usable.
//
// write receives a context derived from ctx. A Commit to the same gate made
// from inside write with that context (or one derived from it) is handled in
// place rather than deadlocking: with an older fence it is refused and
// logged like any other. That context is valid only until write returns:
// afterwards it reports Canceled and no longer marks the write, so a Commit
// made with it is refused with an error matching context.Canceled, and
// writes nothing. Keeping it is misuse, and handing it to a goroutine that
// outlives write races with the gate's next write, which reuses it: while
// that write runs, the escaped context cannot be told from its own.
func (g *FenceGate) Commit(ctx context.Context, t Token, write func(ctx context.Context) error) error {
	if !sameString(t.Resource, g.resource) || t.Holder == "" || t.Fence == 0 {
		return g.badToken(t)
	}
	if g.trace != nil || !g.state.CompareAndSwap(0, writing) {
		return g.commit(ctx, t, write)
	}
	// The uncontended, untraced path: commit's, with nothing to report,
	// kept apart so that it stays small (no trace values, a small frame).
	if g.marks(ctx) || ctx.Err() != nil {
		return g.leaveWith(g.ownedCtxErr(ctx))
	}
	if floor := g.floor.Load(); t.Fence != floor.Fence || !sameString(t.Holder, floor.Holder) {
		// t is not the floor already (t has a holder, so an initial floor
		// never matches): judge it and raise the floor to it.
		if _, ok := g.raise(t, &g.floors); !ok {
			return g.refuseOwned(t, Instant{})
		}
	}
	g.wctx.Context = ctx
	g.wctx.running = true
	defer g.endWrite()
	return write(&g.wctx)
}

// commit is Commit for a traced gate, or for one it found taken.
func (g *FenceGate) commit(ctx context.Context, t Token, write func(ctx context.Context) error) error {
	var start Instant
	observe := g.trace != nil && g.trace.Commit != nil
	if observe {
		start = g.now()
	}
	if !g.state.CompareAndSwap(0, writing) {
		// The gate is taken, or Commits are queued for it.
		if g.marks(ctx) {
			// Only the running write's own goroutine (or one it waits for)
			// can read running without a race; anyone else holds an
			// escaped context, which is misuse.
			if g.wctx.running {
				return g.commitNested(ctx, t, write, start)
			}
			return errEscapedWrite
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if !admits(g.floor.Load(), t.Fence, t.Holder) {
			return g.refused(g.logRefusal(t), false, start)
		}
		if err := g.wait(ctx); err != nil {
			return err
		}
	}
	if err := g.ownedCtxErr(ctx); err != nil {
		return g.leaveWith(err)
	}
	floor, ok := g.raise(t, &g.floors)
	if !ok {
		return g.refuseOwned(t, start)
	}
	g.wctx.Context = ctx
	g.wctx.running = true
	if observe {
		return g.runWriteTraced(t, *floor, write, start)
	}
	defer g.endWrite()
	return write(&g.wctx)
}

// sameString is a == b. A token usually shares its strings' bytes with the
// gate's resource and with the floor's holder (a holder commits with its
// lease's token, again and again), and comparing the pointers first saves
// the uncontended Commit a call per string.
func sameString(a, b string) bool {
	return len(a) == len(b) && (unsafe.StringData(a) == unsafe.StringData(b) || a == b)
}

// leaveWith gives the gate up, for a Commit that took it but will not
// write, and returns err.
func (g *FenceGate) leaveWith(err error) error {
	g.leave()
	return err
}

// refuseOwned logs the refusal of a Commit of t that took the gate, gives
// the gate up, then reports the refusal and returns it.
func (g *FenceGate) refuseOwned(t Token, start Instant) error {
	r := g.logRefusal(t)
	g.leave()
	return g.refused(r, false, start)
}

// ownedCtxErr is the error, if any, for a Commit with ctx that has taken
// the gate. No write is running, so a ctx that marks this gate comes from a
// write that has returned.
func (g *FenceGate) ownedCtxErr(ctx context.Context) error {
	if g.marks(ctx) {
		return errEscapedWrite
	}
	return ctx.Err()
}

// badToken explains why t is refused before any judgement: it is for
// another resource, or no coordinator could have issued it. The callers
// test for these inline, field by field, because copying a Token into a
// helper costs as much as the rest of an uncontended Commit.
func (g *FenceGate) badToken(t Token) error {
	if t.Resource != g.resource {
		return fmt.Errorf("%w: token %v at the gate of %q", ErrWrongResource, t, g.resource)
	}
	return invalidToken(t)
}

// marks reports whether ctx is, or derives from, a write context of g:
// the running write's, or an escaped one.
func (g *FenceGate) marks(ctx context.Context) bool {
	return ctx.Value(gateKey{g}) != nil
}

// commitNested handles a Commit made from inside a running write of this
// gate: the caller already owns the gate, so waiting would deadlock.
func (g *FenceGate) commitNested(ctx context.Context, t Token, write func(ctx context.Context) error, start Instant) error {
	floorp, ok := g.raise(t, &g.floors)
	if !ok {
		return g.refused(g.logRefusal(t), true, start)
	}
	floor := *floorp
	panicked := true
	defer func() {
		if panicked {
			g.reportCommit(CommitInfo{Token: t, Admitted: true, Nested: true, Floor: floor, Panicked: true, Start: start})
		}
	}()
	err := write(ctx)
	panicked = false
	g.reportCommit(CommitInfo{Token: t, Admitted: true, Nested: true, Floor: floor, Err: err, Start: start})
	return err
}

// runWriteTraced runs an admitted write while the caller owns the gate,
// reports it, and gives the gate up however write ends.
func (g *FenceGate) runWriteTraced(t, floor Token, write func(ctx context.Context) error, start Instant) (err error) {
	panicked := true
	defer func() {
		g.endWrite()
		if panicked {
			g.reportCommit(CommitInfo{Token: t, Admitted: true, Floor: floor, Panicked: true, Start: start})
		}
	}()
	err = write(&g.wctx)
	panicked = false
	g.reportCommit(CommitInfo{Token: t, Admitted: true, Floor: floor, Err: err, Start: start})
	return err
}

// admits reports whether floor admits a write under t: a higher fence, or
// the floor's own fence from its holder (from anyone, for an initial floor
// nobody has written under).
func admits(floor *Token, fence Fence, holder string) bool {
	return fence > floor.Fence || fence == floor.Fence && (floor.Holder == "" || floor.Holder == holder)
}

// raise judges t against the floor and, if the floor admits t, raises it to
// t. Judging and raising are one step: the new floor is swapped in only if
// the floor is still the one t was judged against, and t is judged again
// otherwise, so a concurrent Admit (or nested Commit) can never be undone
// by it. raise returns the floor t was judged against and whether it
// admitted t. The new floor comes from spare when the caller holds the
// writing bit (and so owns spare), otherwise from the heap.
func (g *FenceGate) raise(t Token, spare *chunk[Token]) (floor *Token, ok bool) {
	var next *Token
	for {
		floor = g.floor.Load()
		switch {
		case !admits(floor, t.Fence, t.Holder):
			return floor, false
		case t.Fence == floor.Fence && floor.Holder != "":
			return floor, true // t is the floor already
		}
		if next == nil {
			if spare != nil {
				next = spare.new()
			} else {
				next = new(Token)
			}
			*next = Token{Resource: t.Resource, Holder: t.Holder, Fence: t.Fence}
		}
		if g.floor.CompareAndSwap(floor, next) {
			return floor, true
		}
	}
}

// logRefusal logs the refusal of a Commit of t. The caller saw the floor
// refuse t. The floor only rises, and at one fence only from no holder to a
// holder, so the floor read here, which the log names, refuses t too;
// reading it under mu keeps the log's floors in Seq order.
func (g *FenceGate) logRefusal(t Token) Rejection {
	g.mu.Lock()
	defer g.mu.Unlock()
	floor := g.floor.Load()
	r := Rejection{
		Seq:      uint64(len(g.rejections)) + 1,
		Resource: g.resource, Holder: t.Holder, Fence: t.Fence,
		FloorHolder: floor.Holder, FloorFence: floor.Fence,
	}
	g.rejections = append(g.rejections, r)
	return r
}

// refused reports a logged refusal, once the gate is no longer owned for
// it, and returns its error.
func (g *FenceGate) refused(r Rejection, nested bool, start Instant) error {
	err := refusal(r)
	if g.trace != nil && g.trace.Commit != nil {
		floor := Token{Resource: r.Resource, Holder: r.FloorHolder, Fence: r.FloorFence}
		g.reportCommit(CommitInfo{Token: Token{Resource: r.Resource, Holder: r.Holder, Fence: r.Fence},
			Nested: nested, Floor: floor, Rejection: r, Err: err, Start: start})
	}
	return err
}

// refusal is the error for r: stale below the floor, a conflict at it.
func refusal(r Rejection) error {
	if r.Fence < r.FloorFence {
		return &StaleFenceError{r}
	}
	return &tokenConflictError{r}
}

// endWrite gives the gate up after a write, however the write ended.
func (g *FenceGate) endWrite() {
	g.wctx.running = false
	g.wctx.Context = writeReturned
	g.leave()
}

// leave gives the gate up: one compare-and-swap unless Commits are queued.
func (g *FenceGate) leave() {
	if !g.state.CompareAndSwap(writing, 0) {
		g.leaveQueued()
	}
}

// leaveQueued gives the gate up and wakes the oldest queued Commit. Woken
// Commits compete with new arrivals, as with sync.Mutex, which keeps the
// uncontended path to one compare-and-swap per side of the write.
func (g *FenceGate) leaveQueued() {
	g.mu.Lock()
	g.state.And(^writing)
	g.wakeLocked()
	g.mu.Unlock()
}

// wakeLocked wakes the oldest queued Commit if the gate is free.
func (g *FenceGate) wakeLocked() {
	if len(g.waiters) == 0 || g.state.Load()&writing != 0 {
		return
	}
	ch := g.waiters[0]
	g.waiters[0] = nil
	g.waiters = g.waiters[1:]
	if len(g.waiters) == 0 {
		g.state.And(^queued)
	}
	ch <- struct{}{} // buffered and sent to once per queueing: never blocks
}

// wait takes the gate for a Commit that found it taken: it queues until the
// owner leaves and wakes it, then competes for the gate, going back to the
// head of the queue if a new arrival took it first. If ctx is done first it
// returns ctx.Err(), owning nothing and passing on a wake-up it received as
// it gave up.
func (g *FenceGate) wait(ctx context.Context) error {
	var ch chan struct{}
	g.mu.Lock()
	for {
		s := g.state.Load()
		if s&writing == 0 {
			if g.state.CompareAndSwap(s, s|writing) {
				g.mu.Unlock()
				return nil
			}
			continue // a Commit on the fast path took it first
		}
		// queued is set in the same step that sees the gate taken, so the
		// owner cannot leave by the fast path without this waiter seeing it.
		if s&queued == 0 && !g.state.CompareAndSwap(s, s|queued) {
			continue // the owner left first
		}
		if ch == nil {
			ch = make(chan struct{}, 1)
			g.waiters = append(g.waiters, ch)
		} else {
			g.waiters = slices.Insert(g.waiters, 0, ch)
		}
		g.mu.Unlock()
		select {
		case <-ch:
			g.mu.Lock()
		case <-ctx.Done():
			g.mu.Lock()
			if i := slices.Index(g.waiters, ch); i >= 0 {
				g.waiters = slices.Delete(g.waiters, i, i+1)
				if len(g.waiters) == 0 {
					g.state.And(^queued)
				}
			} else {
				g.wakeLocked() // woken as we gave up: pass it on
			}
			g.mu.Unlock()
			return ctx.Err()
		}
	}
}

// Admit raises the floor to t without writing: a coordinator's push at
// reassignment, which closes the window in which a stale holder could write
// before the new holder has. It never waits for a running write. An Admit
// below the floor changes nothing, is not logged, and returns a
// *StaleFenceError whose Seq is 0; the floor's fence under another holder
// returns ErrTokenConflict, also unlogged.
func (g *FenceGate) Admit(t Token) error {
	if t.Resource != g.resource || t.Holder == "" || t.Fence == 0 {
		return g.badToken(t)
	}
	floor, ok := g.raise(t, nil)
	var err error
	raised := false
	after := t
	if ok {
		raised = *floor != t
	} else {
		after = *floor
		err = refusal(Rejection{
			Resource: g.resource, Holder: t.Holder, Fence: t.Fence,
			FloorHolder: floor.Holder, FloorFence: floor.Fence,
		})
	}
	if g.trace != nil && g.trace.Admit != nil {
		g.trace.Admit(AdmitInfo{Token: t, Raised: raised, Floor: after, Err: err, At: g.now()})
	}
	return err
}

// WouldAdmit reports whether Commit would admit t at this instant.
//
// ADVISORY, like Lease.HasExpired: the floor may rise between this answer and
// a write. Never branch a write on it; Commit is the check.
func (g *FenceGate) WouldAdmit(t Token) bool {
	return t.Resource == g.resource && t.Holder != "" && t.Fence != 0 && admits(g.floor.Load(), t.Fence, t.Holder)
}

// Floor returns the highest token admitted: the zero Token if none, or
// Token{Resource, Fence: f} for an initial floor f nobody has written under.
func (g *FenceGate) Floor() Token {
	return *g.floor.Load()
}

// Rejections returns a copy of the refusal log, oldest first.
func (g *FenceGate) Rejections() []Rejection {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]Rejection(nil), g.rejections...)
}

// RejectionCount returns the number of refusals logged so far, which is also
// the Seq of the newest one.
func (g *FenceGate) RejectionCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.rejections)
}

func (g *FenceGate) now() Instant {
	if g.clock == nil {
		return Instant{}
	}
	t, _ := g.clock.Now() // a failed reading stamps the report with no instant
	return t
}

func (g *FenceGate) reportCommit(info CommitInfo) {
	if g.trace == nil || g.trace.Commit == nil {
		return
	}
	info.End = g.now()
	g.trace.Commit(info)
}

// gateKey marks, in a write's context, the gate whose write it is.
type gateKey struct{ g *FenceGate }

// writeCtx is the context a write callback receives: the Commit's ctx, plus
// the mark that lets a nested Commit of the same gate be handled in place.
type writeCtx struct {
	context.Context
	gate *FenceGate
	// running is true while the write runs. The mark is found in any
	// context derived from this one, but it means "nested" only while
	// running: once the write returns, it means "escaped".
	running bool
}

func (w *writeCtx) Value(key any) any {
	if k, ok := key.(gateKey); ok && k.g == w.gate {
		return w
	}
	return w.Context.Value(key)
}

// writeReturned stands in for the Commit's ctx once a write has returned,
// so a context that escaped its write reports Canceled instead of carrying
// the next write's deadline.
var writeReturned = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()
