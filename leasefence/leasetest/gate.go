package leasetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/leasefence/lab/leasefence"
)

// GateHarness is one fence gate under test, bound to one resource, as
// TestGate's factory makes it: the gate itself, through the interface every
// gate shares, and the two things the suite needs beyond it to see a write
// land, since each gate takes its writes in the shape of its own store.
//
// The suite's write is "append a value to a list that the gate guards": the
// list is the resource, and Written is what landed on it.
type GateHarness struct {
	// Gate is the gate under test (leasefence.AsGate for the in-memory
	// FenceGate). Its methods must keep the contract of leasefence.Gate.
	Gate leasefence.Gate
	// Commit appends value under t through the gate's own Commit, in the
	// one operation that judges t and raises the floor, and returns the
	// gate's error as is: nil if admitted and the append landed; a
	// *leasefence.StaleFenceError (logged) below the floor; an error
	// matching leasefence.ErrTokenConflict (logged) for the floor's fence
	// under another holder; leasefence.ErrWrongResource or
	// leasefence.ErrInvalidRequest (neither logged) for a token of another
	// resource, with no holder or with fence 0; an error matching ctx.Err()
	// for a done ctx.
	Commit func(ctx context.Context, t leasefence.Token, value string) error
	// Written returns every value that landed, in the order it landed. It
	// may read the store; the suite calls it only while no Commit runs.
	Written func(ctx context.Context) ([]string, error)
}

// FenceGateHarness is the in-memory gate g under TestGate: its writes
// append to a list that only g's writes touch.
func FenceGateHarness(g *leasefence.FenceGate) GateHarness {
	return listHarness(leasefence.AsGate(g), g.Commit)
}

// listHarness is gate under the suite, for a gate whose Commit takes a
// write function: commit appends the value to a list kept in memory.
func listHarness(gate leasefence.Gate, commit func(ctx context.Context, t leasefence.Token, write func(context.Context) error) error) GateHarness {
	var mu sync.Mutex // for Written, read from outside the gate
	var written []string
	return GateHarness{
		Gate: gate,
		Commit: func(ctx context.Context, t leasefence.Token, value string) error {
			return commit(ctx, t, func(context.Context) error {
				mu.Lock()
				defer mu.Unlock()
				written = append(written, value)
				return nil
			})
		},
		Written: func(context.Context) ([]string, error) {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(written), nil
		},
	}
}

// TestGate checks that a gate keeps the admission rule of the in-memory
// leasefence.FenceGate: a fence below the floor is refused and logged, the
// floor's own fence from another holder is a logged conflict, the floor is
// raised with the write and only with it, fences keep all 64 bits, the log
// reads back from any sequence number, and committers racing from many
// goroutines land their writes in non-decreasing fence order with every
// refusal logged exactly once.
//
// open must return a gate of resource with an empty floor and an empty log
// and list; TestGate calls it once per resource, with resources that are
// distinct within a run of TestGate, and several times in one subtest for
// the gates of several resources, which must be independent. What a write
// that fails does to the floor differs between implementations (the
// in-memory gate keeps it raised, a database rolls it back), so TestGate
// does not test it: test it beside the implementation.
func TestGate(t *testing.T, open func(t testing.TB, resource string) GateHarness) {
	testGate(realT{t}, open)
}

// gateOpener is TestGate's factory.
type gateOpener = func(t testing.TB, resource string) GateHarness

func testGate(t tb, open gateOpener) {
	checked := func(t testing.TB, resource string) GateHarness {
		t.Helper()
		g := open(t, resource)
		if g.Gate == nil || g.Commit == nil || g.Written == nil {
			t.Fatalf("leasetest: the factory returned an incomplete GateHarness %+v", g)
		}
		return g
	}
	for _, tt := range []struct {
		name string
		fn   func(t tb, open gateOpener)
	}{
		{"Empty", testGateEmpty},
		{"AdmissionRule", testGateAdmissionRule},
		{"Admit", testGateAdmit},
		{"BadTokens", testGateBadTokens},
		{"DoneContext", testGateDoneContext},
		{"ReadersContexts", testGateReadersContexts},
		{"Resources", testGateResources},
		{"WideFences", testGateWideFences},
		{"RejectionsSince", testGateRejectionsSince},
		{"Concurrent", testGateConcurrent},
	} {
		t.run(tt.name, func(t tb) { tt.fn(t, checked) })
	}
}

// gateState is what a gate shows from outside.
type gateState struct {
	floor      leasefence.Token
	rejections []leasefence.Rejection
	written    []string
}

func readGate(t testing.TB, g GateHarness) gateState {
	t.Helper()
	ctx := t.Context()
	floor, err := g.Gate.Floor(ctx)
	if err != nil {
		t.Fatalf("Floor: %v", err)
	}
	rejections, missed, err := g.Gate.RejectionsSince(ctx, 0)
	if err != nil {
		t.Fatalf("RejectionsSince(0): %v", err)
	}
	if missed != 0 {
		t.Errorf("RejectionsSince(0) missed %d refusals of a log the suite keeps short", missed)
	}
	count, err := g.Gate.RejectionCount(ctx)
	if err != nil {
		t.Fatalf("RejectionCount: %v", err)
	}
	if count != uint64(len(rejections)) {
		t.Errorf("RejectionCount = %d, but RejectionsSince(0) returned %d refusals", count, len(rejections))
	}
	written, err := g.Written(ctx)
	if err != nil {
		t.Fatalf("Written: %v", err)
	}
	return gateState{floor, rejections, written}
}

// checkGateState fails t unless g shows exactly want.
func checkGateState(t testing.TB, g GateHarness, want gateState) {
	t.Helper()
	got := readGate(t, g)
	if got.floor != want.floor {
		t.Errorf("Floor = %+v, want %+v", got.floor, want.floor)
	}
	if !slices.Equal(got.rejections, want.rejections) {
		t.Errorf("Rejections =\n\t%+v\nwant\n\t%+v", got.rejections, want.rejections)
	}
	if !slices.Equal(got.written, want.written) {
		t.Errorf("Written = %q, want %q", got.written, want.written)
	}
}

// gateOutcome is what a Commit or Admit is expected to answer.
type gateOutcome int

const (
	gateAdmitted gateOutcome = iota
	gateStale
	gateConflict
	gateWrongResource
	gateInvalid
)

func (o gateOutcome) String() string {
	return [...]string{"admitted", "stale", "conflict", "wrong resource", "invalid"}[o]
}

// checkGateOutcome fails t unless err is want, telling outcomes apart by the
// sentinels they match.
func checkGateOutcome(t testing.TB, what string, err error, want gateOutcome) {
	t.Helper()
	var got gateOutcome
	switch {
	case err == nil:
		got = gateAdmitted
	case errors.Is(err, leasefence.ErrStaleFence):
		got = gateStale
	case errors.Is(err, leasefence.ErrTokenConflict):
		got = gateConflict
	case errors.Is(err, leasefence.ErrWrongResource):
		got = gateWrongResource
	case errors.Is(err, leasefence.ErrInvalidRequest):
		got = gateInvalid
	default:
		t.Fatalf("%s: unexpected error %v, want %v", what, err, want)
	}
	if got != want {
		t.Fatalf("%s = %v (%v), want %v", what, got, err, want)
	}
}

func gateToken(resource, holder string, f leasefence.Fence) leasefence.Token {
	return leasefence.Token{Resource: resource, Holder: holder, Fence: f}
}

func testGateEmpty(t tb, open gateOpener) {
	g := open(t, "gate-empty")
	got := readGate(t, g)
	if got.floor.Fence != 0 || got.floor.Holder != "" {
		t.Errorf("Floor of a new gate = %+v, want fence 0 and no holder", got.floor)
	}
	if len(got.rejections) != 0 || len(got.written) != 0 {
		t.Errorf("a new gate has rejections %+v and writes %q", got.rejections, got.written)
	}
}

func testGateAdmissionRule(t tb, open gateOpener) {
	const r = "gate-rule"
	g := open(t, r)
	steps := []struct {
		token leasefence.Token
		want  gateOutcome
		floor leasefence.Token // after the step
	}{
		{gateToken(r, "a", 5), gateAdmitted, gateToken(r, "a", 5)},
		{gateToken(r, "a", 5), gateAdmitted, gateToken(r, "a", 5)}, // the floor's holder again, at its fence
		{gateToken(r, "b", 5), gateConflict, gateToken(r, "a", 5)}, // the floor's fence, another holder
		{gateToken(r, "c", 3), gateStale, gateToken(r, "a", 5)},
		{gateToken(r, "d", 7), gateAdmitted, gateToken(r, "d", 7)},
		{gateToken(r, "a", 5), gateStale, gateToken(r, "d", 7)}, // the old holder after the handover
		{gateToken(r, "d", 7), gateAdmitted, gateToken(r, "d", 7)},
		{gateToken(r, "e", 8), gateAdmitted, gateToken(r, "e", 8)},
	}
	var want gateState
	for i, s := range steps {
		value := "v" + strconv.Itoa(i)
		err := g.Commit(t.Context(), s.token, value)
		checkGateOutcome(t, fmt.Sprintf("step %d: Commit(%v)", i, s.token), err, s.want)
		if s.want == gateAdmitted {
			want.written = append(want.written, value)
		} else {
			floor := want.floor
			r := leasefence.Rejection{
				Seq: uint64(len(want.rejections)) + 1, Resource: r,
				Holder: s.token.Holder, Fence: s.token.Fence,
				FloorHolder: floor.Holder, FloorFence: floor.Fence,
			}
			want.rejections = append(want.rejections, r)
			var se *leasefence.StaleFenceError
			if errors.As(err, &se) && se.Rejection != r {
				t.Errorf("step %d: the refusal carries %+v, want the logged %+v", i, se.Rejection, r)
			}
		}
		want.floor = s.floor
		checkGateState(t, g, want)
	}
}

func testGateAdmit(t tb, open gateOpener) {
	const r = "gate-admit"
	g := open(t, r)
	ctx := t.Context()
	var want gateState

	checkGateOutcome(t, "Admit(b@4) on an empty gate", g.Gate.Admit(ctx, gateToken(r, "b", 4)), gateAdmitted)
	want.floor = gateToken(r, "b", 4)
	checkGateState(t, g, want)

	err := g.Gate.Admit(ctx, gateToken(r, "a", 2))
	checkGateOutcome(t, "Admit(a@2) below the floor", err, gateStale)
	var se *leasefence.StaleFenceError
	if errors.As(err, &se) && se.Seq != 0 {
		t.Errorf("Admit below the floor carries Seq %d, want 0 (not logged)", se.Seq)
	}
	checkGateOutcome(t, "Admit(c@4) at the floor's fence", g.Gate.Admit(ctx, gateToken(r, "c", 4)), gateConflict)
	checkGateOutcome(t, "Admit(b@4) again", g.Gate.Admit(ctx, gateToken(r, "b", 4)), gateAdmitted)
	checkGateState(t, g, want) // nothing logged, nothing written

	checkGateOutcome(t, "Commit(a@3) after Admit(b@4)", g.Commit(ctx, gateToken(r, "a", 3), "stale"), gateStale)
	want.rejections = append(want.rejections, leasefence.Rejection{Seq: 1, Resource: r, Holder: "a", Fence: 3, FloorHolder: "b", FloorFence: 4})
	checkGateOutcome(t, "Commit(b@4) by the admitted holder", g.Commit(ctx, gateToken(r, "b", 4), "b4"), gateAdmitted)
	want.written = append(want.written, "b4")
	checkGateState(t, g, want)

	checkGateOutcome(t, "Admit(e@9)", g.Gate.Admit(ctx, gateToken(r, "e", 9)), gateAdmitted)
	checkGateOutcome(t, "Commit(b@4) after Admit(e@9)", g.Commit(ctx, gateToken(r, "b", 4), "late"), gateStale)
	want.floor = gateToken(r, "e", 9)
	want.rejections = append(want.rejections, leasefence.Rejection{Seq: 2, Resource: r, Holder: "b", Fence: 4, FloorHolder: "e", FloorFence: 9})
	checkGateState(t, g, want)
}

func testGateBadTokens(t tb, open gateOpener) {
	const r = "gate-bad"
	g := open(t, r)
	ctx := t.Context()
	checkGateOutcome(t, "Commit(a@2)", g.Commit(ctx, gateToken(r, "a", 2), "ok"), gateAdmitted)
	want := gateState{floor: gateToken(r, "a", 2), written: []string{"ok"}}
	for _, c := range []struct {
		name  string
		token leasefence.Token
		want  gateOutcome
	}{
		{"another resource", gateToken(r+"-other", "a", 3), gateWrongResource},
		{"another resource, below the floor", gateToken(r+"-other", "a", 1), gateWrongResource},
		{"no resource", gateToken("", "a", 3), gateWrongResource},
		{"no holder", gateToken(r, "", 3), gateInvalid},
		{"fence 0", gateToken(r, "a", 0), gateInvalid},
		{"no holder, below the floor", gateToken(r, "", 1), gateInvalid},
	} {
		checkGateOutcome(t, "Commit with "+c.name, g.Commit(ctx, c.token, "forged"), c.want)
		checkGateOutcome(t, "Admit with "+c.name, g.Gate.Admit(ctx, c.token), c.want)
	}
	checkGateState(t, g, want)
}

func testGateDoneContext(t tb, open gateOpener) {
	const r = "gate-done"
	g := open(t, r)
	checkGateOutcome(t, "Commit(a@2)", g.Commit(t.Context(), gateToken(r, "a", 2), "ok"), gateAdmitted)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for _, token := range []leasefence.Token{gateToken(r, "b", 3), gateToken(r, "a", 2)} {
		if err := g.Commit(ctx, token, "cancelled"); !errors.Is(err, context.Canceled) {
			t.Errorf("Commit(%v) with a cancelled ctx = %v, want context.Canceled", token, err)
		}
	}
	checkGateState(t, g, gateState{floor: gateToken(r, "a", 2), written: []string{"ok"}})
}

// testGateReadersContexts: every method of leasefence.Gate refuses a nil
// ctx with ErrInvalidRequest and ends with ctx's error once it has ended,
// and neither touches the gate.
func testGateReadersContexts(t tb, open gateOpener) {
	const r = "gate-ctx"
	g := open(t, r)
	checkGateOutcome(t, "Commit(a@2)", g.Commit(t.Context(), gateToken(r, "a", 2), "ok"), gateAdmitted)
	done, cancel := context.WithCancel(t.Context())
	cancel()
	var nilCtx context.Context
	for _, c := range []struct {
		name string
		ctx  context.Context
		want error
	}{
		{"a nil ctx", nilCtx, leasefence.ErrInvalidRequest},
		{"a cancelled ctx", done, context.Canceled},
	} {
		calls := map[string]error{
			"Admit": g.Gate.Admit(c.ctx, gateToken(r, "b", 3)),
		}
		_, calls["Floor"] = g.Gate.Floor(c.ctx)
		_, _, calls["RejectionsSince"] = g.Gate.RejectionsSince(c.ctx, 0)
		_, calls["RejectionCount"] = g.Gate.RejectionCount(c.ctx)
		for _, m := range []string{"Admit", "Floor", "RejectionsSince", "RejectionCount"} {
			if !errors.Is(calls[m], c.want) {
				t.Errorf("%s with %s = %v, want %v", m, c.name, calls[m], c.want)
			}
		}
	}
	checkGateState(t, g, gateState{floor: gateToken(r, "a", 2), written: []string{"ok"}})
}

func testGateResources(t tb, open gateOpener) {
	const r1, r2 = "gate-res-1", "gate-res-2"
	g1, g2 := open(t, r1), open(t, r2)
	ctx := t.Context()
	checkGateOutcome(t, "Commit(a@9) at "+r1, g1.Commit(ctx, gateToken(r1, "a", 9), "a9"), gateAdmitted)
	checkGateOutcome(t, "Commit(b@3) at "+r2, g2.Commit(ctx, gateToken(r2, "b", 3), "b3"), gateAdmitted)
	checkGateOutcome(t, "Commit(c@2) at "+r2, g2.Commit(ctx, gateToken(r2, "c", 2), "c2"), gateStale)
	checkGateOutcome(t, "Commit(r1's token) at "+r2, g2.Commit(ctx, gateToken(r1, "a", 9), "x"), gateWrongResource)
	checkGateState(t, g1, gateState{floor: gateToken(r1, "a", 9), written: []string{"a9"}})
	checkGateState(t, g2, gateState{
		floor:      gateToken(r2, "b", 3),
		rejections: []leasefence.Rejection{{Seq: 1, Resource: r2, Holder: "c", Fence: 2, FloorHolder: "b", FloorFence: 3}},
		written:    []string{"b3"},
	})
}

// testGateWideFences uses fences above 2^32: a gate that keeps them in 32
// bits reads 2^32+5 as 5 and admits a stale 6 over it.
func testGateWideFences(t tb, open gateOpener) {
	const r = "gate-wide"
	const wide = leasefence.Fence(1) << 32
	g := open(t, r)
	ctx := t.Context()
	var want gateState
	checkGateOutcome(t, "Commit(a@2^32+5)", g.Commit(ctx, gateToken(r, "a", wide+5), "a"), gateAdmitted)
	want.floor, want.written = gateToken(r, "a", wide+5), []string{"a"}
	checkGateState(t, g, want)
	for i, f := range []leasefence.Fence{6, 5, wide + 4, 1} {
		checkGateOutcome(t, fmt.Sprintf("Commit(b@%d) below 2^32+5", f), g.Commit(ctx, gateToken(r, "b", f), "stale"), gateStale)
		want.rejections = append(want.rejections, leasefence.Rejection{Seq: uint64(i) + 1, Resource: r, Holder: "b", Fence: f, FloorHolder: "a", FloorFence: wide + 5})
		checkGateOutcome(t, fmt.Sprintf("Admit(c@%d) below 2^32+5", f), g.Gate.Admit(ctx, gateToken(r, "c", f)), gateStale)
	}
	checkGateState(t, g, want)
	// 2^48 + 7: far above 32 bits, and within what every store keeps
	// exactly (Redis's Lua numbers are doubles: 53 bits; a SQL BIGINT is
	// signed: 63).
	top := leasefence.Fence(1)<<48 + 7
	checkGateOutcome(t, "Admit(d@2^48+7)", g.Gate.Admit(ctx, gateToken(r, "d", top)), gateAdmitted)
	checkGateOutcome(t, "Commit(a@2^32+5) after Admit(d@2^48+7)", g.Commit(ctx, gateToken(r, "a", wide+5), "late"), gateStale)
	want.floor = gateToken(r, "d", top)
	want.rejections = append(want.rejections, leasefence.Rejection{Seq: 5, Resource: r, Holder: "a", Fence: wide + 5, FloorHolder: "d", FloorFence: top})
	checkGateOutcome(t, "Commit(d@2^48+7)", g.Commit(ctx, gateToken(r, "d", top), "d"), gateAdmitted)
	want.written = append(want.written, "d")
	checkGateState(t, g, want)
}

// testGateRejectionsSince reads the log from every sequence number.
func testGateRejectionsSince(t tb, open gateOpener) {
	const r = "gate-since"
	g := open(t, r)
	ctx := t.Context()
	checkGateOutcome(t, "Commit(a@9)", g.Commit(ctx, gateToken(r, "a", 9), "a9"), gateAdmitted)
	var all []leasefence.Rejection
	for f := leasefence.Fence(1); f <= 4; f++ {
		checkGateOutcome(t, fmt.Sprintf("Commit(b@%d)", f), g.Commit(ctx, gateToken(r, "b", f), "stale"), gateStale)
		all = append(all, leasefence.Rejection{Seq: uint64(f), Resource: r, Holder: "b", Fence: f, FloorHolder: "a", FloorFence: 9})
	}
	for seq := uint64(0); seq <= 6; seq++ {
		rs, missed, err := g.Gate.RejectionsSince(ctx, seq)
		want := all[min(seq, uint64(len(all))):]
		if err != nil || missed != 0 || !slices.Equal(rs, want) {
			t.Errorf("RejectionsSince(%d) = %+v, missed %d, %v; want %+v", seq, rs, missed, err, want)
		}
	}
}

// testGateConcurrent races committers from goroutines. Fences come from one
// counter, so each belongs to one committer and each committer's fences
// rise; each is committed twice, as a holder writes more than once under one
// lease. Whether a commit is admitted depends on who reaches the gate first.
func testGateConcurrent(t tb, open gateOpener) {
	const (
		r          = "gate-race"
		committers = 6
		commits    = 16 // in pairs under one fence
	)
	g := open(t, r)
	ctx := t.Context()
	var next atomic.Uint64
	var mu sync.Mutex
	holderOf := map[leasefence.Fence]string{}
	var refused []leasefence.Rejection // as the refusals' errors tell them
	var wg sync.WaitGroup
	for w := range committers {
		holder := "w" + strconv.Itoa(w)
		wg.Go(func() {
			var f leasefence.Fence
			for i := range commits {
				if i%2 == 0 {
					f = leasefence.Fence(next.Add(1))
					mu.Lock()
					holderOf[f] = holder
					mu.Unlock()
				}
				err := g.Commit(ctx, gateToken(r, holder, f), strconv.FormatUint(uint64(f), 10))
				var se *leasefence.StaleFenceError
				switch {
				case err == nil:
				case errors.As(err, &se):
					mu.Lock()
					refused = append(refused, se.Rejection)
					mu.Unlock()
				default:
					t.Errorf("Commit(%s@%d) = %v, want admitted or stale", holder, f, err)
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	got := readGate(t, g)
	var written []leasefence.Fence
	for _, v := range got.written {
		f, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("Written holds %q, which no committer wrote", v)
		}
		written = append(written, leasefence.Fence(f))
	}
	if !slices.IsSorted(written) {
		t.Errorf("writes landed out of fence order: %v", written)
	}
	if n := len(written) + len(refused); n != committers*commits {
		t.Errorf("%d writes landed and %d were refused, out of %d commits", len(written), len(refused), committers*commits)
	}
	if len(written) == 0 {
		t.Fatal("no write landed")
	}
	t.Logf("%d writes landed, %d commits refused", len(written), len(refused))
	last := written[len(written)-1]
	if want := gateToken(r, holderOf[last], last); got.floor != want {
		t.Errorf("Floor = %+v, want the last write's token %+v", got.floor, want)
	}

	// Every refusal is logged once, as its error told it, against a floor
	// that a landed write raised: the floor never moves without its write.
	if len(got.rejections) != len(refused) {
		t.Errorf("%d refusals logged, %d returned", len(got.rejections), len(refused))
	}
	landed := map[leasefence.Fence]bool{}
	for _, f := range written {
		landed[f] = true
	}
	for i, rej := range got.rejections {
		if rej.Seq != uint64(i)+1 {
			t.Errorf("log entry %d has Seq %d", i, rej.Seq)
		}
		if !landed[rej.FloorFence] || holderOf[rej.FloorFence] != rej.FloorHolder {
			t.Errorf("log entry %+v names a floor no landed write raised", rej)
		}
		if rej.Fence >= rej.FloorFence || holderOf[rej.Fence] != rej.Holder { // a fence's own holder is never a conflict
			t.Errorf("log entry %+v is not a refusal of an issued, lower fence", rej)
		}
	}
	slices.SortFunc(refused, func(a, b leasefence.Rejection) int { return int(a.Seq) - int(b.Seq) })
	if !slices.Equal(refused, got.rejections) {
		t.Errorf("the refusals returned\n\t%+v\nare not the refusals logged\n\t%+v", refused, got.rejections)
	}
}
