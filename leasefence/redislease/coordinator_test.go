package redislease_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/leasetest"
	"github.com/leasefence/lab/leasefence/redislease"
)

const testTTL = 400 * time.Millisecond

func newCoordinator(t testing.TB, c redis.UniversalClient, opts redislease.Options) *redislease.Coordinator {
	t.Helper()
	if opts.Prefix == "" {
		opts.Prefix = newPrefix(t)
	}
	if opts.TTL == 0 {
		opts.TTL = testTTL
	}
	coord, err := redislease.New(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	return coord
}

func TestConformance(t *testing.T) {
	t.Parallel()
	c := needRedis(t)
	leasetest.TestService(t, func(t testing.TB) leasetest.Harness {
		return leasetest.Harness{
			Service: newCoordinator(t, c, redislease.Options{}),
			TTL:     testTTL,
			Elapse:  time.Sleep,
			Settle:  20 * time.Millisecond, // Redis expires a key at its PX, to the millisecond
		}
	})
}

func TestNewRefusesBadOptions(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer c.Close()
	var nilClient *redis.Client
	for _, tc := range []struct {
		name string
		rdb  redis.UniversalClient
		opts redislease.Options
	}{
		{"nil client", nil, redislease.Options{TTL: time.Second}},
		{"nil *redis.Client", nilClient, redislease.Options{TTL: time.Second}},
		{"no TTL", c, redislease.Options{}},
		{"negative TTL", c, redislease.Options{TTL: -time.Second}},
		{"TTL below 1ms", c, redislease.Options{TTL: time.Microsecond}},
		{"TTL not whole ms", c, redislease.Options{TTL: 1500 * time.Microsecond}},
		{"replay window not whole ms", c, redislease.Options{TTL: time.Second, ReplayWindow: time.Microsecond}},
		{"prefix with a brace", c, redislease.Options{TTL: time.Second, Prefix: "a{b}:"}},
		{"MinFence at MaxFence", c, redislease.Options{TTL: time.Second, MinFence: redislease.MaxFence}},
	} {
		if _, err := redislease.New(tc.rdb, tc.opts); !errors.Is(err, leasefence.ErrInvalidRequest) {
			t.Errorf("New with %s = %v, want ErrInvalidRequest", tc.name, err)
		}
	}
	if _, err := redislease.New(c, redislease.Options{TTL: time.Millisecond}); err != nil {
		t.Errorf("New with a 1ms TTL = %v", err)
	}
}

// Names up to leasefence.MaxIDLen bytes are accepted; longer ones are refused before
// anything is sent.
func TestNameBound(t *testing.T) {
	c := needRedis(t)
	coord := newCoordinator(t, c, redislease.Options{})
	ok, long := strings.Repeat("h", leasefence.MaxIDLen), strings.Repeat("h", leasefence.MaxIDLen+1)
	for _, req := range []leasefence.AcquireRequest{
		{RequestID: "id-1", Holder: long, Resource: "r"},
		{RequestID: "id-2", Holder: "a", Resource: long},
		{RequestID: long, Holder: "a", Resource: "r"},
	} {
		if _, err := coord.Acquire(t.Context(), req); !errors.Is(err, leasefence.ErrInvalidRequest) {
			t.Errorf("Acquire with a name of %d bytes = %v, want ErrInvalidRequest", leasefence.MaxIDLen+1, err)
		}
	}
	if _, err := coord.Release(t.Context(), leasefence.Token{Resource: "r", Holder: long, Fence: 1}); !errors.Is(err, leasefence.ErrInvalidRequest) {
		t.Errorf("Release with an oversized holder = %v, want ErrInvalidRequest", err)
	}
	out, err := coord.Acquire(t.Context(), leasefence.AcquireRequest{RequestID: ok, Holder: ok, Resource: ok})
	if err != nil || !out.OK {
		t.Fatalf("Acquire with names of leasefence.MaxIDLen bytes = %+v, %v", out, err)
	}
}

func newClient(t *testing.T, holder string) *leasefence.Client {
	t.Helper()
	c, err := leasefence.NewClient(leasefence.ClientOptions{Clock: leasefence.NewMonotonicClock(leasefence.Domain(holder)), Holder: holder})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A retry after a lost reply is answered from Redis, whichever coordinator
// process receives it: two Coordinators on two clients share one prefix.
func TestRetryAcrossCoordinatorProcesses(t *testing.T) {
	c := needRedis(t)
	other := redis.NewClient(c.Options()) // a pool of its own, as another process has
	defer other.Close()
	prefix := newPrefix(t)
	first := newCoordinator(t, c, redislease.Options{Prefix: prefix})
	second := newCoordinator(t, other, redislease.Options{Prefix: prefix})
	client := newClient(t, "agent-a")
	req, _ := client.BeginAcquire("r")
	granted, err := first.Acquire(t.Context(), req) // its reply is "lost"
	if err != nil || !granted.OK {
		t.Fatalf("Acquire = %+v, %v", granted, err)
	}
	retried, err := second.Acquire(t.Context(), req)
	if err != nil || !retried.OK || retried.Grant.Token != granted.Grant.Token || retried.Grant.TTL != granted.Grant.TTL {
		t.Fatalf("retry through another coordinator = %+v, %v; want %+v", retried, err, granted.Grant)
	}
	if _, err := client.CompleteAcquire(req, retried.Grant); err != nil {
		t.Fatal(err)
	}
	if out, err := first.Release(t.Context(), granted.Grant.Token); err != nil || !out.OK {
		t.Fatalf("Release = %+v, %v", out, err)
	}
	if out, err := second.Acquire(t.Context(), req); err != nil || out.Reason != leasefence.ReasonStaleRequest {
		t.Fatalf("retry after release = %+v, %v; want stale-request", out, err)
	}
}

// Coordinators on one prefix share one counter but each grants its own TTL,
// and a retry is answered with the TTL of the grant it repeats.
func TestCoordinatorsWithDifferentTTLs(t *testing.T) {
	c := needRedis(t)
	prefix := newPrefix(t)
	long := newCoordinator(t, c, redislease.Options{Prefix: prefix, TTL: 5 * time.Second})
	short := newCoordinator(t, c, redislease.Options{Prefix: prefix, TTL: 200 * time.Millisecond})
	a, b := newClient(t, "agent-a"), newClient(t, "agent-b")
	reqA, _ := a.BeginAcquire("r1")
	ga, err := long.Acquire(t.Context(), reqA)
	if err != nil || !ga.OK || ga.Grant.TTL != 5*time.Second {
		t.Fatalf("Acquire through the long coordinator = %+v, %v", ga, err)
	}
	reqB, _ := b.BeginAcquire("r2")
	gb, err := short.Acquire(t.Context(), reqB)
	if err != nil || !gb.OK || gb.Grant.TTL != 200*time.Millisecond || gb.Grant.Token.Fence <= ga.Grant.Token.Fence {
		t.Fatalf("Acquire through the short coordinator = %+v, %v; want TTL 200ms and a fence above %d", gb, err, ga.Grant.Token.Fence)
	}
	if again, err := short.Acquire(t.Context(), reqA); err != nil || !again.OK || again.Grant.TTL != 5*time.Second {
		t.Fatalf("retry of the long grant through the short coordinator = %+v, %v; want its own 5s TTL", again, err)
	}
}

func TestMinFence(t *testing.T) {
	c := needRedis(t)
	coord := newCoordinator(t, c, redislease.Options{MinFence: 1000})
	out, err := coord.Acquire(t.Context(), leasefence.AcquireRequest{RequestID: "id", Holder: "a", Resource: "r"})
	if err != nil || !out.OK || out.Grant.Token.Fence != 1001 {
		t.Fatalf("first Acquire with MinFence 1000 = %+v, %v; want fence 1001", out, err)
	}
}

// Every key one prefix writes carries the prefix as its hash tag, so all of
// them are in one slot of a Redis Cluster.
func TestKeysShareOneHashSlot(t *testing.T) {
	c := needRedis(t)
	prefix := newPrefix(t)
	coord := newCoordinator(t, c, redislease.Options{Prefix: prefix})
	out, err := coord.Acquire(t.Context(), leasefence.AcquireRequest{RequestID: "id", Holder: "a", Resource: "r"})
	if err != nil || !out.OK {
		t.Fatalf("Acquire = %+v, %v", out, err)
	}
	g, err := redislease.NewGate(c, "r", redislease.GateOptions{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Commit(t.Context(), out.Grant.Token, func(ctx context.Context, p redis.Pipeliner) error { return nil }); err != nil {
		t.Fatal(err)
	}
	_ = g.Commit(t.Context(), leasefence.Token{Resource: "r", Holder: "old", Fence: 0 + 1}, func(ctx context.Context, p redis.Pipeliner) error { return nil })
	keys, err := c.Keys(t.Context(), `\{`+prefix+"}*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) < 5 {
		t.Fatalf("keys %q: want the counter, holder, last, request, floor and log keys", keys)
	}
	for _, k := range keys {
		if tag := hashTag(k); tag != prefix {
			t.Errorf("key %q has hash tag %q, want %q", k, tag, prefix)
		}
	}
}

// hashTag is the part of key Redis Cluster hashes: between the first "{"
// and the next "}", when that is not empty.
func hashTag(key string) string {
	_, rest, ok := strings.Cut(key, "{")
	if !ok {
		return key
	}
	tag, _, ok := strings.Cut(rest, "}")
	if !ok || tag == "" {
		return key
	}
	return tag
}

// A retry after the replay window is a fresh acquisition: the holder, who
// still holds the lease, is told it already does.
func TestReplayWindow(t *testing.T) {
	c := needRedis(t)
	coord := newCoordinator(t, c, redislease.Options{TTL: 5 * time.Second, ReplayWindow: 50 * time.Millisecond})
	req := leasefence.AcquireRequest{RequestID: "id", Holder: "a", Resource: "r"}
	if out, err := coord.Acquire(t.Context(), req); err != nil || !out.OK {
		t.Fatalf("Acquire = %+v, %v", out, err)
	}
	time.Sleep(100 * time.Millisecond)
	if out, err := coord.Acquire(t.Context(), req); err != nil || out.Reason != leasefence.ReasonAlreadyHeld {
		t.Fatalf("retry after the window = %+v, %v; want already-held", out, err)
	}
}

// The counter never issues a fence beyond MaxFence, and a token above it
// was never issued.
func TestFencesExhausted(t *testing.T) {
	c := needRedis(t)
	prefix := newPrefix(t)
	coord := newCoordinator(t, c, redislease.Options{Prefix: prefix})
	if err := c.Set(t.Context(), "{"+prefix+"}fence", uint64(redislease.MaxFence), 0).Err(); err != nil {
		t.Fatal(err)
	}
	if out, err := coord.Acquire(t.Context(), leasefence.AcquireRequest{RequestID: "id", Holder: "a", Resource: "r"}); !errors.Is(err, leasefence.ErrFencesExhausted) || out.OK {
		t.Fatalf("Acquire past MaxFence = %+v, %v; want ErrFencesExhausted", out, err)
	}
	beyond := leasefence.Token{Resource: "r", Holder: "a", Fence: redislease.MaxFence + 1}
	if out, err := coord.Release(t.Context(), beyond); err != nil || out.Reason != leasefence.ReasonUnknown {
		t.Fatalf("Release above MaxFence = %+v, %v; want unknown", out, err)
	}
	if out, err := coord.Acquire(t.Context(), leasefence.AcquireRequest{RequestID: "id2", Holder: "a", Resource: "r"}); out.OK || err == nil {
		t.Fatalf("a second Acquire past MaxFence = %+v, %v", out, err)
	}
}
