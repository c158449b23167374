package leasefence

import (
	"context"
	"errors"
	"fmt"
	"sync"
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

	mu         sync.Mutex
	floor      Token // Holder is "" for an initial floor nobody has written under yet
	rejections []Rejection
	busy       bool            // an admitted write is running
	waiters    []chan struct{} // Commits waiting for busy to clear, oldest first

	// wctx is the context handed to the running write. It is reused for
	// every write, which is why a ctx that escapes its write is misuse.
	wctx writeCtx
}

// GateOption configures a FenceGate.
type GateOption func(*FenceGate)

// WithInitialFloor refuses tokens below f from the start, to resume after a
// restart of the resource. The initial floor has no holder: fence f itself
// is admitted from any holder.
func WithInitialFloor(f Fence) GateOption {
	return func(g *FenceGate) {
		if f > 0 {
			g.floor = Token{Resource: g.resource, Fence: f}
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
	g.wctx.gate = g
	g.wctx.Context = writeReturned
	for _, o := range opts {
		o(g)
	}
	return g
}

// Resource returns the resource the gate guards.
func (g *FenceGate) Resource() string { return g.resource }

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
// from inside write with that context is handled in place rather than
// deadlocking: with an older fence it is refused and logged like any other.
// That context is valid only until write returns: keeping it, or handing it
// to a goroutine that outlives write, is misuse (it reports Canceled
// afterwards, and racing it with the next write is a data race).
func (g *FenceGate) Commit(ctx context.Context, t Token, write func(ctx context.Context) error) error {
	if t.Resource != g.resource {
		return fmt.Errorf("%w: token %v at the gate of %q", ErrWrongResource, t, g.resource)
	}
	if err := validateToken(t); err != nil {
		return err
	}
	var start Instant
	observe := g.trace != nil && g.trace.Commit != nil
	if observe {
		start = g.now()
	}
	if ctx.Value(gateKey{g}) != nil {
		return g.commitNested(ctx, t, write, start)
	}
	if err := ctx.Err(); err != nil {
		return err
	}

	g.mu.Lock()
	var floor Token // the floor t is judged against, for the trace only
	if observe {
		floor = g.floor
	}
	if err := g.judgeLocked(t); err != nil {
		g.mu.Unlock()
		g.reportRefusal(t, floor, err, false, start)
		return err
	}
	for g.busy {
		if err := g.waitLocked(ctx); err != nil {
			return err
		}
		// The floor may have risen while we waited.
		if observe {
			floor = g.floor
		}
		if err := g.judgeLocked(t); err != nil {
			g.wakeLocked()
			g.mu.Unlock()
			g.reportRefusal(t, floor, err, false, start)
			return err
		}
	}
	g.busy = true
	g.raiseLocked(t)
	g.mu.Unlock()

	g.wctx.Context = ctx
	if observe {
		return g.runWriteTraced(t, floor, write, start)
	}
	// The untraced path passes and builds no trace values: at this size
	// they would cost as much as the rest of Commit.
	defer g.endWrite()
	return write(&g.wctx)
}

// commitNested handles a Commit made from inside a running write of this
// gate: the caller already owns the gate, so waiting would deadlock.
func (g *FenceGate) commitNested(ctx context.Context, t Token, write func(ctx context.Context) error, start Instant) error {
	g.mu.Lock()
	floor := g.floor
	err := g.judgeLocked(t)
	if err == nil {
		g.raiseLocked(t)
	}
	g.mu.Unlock()
	if err != nil {
		g.reportRefusal(t, floor, err, true, start)
		return err
	}
	panicked := true
	defer func() {
		if panicked {
			g.reportCommit(CommitInfo{Token: t, Admitted: true, Nested: true, Floor: floor, Panicked: true, Start: start})
		}
	}()
	err = write(ctx)
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

// endWrite gives the gate up after a write, however the write ended.
func (g *FenceGate) endWrite() {
	g.wctx.Context = writeReturned
	g.mu.Lock()
	g.busy = false
	g.wakeLocked()
	g.mu.Unlock()
}

// waitLocked waits, with g.mu held on entry and on a nil return, until a
// running write ends. On ctx done it returns ctx.Err() with g.mu released.
func (g *FenceGate) waitLocked(ctx context.Context) error {
	ch := make(chan struct{}, 1)
	g.waiters = append(g.waiters, ch)
	g.mu.Unlock()
	select {
	case <-ch:
		g.mu.Lock()
		return nil
	case <-ctx.Done():
		g.mu.Lock()
		if !g.dropWaiterLocked(ch) {
			// We were woken as we gave up: pass the wake-up on.
			g.wakeLocked()
		}
		g.mu.Unlock()
		return ctx.Err()
	}
}

// wakeLocked wakes the oldest waiter if the gate is free. Woken waiters
// compete with new arrivals, as with sync.Mutex, which keeps the
// uncontended path to one lock round trip per side of the write.
func (g *FenceGate) wakeLocked() {
	if g.busy || len(g.waiters) == 0 {
		return
	}
	ch := g.waiters[0]
	g.waiters[0] = nil
	g.waiters = g.waiters[1:]
	ch <- struct{}{}
}

func (g *FenceGate) dropWaiterLocked(ch chan struct{}) bool {
	for i, w := range g.waiters {
		if w == ch {
			g.waiters = append(g.waiters[:i], g.waiters[i+1:]...)
			return true
		}
	}
	return false
}

// judgeLocked returns nil if t may write, and otherwise logs and returns the
// refusal.
func (g *FenceGate) judgeLocked(t Token) error {
	switch {
	case t.Fence < g.floor.Fence:
		return &StaleFenceError{g.logLocked(t)}
	case t.Fence == g.floor.Fence && g.floor.Holder != "" && t.Holder != g.floor.Holder:
		return &tokenConflictError{g.logLocked(t)}
	}
	return nil
}

func (g *FenceGate) logLocked(t Token) Rejection {
	r := g.rejectionLocked(t)
	r.Seq = uint64(len(g.rejections)) + 1
	g.rejections = append(g.rejections, r)
	return r
}

func (g *FenceGate) rejectionLocked(t Token) Rejection {
	return Rejection{
		Resource: g.resource, Holder: t.Holder, Fence: t.Fence,
		FloorHolder: g.floor.Holder, FloorFence: g.floor.Fence,
	}
}

func (g *FenceGate) raiseLocked(t Token) {
	if t.Fence > g.floor.Fence || g.floor.Holder == "" {
		g.floor = t
	}
}

// Admit raises the floor to t without writing: a coordinator's push at
// reassignment, which closes the window in which a stale holder could write
// before the new holder has. It never waits for a running write. An Admit
// below the floor changes nothing, is not logged, and returns a
// *StaleFenceError whose Seq is 0; the floor's fence under another holder
// returns ErrTokenConflict, also unlogged.
func (g *FenceGate) Admit(t Token) error {
	if t.Resource != g.resource {
		return fmt.Errorf("%w: token %v at the gate of %q", ErrWrongResource, t, g.resource)
	}
	if err := validateToken(t); err != nil {
		return err
	}
	g.mu.Lock()
	var err error
	raised := false
	switch {
	case t.Fence < g.floor.Fence:
		err = &StaleFenceError{g.rejectionLocked(t)}
	case t.Fence == g.floor.Fence && g.floor.Holder != "" && t.Holder != g.floor.Holder:
		err = &tokenConflictError{g.rejectionLocked(t)}
	default:
		raised = g.floor != t
		g.raiseLocked(t)
	}
	floor := g.floor
	g.mu.Unlock()
	if g.trace != nil && g.trace.Admit != nil {
		g.trace.Admit(AdmitInfo{Token: t, Raised: raised, Floor: floor, Err: err, At: g.now()})
	}
	return err
}

// WouldAdmit reports whether Commit would admit t at this instant.
//
// ADVISORY, like Lease.HasExpired: the floor may rise between this answer and
// a write. Never branch a write on it; Commit is the check.
func (g *FenceGate) WouldAdmit(t Token) bool {
	if t.Resource != g.resource || validateToken(t) != nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return t.Fence > g.floor.Fence ||
		t.Fence == g.floor.Fence && (g.floor.Holder == "" || g.floor.Holder == t.Holder)
}

// Floor returns the highest token admitted: the zero Token if none, or
// Token{Resource, Fence: f} for an initial floor f nobody has written under.
func (g *FenceGate) Floor() Token {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.floor
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

func (g *FenceGate) reportRefusal(t, floor Token, err error, nested bool, start Instant) {
	if g.trace == nil || g.trace.Commit == nil {
		return
	}
	info := CommitInfo{Token: t, Nested: nested, Floor: floor, Err: err, Start: start}
	var stale *StaleFenceError
	var conflict *tokenConflictError
	switch {
	case errors.As(err, &stale):
		info.Rejection = stale.Rejection
	case errors.As(err, &conflict):
		info.Rejection = conflict.Rejection
	}
	g.reportCommit(info)
}

func (g *FenceGate) reportCommit(info CommitInfo) {
	if g.trace == nil || g.trace.Commit == nil {
		return
	}
	info.End = g.now()
	g.trace.Commit(info)
}

// gateKey marks, in a write's context, the gate whose write is running.
type gateKey struct{ g *FenceGate }

// writeCtx is the context a write callback receives: the Commit's ctx, plus
// the mark that lets a nested Commit of the same gate be handled in place.
type writeCtx struct {
	context.Context
	gate *FenceGate
}

func (w *writeCtx) Value(key any) any {
	if k, ok := key.(gateKey); ok && k.g == w.gate {
		return w.gate
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
