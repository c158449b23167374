package leasefence_test

// A linearizability check of the gate: real goroutines call Commit, Admit
// and Floor at once, each call is recorded with its call and return times,
// and porcupine searches for an order of the calls, consistent with those
// times, in which a fenced register (below) explains every answer. A
// deliberately broken gate (check, then set, not atomic) is the control: the
// same check must catch it, or it proves nothing.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/leasefence/lab/leasefence"
)

// gateUnderTest is what the check drives: the gate, or the broken control.
type gateUnderTest interface {
	Commit(ctx context.Context, t leasefence.Token, write func(context.Context) error) error
	Admit(t leasefence.Token) error
	Floor() leasefence.Token
}

type gateOp int

const (
	opCommit gateOp = iota
	opAdmit
	opFloor
)

type gateInput struct {
	op    gateOp
	token leasefence.Token
}

// answer is how a Commit or Admit ended.
type answer int

const (
	admitted answer = iota
	staleRefusal
	conflictRefusal
	otherError
)

type gateOutput struct {
	answer answer
	// seen is the fence of the last write the resource held when this
	// Commit's write ran: what makes the check and the write one operation
	// observable.
	seen  leasefence.Fence
	floor leasefence.Token // Floor's answer
}

// register is the model's state: the gate's floor and the fence of the
// last write that landed on the resource.
type register struct {
	floor   leasefence.Token
	written leasefence.Fence
}

// modelAdmits is the contract's rule, written again here rather than taken
// from the package: a higher fence, or the floor's own fence from its
// holder (from anyone, for an initial floor nobody has written under).
func modelAdmits(floor, t leasefence.Token) bool {
	return t.Fence > floor.Fence || t.Fence == floor.Fence && (floor.Holder == "" || floor.Holder == t.Holder)
}

func modelRefusal(floor, t leasefence.Token) answer {
	if t.Fence < floor.Fence {
		return staleRefusal
	}
	return conflictRefusal
}

var fencedRegister = porcupine.Model{
	Init: func() any { return register{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(register), input.(gateInput), output.(gateOutput)
		switch in.op {
		case opCommit:
			if modelAdmits(s.floor, in.token) {
				return out.answer == admitted && out.seen == s.written, register{floor: in.token, written: in.token.Fence}
			}
			return out.answer == modelRefusal(s.floor, in.token), s
		case opAdmit:
			if modelAdmits(s.floor, in.token) {
				return out.answer == admitted, register{floor: in.token, written: s.written}
			}
			return out.answer == modelRefusal(s.floor, in.token), s
		default:
			return out.floor == s.floor, s
		}
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(gateInput), output.(gateOutput)
		switch in.op {
		case opCommit:
			return fmt.Sprintf("Commit(%s@%d) -> %d, saw %d", in.token.Holder, in.token.Fence, out.answer, out.seen)
		case opAdmit:
			return fmt.Sprintf("Admit(%s@%d) -> %d", in.token.Holder, in.token.Fence, out.answer)
		default:
			return fmt.Sprintf("Floor() -> %s@%d", out.floor.Holder, out.floor.Fence)
		}
	},
}

func classify(err error) answer {
	switch {
	case err == nil:
		return admitted
	case errors.Is(err, leasefence.ErrStaleFence):
		return staleRefusal
	case errors.Is(err, leasefence.ErrTokenConflict):
		return conflictRefusal
	}
	return otherError
}

// recordHistory runs workers goroutines of ops calls each against g and
// returns what they did, stamped with a shared logical clock: a call is
// stamped just before it is made and just after it returns, so porcupine
// may order two calls only as their stamps allow.
func recordHistory(t *testing.T, g gateUnderTest, workers, ops int, seed uint64) []porcupine.Operation {
	var clock atomic.Int64
	var resource struct {
		sync.Mutex
		written leasefence.Fence
	}
	history := make([][]porcupine.Operation, workers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			<-start
			for i := range ops {
				if rng.IntN(3) == 0 {
					runtime.Gosched() // let the others interleave
				}
				// Fences drift upwards, close enough that calls race for
				// the same few; two holders, so some conflict.
				f := leasefence.Fence(1 + i/2 + rng.IntN(4))
				holders := []string{"a", "b"}
				holder := holders[f%2]
				if rng.IntN(8) == 0 {
					holder = holders[(f+1)%2] // the other holder: a conflict at the floor
				}
				in := gateInput{op: opCommit, token: tok("r", holder, f)}
				switch rng.IntN(4) {
				case 0:
					in.op = opFloor
				case 1:
					in.op = opAdmit
				}
				var out gateOutput
				call := clock.Add(1)
				switch in.op {
				case opCommit:
					out.answer = classify(g.Commit(context.Background(), in.token, func(context.Context) error {
						resource.Lock()
						out.seen, resource.written = resource.written, in.token.Fence
						resource.Unlock()
						return nil
					}))
				case opAdmit:
					out.answer = classify(g.Admit(in.token))
				case opFloor:
					out.floor = g.Floor()
				}
				ret := clock.Add(1)
				if out.answer == otherError {
					t.Errorf("%+v: unexpected error", in)
				}
				history[w] = append(history[w], porcupine.Operation{ClientId: w, Input: in, Call: call, Output: out, Return: ret})
			}
		})
	}
	close(start)
	wg.Wait()
	var all []porcupine.Operation
	for _, h := range history {
		all = append(all, h...)
	}
	return all
}

func TestGateLinearizable(t *testing.T) {
	rounds := 40
	if testing.Short() {
		rounds = 5
	}
	concurrent := 0
	for round := range rounds {
		g := leasefence.NewFenceGate("r")
		ops := recordHistory(t, g, 4, 100, uint64(round))
		concurrent += overlapping(ops)
		res, _ := porcupine.CheckOperationsVerbose(fencedRegister, ops, 20*time.Second)
		if res != porcupine.Ok {
			t.Fatalf("round %d: the gate's history is %s against the fenced register", round, res)
		}
	}
	// A history of calls that never overlapped would check nothing about
	// concurrency.
	if concurrent == 0 {
		t.Fatal("no two calls overlapped in any round")
	}
	t.Logf("%d calls overlapped another call", concurrent)
}

// overlapping counts the calls that overlap a call of another goroutine.
func overlapping(ops []porcupine.Operation) int {
	n := 0
	for i, a := range ops {
		for j, b := range ops {
			if i != j && a.ClientId != b.ClientId && a.Call < b.Return && b.Call < a.Return {
				n++
				break
			}
		}
	}
	return n
}

// brokenGate is the control: a correct floor and log, but the check and the
// write are two steps, with room for another Commit in between.
type brokenGate struct {
	mu    sync.Mutex
	floor leasefence.Token
}

func (b *brokenGate) check(t leasefence.Token) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if modelAdmits(b.floor, t) {
		return nil
	}
	r := leasefence.Rejection{Resource: t.Resource, Holder: t.Holder, Fence: t.Fence, FloorHolder: b.floor.Holder, FloorFence: b.floor.Fence}
	if t.Fence < b.floor.Fence {
		return &leasefence.StaleFenceError{Rejection: r}
	}
	return leasefence.ErrTokenConflict
}

func (b *brokenGate) Commit(ctx context.Context, t leasefence.Token, write func(context.Context) error) error {
	if err := b.check(t); err != nil {
		return err
	}
	runtime.Gosched() // the gap between the check and the write
	b.mu.Lock()
	b.floor = t
	b.mu.Unlock()
	return write(ctx)
}

func (b *brokenGate) Admit(t leasefence.Token) error {
	if err := b.check(t); err != nil {
		return err
	}
	b.mu.Lock()
	b.floor = t
	b.mu.Unlock()
	return nil
}

func (b *brokenGate) Floor() leasefence.Token {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.floor
}

func TestGateLinearizabilityCatchesCheckThenSet(t *testing.T) {
	for round := range 200 {
		ops := recordHistory(t, &brokenGate{}, 4, 100, uint64(round))
		if res, _ := porcupine.CheckOperationsVerbose(fencedRegister, ops, 20*time.Second); res == porcupine.Illegal {
			t.Logf("caught after %d rounds", round+1)
			return
		}
	}
	t.Fatal("200 histories of a check-then-set gate all passed: the linearizability check is vacuous")
}
