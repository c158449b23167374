package redislease_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/leasetest"
	"github.com/leasefence/lab/leasefence/redislease"
)

// gateAdapter appends each committed value to a list, the resource the gate
// guards, in the gate's transaction.
type gateAdapter struct {
	*redislease.Gate
	rdb  redis.UniversalClient
	data string
}

var _ leasefence.Gate = (*redislease.Gate)(nil)

func (a *gateAdapter) Commit(ctx context.Context, t leasefence.Token, value string) error {
	return a.Gate.Commit(ctx, t, func(ctx context.Context, p redis.Pipeliner) error {
		p.RPush(ctx, a.data, value)
		return nil
	})
}

func (a *gateAdapter) Rejections(ctx context.Context) ([]leasefence.Rejection, error) {
	rs, _, err := a.RejectionsSince(ctx, 0)
	return rs, err
}

func (a *gateAdapter) Written(ctx context.Context) ([]string, error) {
	return a.rdb.LRange(ctx, a.data, 0, -1).Result()
}

// harness is the adapter as the conformance suite takes it.
func (a *gateAdapter) harness() leasetest.GateHarness {
	return leasetest.GateHarness{Gate: a.Gate, Commit: a.Commit, Written: a.Written}
}

// openGate opens the gate of resource under prefix, its data in a list of
// the prefix's hash slot (as a cluster needs) outside the package's keys.
func openGate(t testing.TB, c redis.UniversalClient, prefix, resource string, opts redislease.GateOptions) *gateAdapter {
	t.Helper()
	opts.Prefix = prefix
	g, err := redislease.NewGate(c, resource, opts)
	if err != nil {
		t.Fatal(err)
	}
	return &gateAdapter{Gate: g, rdb: c, data: "{" + prefix + "}app:" + resource}
}

func TestGateConformance(t *testing.T) {
	c := needRedis(t)
	leasetest.TestGate(t, func(t testing.TB, resource string) leasetest.GateHarness {
		return openGate(t, c, newPrefix(t), resource, redislease.GateOptions{}).harness()
	})
}

func tok(resource, holder string, f leasefence.Fence) leasefence.Token {
	return leasefence.Token{Resource: resource, Holder: holder, Fence: f}
}

// wantState fails t unless g shows floor, the written values and the log.
func wantState(t *testing.T, g *gateAdapter, floor leasefence.Token, written []string, log ...leasefence.Rejection) {
	t.Helper()
	ctx := t.Context()
	if got, err := g.Floor(ctx); err != nil || got != floor {
		t.Errorf("Floor = %v, %v; want %v", got, err, floor)
	}
	if got, err := g.Written(ctx); err != nil || !slices.Equal(got, written) {
		t.Errorf("written %q, %v; want %q", got, err, written)
	}
	if got, err := g.Rejections(ctx); err != nil || !slices.Equal(got, log) {
		t.Errorf("log %+v, %v; want %+v", got, err, log)
	}
}

func TestNewGateRefusesBadArguments(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer c.Close()
	var nilClient *redis.Client
	for _, tc := range []struct {
		name     string
		rdb      redis.UniversalClient
		resource string
		opts     redislease.GateOptions
	}{
		{"nil client", nil, "r", redislease.GateOptions{}},
		{"nil *redis.Client", nilClient, "r", redislease.GateOptions{}},
		{"no resource", c, "", redislease.GateOptions{}},
		{"oversized resource", c, strings.Repeat("r", leasefence.MaxIDLen+1), redislease.GateOptions{}},
		{"prefix with a brace", c, "r", redislease.GateOptions{Prefix: "}"}},
		{"negative log", c, "r", redislease.GateOptions{RejectionLog: -1}},
	} {
		if _, err := redislease.NewGate(tc.rdb, tc.resource, tc.opts); !errors.Is(err, leasefence.ErrInvalidRequest) {
			t.Errorf("NewGate with %s = %v, want ErrInvalidRequest", tc.name, err)
		}
	}
}

func TestGateBadCalls(t *testing.T) {
	c := needRedis(t)
	g := openGate(t, c, newPrefix(t), "r", redislease.GateOptions{})
	var nilCtx context.Context
	ok := tok("r", "a", 1)
	noop := func(context.Context, redis.Pipeliner) error { return nil }
	for name, err := range map[string]error{
		"Commit(nil ctx)":              g.Gate.Commit(nilCtx, ok, noop),
		"Commit(nil write)":            g.Gate.Commit(t.Context(), ok, nil),
		"Commit(oversized holder)":     g.Gate.Commit(t.Context(), tok("r", strings.Repeat("h", leasefence.MaxIDLen+1), 1), noop),
		"Commit(fence above MaxFence)": g.Gate.Commit(t.Context(), tok("r", "a", redislease.MaxFence+1), noop),
		"Admit(nil ctx)":               g.Admit(nilCtx, ok),
		"Floor(nil ctx)":               func() error { _, err := g.Floor(nilCtx); return err }(),
		"RejectionsSince(nil ctx)":     func() error { _, _, err := g.RejectionsSince(nilCtx, 0); return err }(),
		"RejectionCount(nil ctx)":      func() error { _, err := g.RejectionCount(nilCtx); return err }(),
	} {
		if !errors.Is(err, leasefence.ErrInvalidRequest) {
			t.Errorf("%s = %v, want ErrInvalidRequest", name, err)
		}
	}
	wantState(t, g, leasefence.Token{}, nil)
}

// A write that fails sends nothing: its error comes back as is, and neither
// its commands nor the floor's raise are applied.
func TestGateWriteErrorSendsNothing(t *testing.T) {
	c := needRedis(t)
	g := openGate(t, c, newPrefix(t), "r", redislease.GateOptions{})
	boom := errors.New("boom")
	err := g.Gate.Commit(t.Context(), tok("r", "a", 3), func(ctx context.Context, p redis.Pipeliner) error {
		p.RPush(ctx, g.data, "half")
		return boom
	})
	if err != boom {
		t.Fatalf("Commit with a failing write = %v, want its error as is", err)
	}
	wantState(t, g, leasefence.Token{}, nil)
}

// The commands queued by the write get their replies, and the write's pipe
// refuses to run them itself.
func TestGateCommandsGetTheirReplies(t *testing.T) {
	c := needRedis(t)
	g := openGate(t, c, newPrefix(t), "r", redislease.GateOptions{})
	var push *redis.IntCmd
	var get *redis.StringCmd
	var execErr error
	err := g.Gate.Commit(t.Context(), tok("r", "a", 3), func(ctx context.Context, p redis.Pipeliner) error {
		push = p.RPush(ctx, g.data, "v1", "v2")
		get = p.LIndex(ctx, g.data, 1)
		_, execErr = p.Exec(ctx)
		p.Get(ctx, g.data+":missing") // redis.Nil is an answer, not a failure
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if execErr == nil {
		t.Error("the write's pipe ran Exec; want it refused")
	}
	if n, err := push.Result(); n != 2 || err != nil {
		t.Errorf("RPUSH replied %d, %v; want 2", n, err)
	}
	if v, err := get.Result(); v != "v2" || err != nil {
		t.Errorf("LINDEX replied %q, %v; want v2", v, err)
	}
	wantState(t, g, tok("r", "a", 3), []string{"v1", "v2"})
}

func TestGateRefusesReservedKeys(t *testing.T) {
	c := needRedis(t)
	prefix := newPrefix(t)
	g := openGate(t, c, prefix, "r", redislease.GateOptions{})
	tag := "{" + prefix + "}"
	for name, write := range map[string]func(context.Context, redis.Pipeliner){
		"SET of the floor":         func(ctx context.Context, p redis.Pipeliner) { p.Set(ctx, tag+"gate:r:floor", "x", 0) },
		"DEL of a holder key":      func(ctx context.Context, p redis.Pipeliner) { p.Del(ctx, "ok", tag+"holder:r") },
		"SET of the fence counter": func(ctx context.Context, p redis.Pipeliner) { p.Set(ctx, tag+"fence", "1", 0) },
		"RENAME onto a log":        func(ctx context.Context, p redis.Pipeliner) { p.Rename(ctx, g.data, tag+"gate:other:log") },
		"EVAL":                     func(ctx context.Context, p redis.Pipeliner) { p.Eval(ctx, "return 1", nil) },
		"FLUSHDB":                  func(ctx context.Context, p redis.Pipeliner) { p.FlushDB(ctx) },
	} {
		err := g.Gate.Commit(t.Context(), tok("r", "a", 2), func(ctx context.Context, p redis.Pipeliner) error {
			p.RPush(ctx, g.data, name)
			write(ctx, p)
			return nil
		})
		if !errors.Is(err, redislease.ErrReservedKey) {
			t.Errorf("Commit with %s = %v, want ErrReservedKey", name, err)
		}
	}
	wantState(t, g, leasefence.Token{}, nil)
}

// Redis applies the rest of a transaction whose queued command fails: the
// floor stays raised, the other command lands, and the error names the one
// that failed.
func TestGateFailedCommandIsNotRolledBack(t *testing.T) {
	c := needRedis(t)
	prefix := newPrefix(t)
	g := openGate(t, c, prefix, "r", redislease.GateOptions{})
	str := "{" + prefix + "}app:a-string"
	if err := c.Set(t.Context(), str, "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	err := g.Gate.Commit(t.Context(), tok("r", "a", 4), func(ctx context.Context, p redis.Pipeliner) error {
		p.RPush(ctx, g.data, "landed")
		p.LPush(ctx, str, "wrong type")
		return nil
	})
	if !errors.Is(err, redislease.ErrCommandFailed) || !strings.Contains(err.Error(), "lpush") || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Fatalf("Commit with a failing command = %v, want ErrCommandFailed naming lpush", err)
	}
	wantState(t, g, tok("r", "a", 4), []string{"landed"})
}

// The log retains the newest RejectionLog refusals, counts them all, and
// tells a reader how many it missed.
func TestGateRejectionLogRetention(t *testing.T) {
	c := needRedis(t)
	g := openGate(t, c, newPrefix(t), "r", redislease.GateOptions{RejectionLog: 2})
	ctx := t.Context()
	if err := g.Commit(ctx, tok("r", "new", 10), "new"); err != nil {
		t.Fatal(err)
	}
	for f := range leasefence.Fence(3) {
		if err := g.Commit(ctx, tok("r", "old", f+1), "old"); !errors.Is(err, leasefence.ErrStaleFence) {
			t.Fatalf("stale Commit = %v", err)
		}
	}
	if n, err := g.RejectionCount(ctx); n != 3 || err != nil {
		t.Fatalf("RejectionCount = %d, %v; want 3", n, err)
	}
	rs, missed, err := g.RejectionsSince(ctx, 0)
	if err != nil || missed != 1 || len(rs) != 2 || rs[0].Seq != 2 || rs[1].Seq != 3 || rs[1].Fence != 3 || rs[1].FloorFence != 10 {
		t.Fatalf("RejectionsSince(0) = %+v, missed %d, %v; want Seqs 2 and 3, one missed", rs, missed, err)
	}
	if rs, missed, err := g.RejectionsSince(ctx, 2); err != nil || missed != 0 || len(rs) != 1 || rs[0].Seq != 3 {
		t.Fatalf("RejectionsSince(2) = %+v, missed %d, %v; want Seq 3 alone", rs, missed, err)
	}
	if rs, _, err := g.RejectionsSince(ctx, 3); err != nil || len(rs) != 0 {
		t.Fatalf("RejectionsSince(3) = %+v, %v; want none", rs, err)
	}
}

// Two processes (two clients, two Gate values) on one resource are one gate:
// racing committers land their writes in fence order, every refusal logged.
func TestGateAcrossProcesses(t *testing.T) {
	c := needRedis(t)
	other := redis.NewClient(c.Options())
	defer other.Close()
	prefix := newPrefix(t)
	gates := []*gateAdapter{openGate(t, c, prefix, "r", redislease.GateOptions{}), openGate(t, other, prefix, "r", redislease.GateOptions{})}
	var wg sync.WaitGroup
	var mu sync.Mutex
	refused := 0
	for i := range 20 {
		wg.Go(func() {
			g := gates[i%2]
			f := leasefence.Fence(i + 1)
			err := g.Commit(t.Context(), tok("r", "h"+string(rune('a'+i)), f), string(rune('a'+i)))
			switch {
			case err == nil:
			case errors.Is(err, leasefence.ErrStaleFence):
				mu.Lock()
				refused++
				mu.Unlock()
			default:
				t.Errorf("Commit = %v", err)
			}
		})
	}
	wg.Wait()
	written, err := gates[0].Written(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.IsSorted(written) || len(written)+refused != 20 {
		t.Fatalf("written %q with %d refused: want fence order and every commit accounted for", written, refused)
	}
	if n, err := gates[1].RejectionCount(t.Context()); err != nil || int(n) != refused {
		t.Fatalf("RejectionCount = %d, %v; want %d", n, err, refused)
	}
}

// A floor key that is not a gate's floor fails Commit with an error, and
// the WATCH Commit left on its connection is released: a change to the key
// afterwards does not mark the connection, which the pool hands on, as one
// whose next EXEC must fail (CLIENT LIST flag "d").
func TestGateCorruptFloorLeavesNoWatch(t *testing.T) {
	c := needRedis(t)
	opts := *c.Options()
	opts.PoolSize = 1 // every call reuses the one connection
	one := redis.NewClient(&opts)
	defer one.Close()
	id, err := one.ClientID(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	prefix := newPrefix(t)
	g := openGate(t, one, prefix, "r", redislease.GateOptions{})
	floorKey := "{" + prefix + "}gate:r:floor"
	if err := c.Set(t.Context(), floorKey, "not a hash", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := g.Commit(t.Context(), tok("r", "a", 1), "v"); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Fatalf("Commit over a corrupt floor = %v, want the WRONGTYPE error", err)
	}
	if err := c.Set(t.Context(), floorKey, "changed", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if again, _ := one.ClientID(t.Context()).Result(); again != id {
		t.Fatalf("the pool of one connection dialled another (%d, then %d)", id, again)
	}
	wantNoWatch(t, c, id)
}

// wantNoWatch fails t if the connection id WATCHes a key that has changed
// since (CLIENT LIST flag "d": its next EXEC would fail).
func wantNoWatch(t *testing.T, c *redis.Client, id int64) {
	t.Helper()
	list, err := c.ClientList(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(list) {
		if strings.HasPrefix(line, "id="+strconv.FormatInt(id, 10)+" ") && strings.Contains(line, " flags=d ") {
			t.Fatalf("the connection still WATCHes the floor after the Commit: %s", line)
		}
	}
}

// A Commit of the floor's own token with nothing to write sends no EXEC, and
// still leaves no WATCH behind.
func TestGateEmptyCommitLeavesNoWatch(t *testing.T) {
	c := needRedis(t)
	opts := *c.Options()
	opts.PoolSize = 1
	one := redis.NewClient(&opts)
	defer one.Close()
	id, err := one.ClientID(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	prefix := newPrefix(t)
	g := openGate(t, one, prefix, "r", redislease.GateOptions{})
	nothing := func(context.Context, redis.Pipeliner) error { return nil }
	for range 2 { // the second is the floor's own token: nothing to raise
		if err := g.Gate.Commit(t.Context(), tok("r", "a", 1), nothing); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.Admit(t.Context(), tok("r", "b", 2)); err != nil {
		t.Fatal(err)
	}
	wantNoWatch(t, c, id)
}

// The same suite through a client that must WATCH before it reads the floor
// (a ring here, of one shard, as a cluster client does): the path that costs
// a third round trip.
func TestGateConformanceWatchFirst(t *testing.T) {
	c := needRedis(t)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"one": c.Options().Addr}, DB: c.Options().DB})
	defer ring.Close()
	leasetest.TestGate(t, func(t testing.TB, resource string) leasetest.GateHarness {
		return openGate(t, ring, newPrefix(t), resource, redislease.GateOptions{}).harness()
	})
}
