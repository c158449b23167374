package leasefence_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence"
)

// FuzzGate decodes the input into a sequence of gate operations, replays it
// against a FenceGate and against a model of the floor, and checks:
//   - every decision agrees with the model (admit iff fence > floor, or
//     fence == floor and the floor has no holder or the same holder);
//   - the admitted fences, in the order the writes ran, never decrease;
//   - every refused Commit is the newest entry of Rejections, with the next
//     Seq, both holders and both fences;
//   - Admit refusals are never logged, and nothing else is either;
//   - a write that fans out to goroutines, each committing with the write's
//     ctx, leaves the floor at the highest fence it was given, runs the
//     nested writes one at a time (the race detector watches the slice they
//     append to) and logs exactly the nested commits it refused.
//
// Input: byte 0 is the initial floor (0..3); then each operation is two
// bytes, kind and token (a nested commit takes one more byte for the nested
// token; a fan-out takes a count n and then n nested tokens).
func FuzzGate(f *testing.F) {
	f.Add([]byte{0, 0, 0x0a, 0, 0x09, 0, 0x12})
	f.Add([]byte{2, 0, 0x01, 1, 0x11, 0, 0x0a, 2, 0x12, 0x09})
	f.Add([]byte{0, 2, 0x1b, 0x03, 0, 0x1b, 1, 0x1c, 2, 0x03, 0x1b, 3, 0x02})
	f.Add([]byte{3, 0, 0x03, 0, 0x13, 0, 0x0b, 1, 0x04, 0, 0x04, 2, 0x04, 0x0c})
	f.Add([]byte{1, 4, 0x05, 2, 0x0d, 0x05, 2, 0x0d, 0x15, 1, 0x20, 0, 0x0d})
	f.Add([]byte{0, 4, 0x00, 8, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x0f, 0x17, 0, 0x02})
	f.Add([]byte{1, 4, 0x02, 11, 0x07, 0x0f, 0x17, 0x06, 0x0e, 0x16, 0x01, 0x02, 0x03, 0x07, 0x0f, 0x17, 4, 0x01, 2, 0x03})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		if len(data) > 300 {
			data = data[:300]
		}
		initial := leasefence.Fence(data[0] % 4)
		data = data[1:]
		g := leasefence.NewFenceGate("r", leasefence.WithInitialFloor(initial))
		ctx := context.Background()

		// The model: the floor's fence and holder ("" for none yet).
		floorFence, floorHolder := initial, ""
		admits := func(tk leasefence.Token) bool {
			return tk.Fence > floorFence || tk.Fence == floorFence && (floorHolder == "" || floorHolder == tk.Holder)
		}
		var written []leasefence.Fence // fences of the writes, in the order they ran
		var logged uint64

		decode := func(b byte) leasefence.Token {
			return tok("r", fmt.Sprint("h", (b>>3)%3), leasefence.Fence(1+b%8))
		}
		// commit runs one Commit (in ctx) of tk and checks it against the
		// model; inner, if non-nil, runs inside the write.
		//lint:ignore S1021 the closure calls itself, so it must be declared first
		var commit func(ctx context.Context, tk leasefence.Token, inner func(ctx context.Context)) error
		commit = func(ctx context.Context, tk leasefence.Token, inner func(ctx context.Context)) error {
			want := admits(tk)
			wantRej := leasefence.Rejection{Seq: logged + 1, Resource: "r", Holder: tk.Holder, Fence: tk.Fence, FloorHolder: floorHolder, FloorFence: floorFence}
			if g.WouldAdmit(tk) != want {
				t.Fatalf("WouldAdmit(%v) = %v, model says %v (floor %s@%d)", tk, !want, want, floorHolder, floorFence)
			}
			ran := false
			err := g.Commit(ctx, tk, func(ctx context.Context) error {
				ran = true
				written = append(written, tk.Fence)
				if fl := g.Floor(); fl.Fence < tk.Fence {
					t.Fatalf("floor %v below the running write %v", fl, tk)
				}
				if inner != nil {
					inner(ctx)
				}
				return nil
			})
			if want {
				if err != nil || !ran {
					t.Fatalf("Commit(%v) = %v (ran %v), model admits (floor %s@%d)", tk, err, ran, floorHolder, floorFence)
				}
				return nil
			}
			if ran {
				t.Fatalf("refused Commit(%v) ran its write", tk)
			}
			var stale *leasefence.StaleFenceError
			switch {
			case tk.Fence < wantRej.FloorFence:
				if !errors.As(err, &stale) || stale.Rejection != wantRej {
					t.Fatalf("Commit(%v) = %v, want stale %+v", tk, err, wantRej)
				}
			default:
				if !errors.Is(err, leasefence.ErrTokenConflict) {
					t.Fatalf("Commit(%v) = %v, want ErrTokenConflict", tk, err)
				}
			}
			logged++
			log := g.Rejections()
			if uint64(len(log)) != logged || log[len(log)-1] != wantRej {
				t.Fatalf("after refusing %v: log has %d entries, last %+v; want %d, last %+v", tk, len(log), log[len(log)-1], logged, wantRej)
			}
			return err
		}
		// The model's floor moves when the gate admits: before the write.
		raise := func(tk leasefence.Token) {
			if admits(tk) {
				floorFence, floorHolder = tk.Fence, tk.Holder
			}
		}

		for len(data) >= 2 {
			kind, tk := data[0]%5, decode(data[1])
			data = data[2:]
			switch kind {
			case 0: // commit
				want := admits(tk)
				saveF, saveH := floorFence, floorHolder
				commit(ctx, tk, func(context.Context) {
					if g.Floor() != tk {
						t.Fatalf("Floor() inside the write of %v = %v", tk, g.Floor())
					}
				})
				if want {
					floorFence, floorHolder = tk.Fence, tk.Holder
				} else if floorFence != saveF || floorHolder != saveH {
					t.Fatalf("refusal moved the model")
				}
			case 1: // admit
				want := admits(tk)
				before := g.RejectionCount()
				err := g.Admit(tk)
				if want != (err == nil) {
					t.Fatalf("Admit(%v) = %v, model admits %v (floor %s@%d)", tk, err, want, floorHolder, floorFence)
				}
				var stale *leasefence.StaleFenceError
				if errors.As(err, &stale) && stale.Seq != 0 {
					t.Fatalf("Admit refusal with Seq %d", stale.Seq)
				}
				if g.RejectionCount() != before {
					t.Fatalf("Admit(%v) was logged", tk)
				}
				raise(tk)
			case 2: // nested commit, with the write's ctx
				if len(data) == 0 {
					break
				}
				inner := decode(data[0])
				data = data[1:]
				if !admits(tk) {
					commit(ctx, tk, nil)
					break
				}
				commit(ctx, tk, func(wctx context.Context) {
					floorFence, floorHolder = tk.Fence, tk.Holder
					want := admits(inner)
					commit(wctx, inner, nil)
					raise(inner)
					if want && g.Floor() != inner {
						t.Fatalf("nested admit of %v left the floor at %v", inner, g.Floor())
					}
				})
				raise(tk)
			case 3: // commit whose write fails: the floor stays raised
				want := admits(tk)
				err := g.Commit(ctx, tk, func(context.Context) error {
					written = append(written, tk.Fence)
					return errFuzzWrite
				})
				if want {
					if !errors.Is(err, errFuzzWrite) {
						t.Fatalf("failing write of %v = %v", tk, err)
					}
					floorFence, floorHolder = tk.Fence, tk.Holder
				} else {
					if errors.Is(err, errFuzzWrite) || err == nil {
						t.Fatalf("refused %v = %v", tk, err)
					}
					logged++
				}
			case 4: // a write that fans out: nested commits from goroutines
				if len(data) == 0 {
					break
				}
				count := min(1+int(data[0]%12), len(data)-1)
				nested := make([]leasefence.Token, count)
				for i := range nested {
					nested[i] = decode(data[1+i])
				}
				data = data[1+count:]
				if !admits(tk) {
					commit(ctx, tk, nil)
					break
				}
				errs := make([]error, count)
				commit(ctx, tk, func(wctx context.Context) {
					var wg sync.WaitGroup
					for w := range 3 {
						wg.Go(func() {
							for i := w; i < count; i += 3 {
								errs[i] = g.Commit(wctx, nested[i], func(context.Context) error {
									written = append(written, nested[i].Fence)
									return nil
								})
							}
						})
					}
					wg.Wait()
				})
				// Which of two tokens at one fence wins depends on the
				// order the goroutines ran in, but not the floor's fence.
				top, holders := tk.Fence, map[string]bool{tk.Holder: true}
				for _, n := range nested {
					if n.Fence > top {
						top, holders = n.Fence, map[string]bool{}
					}
					if n.Fence == top {
						holders[n.Holder] = true
					}
				}
				fl := g.Floor()
				if fl.Fence != top || !holders[fl.Holder] {
					t.Fatalf("after fanning out %v under %v: Floor() = %v, want fence %d from one of %v", nested, tk, fl, top, holders)
				}
				for i, err := range errs {
					switch {
					case err == nil:
					case errors.Is(err, leasefence.ErrStaleFence), errors.Is(err, leasefence.ErrTokenConflict):
						logged++
					default:
						t.Fatalf("nested Commit(%v) = %v", nested[i], err)
					}
				}
				floorFence, floorHolder = fl.Fence, fl.Holder
			}
			if fl := g.Floor(); fl.Fence != floorFence || fl.Holder != floorHolder {
				t.Fatalf("Floor() = %v, model %s@%d", fl, floorHolder, floorFence)
			}
			if uint64(g.RejectionCount()) != logged {
				t.Fatalf("RejectionCount() = %d, model %d", g.RejectionCount(), logged)
			}
		}
		for n := 1; n < len(written); n++ {
			if written[n] < written[n-1] {
				t.Fatalf("admitted fences went down: %v", written)
			}
		}
		for n, r := range g.Rejections() {
			if r.Seq != uint64(n+1) || r.Fence > r.FloorFence {
				t.Fatalf("rejection %d = %+v", n, r)
			}
		}
	})
}

var errFuzzWrite = errors.New("fuzz: write failed")

// coordModel is a reference model of the coordinator written from the
// contract: per resource the latest lease, and the acquire grants by id.
type coordModel struct {
	ttl    time.Duration
	fence  leasefence.Fence
	leases map[string]*modelLease
	grants map[string]leasefence.Grant
}

type modelLease struct {
	token    leasefence.Token
	expiry   time.Duration
	released bool
}

func (l *modelLease) liveAt(now time.Duration) bool { return l != nil && !l.released && now < l.expiry }

func (m *coordModel) acquire(req leasefence.AcquireRequest, now time.Duration) (leasefence.AcquireOutcome, bool) {
	if g, ok := m.grants[req.RequestID]; ok {
		if g.Token.Holder != req.Holder || g.Token.Resource != req.Resource {
			return leasefence.AcquireOutcome{Reason: leasefence.ReasonRequestConflict}, false
		}
		if l := m.leases[req.Resource]; l.liveAt(now) && l.token == g.Token {
			return leasefence.AcquireOutcome{OK: true, Grant: g}, true
		}
		return leasefence.AcquireOutcome{Reason: leasefence.ReasonStaleRequest}, false
	}
	if l := m.leases[req.Resource]; l.liveAt(now) {
		reason := leasefence.ReasonHeld
		if l.token.Holder == req.Holder {
			reason = leasefence.ReasonAlreadyHeld
		}
		return leasefence.AcquireOutcome{Reason: reason, HeldBy: l.token.Holder, RetryAfter: l.expiry - now}, false
	}
	m.fence++
	l := &modelLease{token: tok(req.Resource, req.Holder, m.fence), expiry: now + m.ttl}
	m.leases[req.Resource] = l
	g := leasefence.Grant{RequestID: req.RequestID, Token: l.token, TTL: m.ttl, CoordinatorExpiresAt: leasefence.At("coordinator", l.expiry)}
	m.grants[req.RequestID] = g
	return leasefence.AcquireOutcome{OK: true, Grant: g}, false
}

func (m *coordModel) classify(t leasefence.Token, now time.Duration) (*modelLease, leasefence.Reason) {
	l := m.leases[t.Resource]
	switch {
	case l == nil || t.Fence > l.token.Fence:
		return nil, leasefence.ReasonUnknown
	case t.Fence < l.token.Fence:
		return nil, leasefence.ReasonSuperseded
	case t.Holder != l.token.Holder:
		return nil, leasefence.ReasonUnknown
	case l.released:
		return nil, leasefence.ReasonReleased
	case now >= l.expiry:
		return nil, leasefence.ReasonExpired
	}
	return l, ""
}

// FuzzCoordinator decodes the input into acquire, retry, renew, release and
// advance operations on 1-3 resources by 1-4 holders, replays them against
// a Coordinator on a ManualClock, and checks every outcome against
// coordModel, plus these invariants tracked from the outcomes alone:
//   - at most one holder is live per resource at any moment: a fresh grant
//     only ever goes to a resource whose last lease had ended;
//   - fences strictly increase across all fresh grants, and IssuedFence
//     follows them; a replay returns the original grant and burns nothing;
//   - renewals keep the fence.
//
// Input: each operation is two bytes: byte 0 picks the operation, the
// holder and the resource; byte 1 is its argument.
func FuzzCoordinator(f *testing.F) {
	f.Add([]byte{0x00, 0, 0x05, 0, 0x04, 3, 0x02, 0, 0x03, 0})
	f.Add([]byte{0x00, 0, 0x04, 5, 0x05, 0, 0x01, 0, 0x02, 0, 0x00, 0})
	f.Add([]byte{0x00, 0, 0x14, 0, 0x28, 0, 0x04, 4, 0x02, 1, 0x03, 2, 0x01, 1, 0x0a, 0})
	f.Add([]byte{0x00, 0, 0x01, 0, 0x04, 2, 0x01, 0, 0x02, 0, 0x04, 5, 0x02, 0, 0x03, 0, 0x01, 0})
	f.Add([]byte{0x05, 0, 0x0a, 0, 0x0f, 0, 0x04, 1, 0x02, 3, 0x03, 7, 0x01, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 400 {
			data = data[:400] // at most 200 operations: no replay-cache eviction
		}
		const ttl = time.Second
		clock := leasefence.NewManualClock("coordinator")
		c := newCoordinator(t, clock, ttl)
		m := &coordModel{ttl: ttl, leases: map[string]*modelLease{}, grants: map[string]leasefence.Grant{}}
		advances := []time.Duration{0, 1, ms(1), ms(100), ms(500), ms(999), ms(1000), ms(1001)}

		var now time.Duration
		var requests []leasefence.AcquireRequest
		var tokens []leasefence.Token
		// Invariant state, from outcomes only.
		type live struct {
			token  leasefence.Token
			expiry time.Duration
			ended  bool
		}
		current := map[string]*live{}
		var maxFence leasefence.Fence
		nextID := 0

		for len(data) >= 2 {
			op, arg := data[0], data[1]
			data = data[2:]
			holder := fmt.Sprint("h", (op/5)%4)
			resource := fmt.Sprint("r", (op/20)%3)
			switch op % 5 {
			case 0, 1: // acquire with a fresh id, or retry an earlier request
				req := leasefence.AcquireRequest{RequestID: fmt.Sprint("id-", nextID), Holder: holder, Resource: resource}
				if op%5 == 1 && len(requests) > 0 {
					req = requests[int(arg)%len(requests)]
					if arg&0x80 != 0 { // the id reused by someone else
						req.Holder, req.Resource = holder, resource
					}
				} else {
					nextID++
					requests = append(requests, req)
				}
				issuedBefore := c.IssuedFence()
				got, err := c.Acquire(req)
				if err != nil {
					t.Fatal(err)
				}
				want, replay := m.acquire(req, now)
				if got != want {
					t.Fatalf("at %v Acquire(%+v)\n got %+v\nwant %+v", now, req, got, want)
				}
				if !got.OK {
					break
				}
				gt := got.Grant.Token
				if replay {
					if c.IssuedFence() != issuedBefore {
						t.Fatalf("replay burned a fence: %d -> %d", issuedBefore, c.IssuedFence())
					}
					break
				}
				if gt.Fence <= maxFence || c.IssuedFence() != gt.Fence {
					t.Fatalf("fresh grant fence %d after %d (IssuedFence %d)", gt.Fence, maxFence, c.IssuedFence())
				}
				maxFence = gt.Fence
				if cur := current[req.Resource]; cur != nil && !cur.ended && now < cur.expiry {
					t.Fatalf("at %v %v granted while %v is live until %v", now, gt, cur.token, cur.expiry)
				}
				current[req.Resource] = &live{token: gt, expiry: now + ttl}
				tokens = append(tokens, gt)
			case 2, 3: // renew or release a known (or doctored) token
				if len(tokens) == 0 {
					break
				}
				tk := tokens[int(arg)%len(tokens)]
				switch arg >> 6 {
				case 1:
					tk.Holder = holder
				case 2:
					tk.Fence++
				}
				wantLease, reason := m.classify(tk, now)
				if op%5 == 2 {
					id := fmt.Sprint("renew-", nextID)
					nextID++
					got, err := c.Renew(leasefence.RenewRequest{RequestID: id, Token: tk})
					if err != nil {
						t.Fatal(err)
					}
					if got.Reason != reason || got.OK != (reason == "") {
						t.Fatalf("at %v Renew(%v) = %+v, model %q", now, tk, got, reason)
					}
					if got.OK {
						wantLease.expiry = now + ttl
						want := leasefence.Grant{RequestID: id, Token: tk, TTL: ttl, CoordinatorExpiresAt: leasefence.At("coordinator", now+ttl)}
						if got.Grant != want {
							t.Fatalf("Renew(%v) grant %+v, want %+v (same fence)", tk, got.Grant, want)
						}
						cur := current[tk.Resource]
						if cur == nil || cur.token != tk || cur.ended || now >= cur.expiry {
							t.Fatalf("renewed %v, which is not the live lease %+v", tk, cur)
						}
						cur.expiry = now + ttl
					}
				} else {
					got, err := c.Release(tk)
					if err != nil {
						t.Fatal(err)
					}
					if got.Reason != reason || got.OK != (reason == "") {
						t.Fatalf("at %v Release(%v) = %+v, model %q", now, tk, got, reason)
					}
					if got.OK {
						wantLease.released = true
						current[tk.Resource].ended = true
					}
				}
			case 4: // advance
				d := advances[int(arg)%len(advances)]
				clock.Advance(d)
				now += d
			}
		}
		if c.IssuedFence() != maxFence || m.fence != maxFence {
			t.Fatalf("IssuedFence() = %d, model %d, seen %d", c.IssuedFence(), m.fence, maxFence)
		}
	})
}
