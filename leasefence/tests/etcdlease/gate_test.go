package etcdlease_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/etcdlease"
	"github.com/leasefence/lab/leasefence/etcdlease/etcdembed"
	"github.com/leasefence/lab/leasefence/leasetest"
)

type gateAdapter struct {
	gate *etcdlease.Gate
	cli  *clientv3.Client
	data string
	n    *atomic.Int64
}

func (a *gateAdapter) Commit(ctx context.Context, t leasefence.Token, value string) error {
	return a.gate.Commit(ctx, t, clientv3.OpPut(fmt.Sprintf("%s%020d", a.data, a.n.Add(1)), value))
}

func (a *gateAdapter) Admit(ctx context.Context, t leasefence.Token) error {
	return a.gate.Admit(ctx, t)
}

func (a *gateAdapter) Floor(ctx context.Context) (leasefence.Token, error) { return a.gate.Floor(ctx) }

func (a *gateAdapter) Rejections(ctx context.Context) ([]leasefence.Rejection, error) {
	return a.gate.Rejections(ctx)
}

func (a *gateAdapter) Written(ctx context.Context) ([]string, error) {
	resp, err := a.cli.Get(ctx, a.data, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortAscend))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, kv := range resp.Kvs {
		out = append(out, string(kv.Value))
	}
	return out, nil
}

// openGate opens the gate of resource under a fresh prefix, writing its data
// under a key range of its own (outside the prefix).
func openGate(t testing.TB, resource string) *gateAdapter {
	t.Helper()
	prefix := newPrefix()
	return openGateAt(t, cli, prefix, resource, &atomic.Int64{})
}

func openGateAt(t testing.TB, c *clientv3.Client, prefix, resource string, n *atomic.Int64) *gateAdapter {
	t.Helper()
	g, err := etcdlease.NewGate(c, resource, etcdlease.GateOptions{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	return &gateAdapter{gate: g, cli: c, data: "/data" + prefix + resource + "/", n: n}
}

func tok(resource, holder string, fence leasefence.Fence) leasefence.Token {
	return leasefence.Token{Resource: resource, Holder: holder, Fence: fence}
}

func mustWritten(t *testing.T, g *gateAdapter, want ...string) {
	t.Helper()
	got, err := g.Written(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("written %q, want %q", got, want)
	}
}

func mustFloor(t *testing.T, g *gateAdapter, want leasefence.Token) {
	t.Helper()
	got, err := g.Floor(t.Context())
	if err != nil || got != want {
		t.Fatalf("Floor = %v, %v; want %v", got, err, want)
	}
}

func mustRejections(t *testing.T, g *gateAdapter, want ...leasefence.Rejection) {
	t.Helper()
	got, err := g.Rejections(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("rejections %+v, want %+v", got, want)
	}
}

// TestGateConformance runs the suite every fence gate passes: the same
// admission rule, refusal log and atomic raise as the in-memory and SQL gates.
func TestGateConformance(t *testing.T) {
	t.Parallel()
	leasetest.TestGate(t, func(t testing.TB, resource string) leasetest.GateHarness {
		g := openGate(t, resource)
		return leasetest.GateHarness{Gate: g.gate, Commit: g.Commit, Written: g.Written}
	})
}

func TestGateAdmitsRaisesAndRefuses(t *testing.T) {
	g := openGate(t, "r")
	ctx := t.Context()
	mustFloor(t, g, leasefence.Token{})
	if err := g.Commit(ctx, tok("r", "a", 5), "a1"); err != nil {
		t.Fatal(err)
	}
	if err := g.Commit(ctx, tok("r", "a", 5), "a2"); err != nil {
		t.Fatal(err)
	}
	mustFloor(t, g, tok("r", "a", 5))
	if err := g.Commit(ctx, tok("r", "b", 7), "b1"); err != nil {
		t.Fatal(err)
	}
	mustFloor(t, g, tok("r", "b", 7))

	err := g.Commit(ctx, tok("r", "a", 5), "stale")
	var stale *leasefence.StaleFenceError
	if !errors.As(err, &stale) || !errors.Is(err, leasefence.ErrStaleFence) {
		t.Fatalf("stale Commit = %v, want *StaleFenceError", err)
	}
	want1 := leasefence.Rejection{Seq: 1, Resource: "r", Holder: "a", Fence: 5, FloorHolder: "b", FloorFence: 7}
	if stale.Rejection != want1 {
		t.Fatalf("refusal %+v, want %+v", stale.Rejection, want1)
	}

	err = g.Commit(ctx, tok("r", "forger", 7), "forged")
	var conflict *leasefence.TokenConflictError
	if !errors.As(err, &conflict) || !errors.Is(err, leasefence.ErrTokenConflict) {
		t.Fatalf("Commit with the floor's fence under another holder = %v, want ErrTokenConflict", err)
	}
	want2 := leasefence.Rejection{Seq: 2, Resource: "r", Holder: "forger", Fence: 7, FloorHolder: "b", FloorFence: 7}
	if conflict.Rejection != want2 {
		t.Fatalf("conflict %+v, want %+v", conflict.Rejection, want2)
	}

	if err := g.Commit(ctx, tok("other", "b", 9), "elsewhere"); !errors.Is(err, leasefence.ErrWrongResource) {
		t.Fatalf("Commit for another resource = %v, want ErrWrongResource", err)
	}
	mustWritten(t, g, "a1", "a2", "b1")
	mustFloor(t, g, tok("r", "b", 7))
	mustRejections(t, g, want1, want2)
}

func TestGateAdmit(t *testing.T) {
	g := openGate(t, "r")
	ctx := t.Context()
	if err := g.Admit(ctx, tok("r", "b", 7)); err != nil {
		t.Fatal(err)
	}
	mustFloor(t, g, tok("r", "b", 7))
	mustWritten(t, g)
	for _, bad := range []leasefence.Token{tok("r", "a", 5), tok("r", "x", 7)} {
		err := g.Admit(ctx, bad)
		if !errors.Is(err, leasefence.ErrStaleFence) && !errors.Is(err, leasefence.ErrTokenConflict) {
			t.Fatalf("Admit(%v) = %v, want a refusal", bad, err)
		}
	}
	var stale *leasefence.StaleFenceError
	if err := g.Admit(ctx, tok("r", "a", 5)); !errors.As(err, &stale) || stale.Seq != 0 {
		t.Fatalf("Admit below the floor = %v, want a StaleFenceError with Seq 0", err)
	}
	mustRejections(t, g)
	if err := g.Commit(ctx, tok("r", "a", 5), "late"); !errors.Is(err, leasefence.ErrStaleFence) {
		t.Fatalf("Commit below an admitted floor = %v", err)
	}
	mustWritten(t, g)
}

func TestGateBadCalls(t *testing.T) {
	g := openGate(t, "r")
	var nilCtx context.Context
	for name, err := range map[string]error{
		"nil ctx commit":  g.Commit(nilCtx, tok("r", "a", 1), "v"),
		"nil ctx admit":   g.Admit(nilCtx, tok("r", "a", 1)),
		"no holder":       g.Commit(t.Context(), tok("r", "", 1), "v"),
		"fence 0":         g.Commit(t.Context(), tok("r", "a", 0), "v"),
		"nil ctx floor":   func() error { _, err := g.Floor(nilCtx); return err }(),
		"nil ctx log":     func() error { _, err := g.Rejections(nilCtx); return err }(),
		"nil client gate": func() error { _, err := etcdlease.NewGate(nil, "r", etcdlease.GateOptions{}); return err }(),
		"empty resource":  func() error { _, err := etcdlease.NewGate(cli, "", etcdlease.GateOptions{}); return err }(),
	} {
		if !errors.Is(err, leasefence.ErrInvalidRequest) {
			t.Errorf("%s: %v, want ErrInvalidRequest", name, err)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := g.Commit(ctx, tok("r", "a", 1), "v"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Commit(cancelled) = %v", err)
	}
	mustWritten(t, g)
	mustFloor(t, g, leasefence.Token{})
}

func TestGateRefusesOpsOnItsOwnKeys(t *testing.T) {
	prefix := newPrefix()
	g, err := etcdlease.NewGate(cli, "r", etcdlease.GateOptions{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	floor := prefix + "gates/r/floor"
	for name, op := range map[string]clientv3.Op{
		"put on the floor":           clientv3.OpPut(floor, "x"),
		"delete the log":             clientv3.OpDelete(prefix+"gates/r/log/", clientv3.WithPrefix()),
		"delete everything":          clientv3.OpDelete("\x00", clientv3.WithFromKey()),
		"delete a range over it":     clientv3.OpDelete("/", clientv3.WithRange("/z")),
		"read a coordinator key":     clientv3.OpGet(prefix + "holders/r"),
		"nested txn":                 clientv3.OpTxn(nil, []clientv3.Op{clientv3.OpPut(floor, "x")}, nil),
		"compare in a nested txn":    clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.Value(floor), "=", "x")}, nil, nil),
		"delete from the prefix on":  clientv3.OpDelete(prefix, clientv3.WithFromKey()),
		"another gate of the prefix": clientv3.OpPut(prefix+"gates/other/floor", "x"),
	} {
		if err := g.Commit(t.Context(), tok("r", "a", 1), op); !errors.Is(err, etcdlease.ErrReservedKey) {
			t.Errorf("%s: %v, want ErrReservedKey", name, err)
		}
	}
	if f, _ := g.Floor(t.Context()); f != (leasefence.Token{}) {
		t.Fatalf("floor %v after refused ops", f)
	}
	// Ranges beside the prefix are fine.
	before := strings.TrimSuffix(prefix, "/") + ".data"
	ok := []clientv3.Op{
		clientv3.OpPut(before, "v"),
		clientv3.OpDelete("/a", clientv3.WithRange(strings.TrimSuffix(prefix, "/"))),
		clientv3.OpGet(clientv3.GetPrefixRangeEnd(prefix), clientv3.WithFromKey()),
	}
	if err := g.Commit(t.Context(), tok("r", "a", 1), ok...); err != nil {
		t.Fatalf("ops beside the prefix: %v", err)
	}
}

func TestGateCommitIsOneTransaction(t *testing.T) {
	g := openGate(t, "r")
	if err := g.Commit(t.Context(), tok("r", "a", 3), "first"); err != nil {
		t.Fatal(err)
	}
	// etcd rejects a transaction that puts one key twice: neither the
	// writes nor the raise of the floor are applied.
	dup := "/data-dup" + newPrefix()
	err := g.gate.Commit(t.Context(), tok("r", "b", 9), clientv3.OpPut(dup, "1"), clientv3.OpPut(dup, "2"))
	if err == nil {
		t.Fatal("Commit of a transaction etcd rejects succeeded")
	}
	mustFloor(t, g, tok("r", "a", 3))
	if resp, err := cli.Get(t.Context(), dup); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("part of a rejected Commit landed: %v, %v", resp, err)
	}
}

// Gates in two processes (two clients, two Gate values) on one resource are
// one gate: under concurrent writers with interleaved fences, every write
// that landed is at or above every fence admitted before it, every refusal
// is logged once, in sequence.
func TestGateAcrossProcessesUnderConcurrency(t *testing.T) {
	other, err := etcdembed.Client(member.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	prefix := newPrefix()
	var n atomic.Int64
	gates := []*gateAdapter{openGateAt(t, cli, prefix, "r", &n), openGateAt(t, other, prefix, "r", &n)}

	const writers, perWriter = 6, 8
	var wg sync.WaitGroup
	var refused atomic.Int64
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := gates[w%2]
			for i := range perWriter {
				fence := leasefence.Fence(1 + i*writers + w) // writers interleave their fences
				holder := "w" + strconv.Itoa(w)
				err := g.Commit(t.Context(), tok("r", holder, fence), fmt.Sprintf("%d", fence))
				switch {
				case err == nil:
				case errors.Is(err, leasefence.ErrStaleFence):
					refused.Add(1)
				default:
					t.Errorf("Commit: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	written, err := gates[0].Written(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var high uint64
	for _, v := range written {
		f, _ := strconv.ParseUint(v, 10, 64)
		if f < high {
			t.Fatalf("fence %d landed after %d: written %v", f, high, written)
		}
		high = f
	}
	rejs, err := gates[1].Rejections(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(rejs)) != refused.Load() || len(written)+len(rejs) != writers*perWriter {
		t.Fatalf("%d written + %d logged, %d refused, of %d commits", len(written), len(rejs), refused.Load(), writers*perWriter)
	}
	for i, r := range rejs {
		if r.Seq != uint64(i+1) || r.Fence >= r.FloorFence {
			t.Fatalf("rejection %d = %+v", i, r)
		}
	}
	floor, _ := gates[1].Floor(t.Context())
	if uint64(floor.Fence) != high {
		t.Fatalf("floor %v, highest write %d", floor, high)
	}
}

// The floor and the log are durable: a gate opened anew (a restarted
// process) has them, and so does a restarted member.
func TestGateIsDurable(t *testing.T) {
	prefix := newPrefix()
	var n atomic.Int64
	g := openGateAt(t, cli, prefix, "r", &n)
	if err := g.Commit(t.Context(), tok("r", "b", 7), "b"); err != nil {
		t.Fatal(err)
	}
	if err := g.Commit(t.Context(), tok("r", "a", 5), "a"); !errors.Is(err, leasefence.ErrStaleFence) {
		t.Fatal(err)
	}
	again := openGateAt(t, cli, prefix, "r", &n)
	mustFloor(t, again, tok("r", "b", 7))
	mustRejections(t, again, leasefence.Rejection{Seq: 1, Resource: "r", Holder: "a", Fence: 5, FloorHolder: "b", FloorFence: 7})
}

// The coordinator's fences and the gate together: a holder whose lease
// expired, and who writes late, is refused once the new holder has written.
func TestGateWithCoordinator(t *testing.T) {
	prefix := newPrefix()
	coord := newCoordinator(t, etcdlease.Options{Prefix: prefix})
	var n atomic.Int64
	g := openGateAt(t, cli, prefix, "r", &n)
	grant := func(holder string) leasefence.Token {
		c, _ := leasefence.NewClient(leasefence.ClientOptions{Clock: leasefence.NewMonotonicClock("c"), Holder: holder})
		req, _ := c.BeginAcquire("r")
		out, err := coord.Acquire(t.Context(), req)
		if err != nil || !out.OK {
			t.Fatalf("Acquire = %+v, %v", out, err)
		}
		return out.Grant.Token
	}
	a := grant("a")
	if out, err := coord.Release(t.Context(), a); err != nil || !out.OK {
		t.Fatalf("Release = %+v, %v", out, err)
	}
	b := grant("b")
	if err := g.Commit(t.Context(), b, "b"); err != nil {
		t.Fatal(err)
	}
	if err := g.Commit(t.Context(), a, "a, late"); !errors.Is(err, leasefence.ErrStaleFence) {
		t.Fatalf("late write of the old holder = %v", err)
	}
	mustWritten(t, g, "b")
}

// A gate's log is read by key prefix, and a resource name may contain "/":
// the gate of "x/log" keeps its floor, sequence and log under the log prefix
// of the gate of "x". The gate of "x" must read only its own refusals.
func TestGateLogIgnoresAnotherResourcesKeys(t *testing.T) {
	ctx := t.Context()
	prefix := newPrefix()
	x, err := etcdlease.NewGate(cli, "x", etcdlease.GateOptions{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	for _, resource := range []string{"x/log", "x/log/00000000000000000001", "x/log/0", "x/log/00000000000001"} {
		y, err := etcdlease.NewGate(cli, resource, etcdlease.GateOptions{Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		if err := y.Commit(ctx, leasefence.Token{Resource: resource, Holder: "b", Fence: 9}); err != nil {
			t.Fatalf("%s: Commit: %v", resource, err)
		}
		if err := y.Commit(ctx, leasefence.Token{Resource: resource, Holder: "a", Fence: 3}); !errors.Is(err, leasefence.ErrStaleFence) {
			t.Fatalf("%s: stale Commit = %v", resource, err)
		}
	}
	if err := x.Commit(ctx, leasefence.Token{Resource: "x", Holder: "b", Fence: 5}); err != nil {
		t.Fatal(err)
	}
	if err := x.Commit(ctx, leasefence.Token{Resource: "x", Holder: "a", Fence: 4}); !errors.Is(err, leasefence.ErrStaleFence) {
		t.Fatalf("stale Commit = %v", err)
	}
	rs, err := x.Rejections(ctx)
	if err != nil {
		t.Fatalf("Rejections: %v", err)
	}
	want := []leasefence.Rejection{{Seq: 1, Resource: "x", Holder: "a", Fence: 4, FloorHolder: "b", FloorFence: 5}}
	if !slices.Equal(rs, want) {
		t.Errorf("Rejections = %+v, want %+v", rs, want)
	}
}
