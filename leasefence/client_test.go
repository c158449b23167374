package leasefence_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence"
)

// TestSendTimeAnchoring is the slow reply, for an acquire and for a
// renewal: sent at 0, processed at 40ms, answered at 900ms, TTL
// 1000ms. The holder's deadline is 1000ms after the send, less the skew;
// never 1900ms, which is what "reply arrival + TTL" would give.
func TestSendTimeAnchoring(t *testing.T) {
	for _, skew := range []time.Duration{0, ms(100)} {
		t.Run(fmt.Sprint("skew ", skew), func(t *testing.T) {
			// Same true-time origin, different domains: agent reads
			// 0 at true 0, the coordinator reads 5s at true 0.
			agent := leasefence.NewManualClock("agent-a")
			coordClock := leasefence.NewManualClock("coordinator", leasefence.WithStart(5*time.Second))
			elapse := func(d time.Duration) { agent.Advance(d); coordClock.Advance(d) }
			coord := newCoordinator(t, coordClock, ms(1000))
			client := newClient(t, agent, "agent-a", skew)

			// Acquire.
			req, err := client.BeginAcquire("r") // true 0
			if err != nil {
				t.Fatal(err)
			}
			if req.SentAt != leasefence.At("agent-a", 0) {
				t.Fatalf("SentAt = %v, want agent-a+0s", req.SentAt)
			}
			elapse(ms(40))
			out, err := coord.Acquire(req) // true 40ms
			if err != nil || !out.OK {
				t.Fatal(out, err)
			}
			if out.Grant.CoordinatorExpiresAt != leasefence.At("coordinator", 5*time.Second+ms(1040)) {
				t.Fatalf("coordinator expiry %v, want coordinator+6.04s (true 1040ms)", out.Grant.CoordinatorExpiresAt)
			}
			elapse(ms(860))
			replyAt, _ := agent.Now() // true 900ms
			lease, err := client.CompleteAcquire(req, out.Grant)
			if err != nil {
				t.Fatal(err)
			}
			want := leasefence.At("agent-a", ms(1000)-skew)
			naive := replyAt.Add(out.Grant.TTL)
			if lease.Deadline != want {
				t.Errorf("acquire deadline = %v, want %v (send + TTL - skew)", lease.Deadline, want)
			}
			if naive != leasefence.At("agent-a", ms(1900)) || lease.Deadline == naive {
				t.Errorf("naive deadline %v, lease deadline %v", naive, lease.Deadline)
			}
			if lease.TTL != ms(1000) || lease.Token != tok("r", "agent-a", 1) {
				t.Errorf("lease = %+v", lease)
			}

			// Renewal, one second later in true time: sent at 1000ms+,
			// processed 40ms later, answered 860ms after that.
			elapse(ms(50)) // true 950ms: still live at the coordinator
			rreq, err := client.BeginRenewal(lease)
			if err != nil {
				t.Fatal(err)
			}
			elapse(ms(40))
			rout, err := coord.Renew(rreq) // true 990ms
			if err != nil || !rout.OK {
				t.Fatal(rout, err)
			}
			elapse(ms(860))
			renewed, err := client.CompleteRenewal(rreq, rout.Grant)
			if err != nil {
				t.Fatal(err)
			}
			if want := leasefence.At("agent-a", ms(950+1000)-skew); renewed.Deadline != want {
				t.Errorf("renewal deadline = %v, want %v (send + TTL - skew)", renewed.Deadline, want)
			}
			if renewed.Token != lease.Token {
				t.Errorf("renewal changed the token: %v -> %v", lease.Token, renewed.Token)
			}
			// The first lease is a value of its own: the renewal did not move it.
			if lease.Deadline != leasefence.At("agent-a", ms(1000)-skew) {
				t.Errorf("renewal moved the old lease's deadline to %v", lease.Deadline)
			}
		})
	}
}

// TestContainment: for any round trip (send <= process <= reply), clocks at
// the same rate with arbitrary offsets, and skew >= 0, the holder's deadline
// mapped to true time is at or before the coordinator's expiry mapped to
// true time. Meanwhile the naive "reply arrival + TTL" overshoots whenever
// the reply takes any time at all.
func TestContainment(t *testing.T) {
	rng := rand.New(rand.NewPCG(0x1ea5e, 0xfe9ce))
	randDur := func(maxExcl time.Duration) time.Duration {
		if rng.IntN(8) == 0 {
			return 0 // zero delays are the edge of the property
		}
		return time.Duration(rng.Int64N(int64(maxExcl)))
	}
	var roundTrips, naiveOvershoots int
	for trial := range 160 {
		ttl := time.Millisecond + time.Duration(rng.Int64N(int64(10*time.Second)))
		skew := time.Duration(0)
		if rng.IntN(2) == 0 {
			skew = time.Duration(rng.Int64N(int64(ttl / 4)))
		}
		// Offsets of the two clocks from true time (true time starts at 0).
		agentOffset := time.Duration(rng.Int64N(int64(time.Hour))) - 30*time.Minute
		coordOffset := time.Duration(rng.Int64N(int64(time.Hour))) - 30*time.Minute
		agent := leasefence.NewManualClock("agent", leasefence.WithStart(agentOffset))
		coordClock := leasefence.NewManualClock("coord", leasefence.WithStart(coordOffset))
		var now time.Duration // true time
		elapse := func(d time.Duration) { now += d; agent.Advance(d); coordClock.Advance(d) }
		elapse(randDur(time.Minute))

		coord := newCoordinator(t, coordClock, ttl)
		client := newClient(t, agent, "agent", skew)

		check := func(kind string, sentTrue, processedTrue, replyTrue time.Duration, g leasefence.Grant, l *leasefence.Lease) {
			t.Helper()
			roundTrips++
			holderTrue := l.Deadline.Offset() - agentOffset
			coordTrue := g.CoordinatorExpiresAt.Offset() - coordOffset
			if holderTrue > coordTrue {
				t.Fatalf("trial %d %s: holder deadline at true %v is after the coordinator's expiry at true %v (send %v, process %v, reply %v, ttl %v, skew %v)",
					trial, kind, holderTrue, coordTrue, sentTrue, processedTrue, replyTrue, ttl, skew)
			}
			if holderTrue != sentTrue+ttl-skew || coordTrue != processedTrue+ttl {
				t.Fatalf("trial %d %s: holder %v (want %v), coordinator %v (want %v)",
					trial, kind, holderTrue, sentTrue+ttl-skew, coordTrue, processedTrue+ttl)
			}
			if naiveTrue := replyTrue + ttl; naiveTrue > coordTrue {
				naiveOvershoots++
			}
		}

		req, err := client.BeginAcquire("r")
		if err != nil {
			t.Fatal(err)
		}
		sent := now
		elapse(randDur(ttl))
		processed := now
		out, err := coord.Acquire(req)
		if err != nil || !out.OK {
			t.Fatal(out, err)
		}
		elapse(randDur(ttl))
		lease, err := client.CompleteAcquire(req, out.Grant)
		if err != nil {
			t.Fatal(err)
		}
		check("acquire", sent, processed, now, out.Grant, lease)
		coordExpiry := processed + ttl

		for range rng.IntN(4) {
			// Renew somewhere before the coordinator's expiry.
			if left := coordExpiry - now; left > 1 {
				elapse(time.Duration(rng.Int64N(int64(left) / 2)))
			}
			rreq, err := client.BeginRenewal(lease)
			if err != nil {
				t.Fatal(err)
			}
			sent := now
			elapse(randDur(ttl))
			processed := now
			rout, err := coord.Renew(rreq)
			if err != nil {
				t.Fatal(err)
			}
			if processed >= coordExpiry {
				if rout.Reason != leasefence.ReasonExpired {
					t.Fatalf("trial %d: renewal processed at %v after expiry %v answered %+v", trial, processed, coordExpiry, rout)
				}
				break
			}
			if !rout.OK {
				t.Fatalf("trial %d: renewal at %v before expiry %v answered %+v", trial, processed, coordExpiry, rout)
			}
			elapse(randDur(ttl))
			renewed, err := client.CompleteRenewal(rreq, rout.Grant)
			if err != nil {
				t.Fatal(err)
			}
			check("renewal", sent, processed, now, rout.Grant, renewed)
			lease, coordExpiry = renewed, processed+ttl
		}
	}
	if roundTrips < 200 {
		t.Errorf("only %d round trips checked, want >= 200", roundTrips)
	}
	if naiveOvershoots == 0 {
		t.Errorf("the naive deadline never overshot: the delays did not exercise the property")
	}
	t.Logf("%d round trips contained; the naive deadline overshot in %d", roundTrips, naiveOvershoots)
}

// grantFor asks coord for a lease on req and fails unless granted.
func grantFor(t *testing.T, coord *leasefence.Coordinator, req leasefence.AcquireRequest) leasefence.Grant {
	t.Helper()
	out, err := coord.Acquire(req)
	if err != nil || !out.OK {
		t.Fatalf("Acquire = %+v, %v", out, err)
	}
	return out.Grant
}

func TestCompleteSingleUse(t *testing.T) {
	coord := newCoordinator(t, leasefence.NewManualClock("coordinator"), time.Second)
	client := newClient(t, leasefence.NewManualClock("agent-a"), "agent-a", 0)

	req, _ := client.BeginAcquire("r")
	g := grantFor(t, coord, req)
	lease, err := client.CompleteAcquire(req, g)
	if err != nil || lease.Deadline != leasefence.At("agent-a", time.Second) {
		t.Fatalf("first completion = %+v, %v", lease, err)
	}
	for range 2 {
		l, err := client.CompleteAcquire(req, g)
		if !errors.Is(err, leasefence.ErrRequestUsed) || l != nil {
			t.Errorf("second completion = %+v, %v; want nil, ErrRequestUsed", l, err)
		}
	}
	// Used is checked before the grant: a mismatched grant for a used
	// request is still ErrRequestUsed.
	bad := g
	bad.RequestID = "other"
	if _, err := client.CompleteAcquire(req, bad); !errors.Is(err, leasefence.ErrRequestUsed) {
		t.Errorf("used request with another grant: %v, want ErrRequestUsed", err)
	}

	// The same for a renewal.
	rreq, _ := client.BeginRenewal(lease)
	rout, _ := coord.Renew(rreq)
	if _, err := client.CompleteRenewal(rreq, rout.Grant); err != nil {
		t.Fatal(err)
	}
	if l, err := client.CompleteRenewal(rreq, rout.Grant); !errors.Is(err, leasefence.ErrRequestUsed) || l != nil {
		t.Errorf("second renewal completion = %+v, %v; want ErrRequestUsed", l, err)
	}
}

func TestCompleteUnknownRequest(t *testing.T) {
	coord := newCoordinator(t, leasefence.NewManualClock("coordinator"), time.Second)
	client := newClient(t, leasefence.NewManualClock("agent-a"), "agent-a", 0)
	other := newClient(t, leasefence.NewManualClock("agent-a"), "agent-a", 0)

	acq, _ := client.BeginAcquire("r")
	g := grantFor(t, coord, acq)
	lease, err := client.CompleteAcquire(acq, g)
	if err != nil {
		t.Fatal(err)
	}
	ren, _ := client.BeginRenewal(lease)
	rout, _ := coord.Renew(ren)
	if !rout.OK {
		t.Fatal(rout)
	}

	tests := []struct {
		name     string
		complete func() (*leasefence.Lease, error)
	}{
		{"never begun", func() (*leasefence.Lease, error) {
			req := leasefence.AcquireRequest{RequestID: "made-up", Holder: "agent-a", Resource: "r", SentAt: leasefence.At("agent-a", 0)}
			g := g
			g.RequestID = "made-up"
			return client.CompleteAcquire(req, g)
		}},
		{"begun by another client with the same holder", func() (*leasefence.Lease, error) {
			return other.CompleteAcquire(acq, g)
		}},
		{"acquire completed as a renewal", func() (*leasefence.Lease, error) {
			return client.CompleteRenewal(leasefence.RenewRequest{RequestID: acq.RequestID, Token: g.Token}, g)
		}},
		{"renewal completed as an acquire", func() (*leasefence.Lease, error) {
			return client.CompleteAcquire(leasefence.AcquireRequest{RequestID: ren.RequestID, Holder: "agent-a", Resource: "r"}, rout.Grant)
		}},
		{"empty id", func() (*leasefence.Lease, error) {
			return client.CompleteAcquire(leasefence.AcquireRequest{}, leasefence.Grant{})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := tt.complete()
			if !errors.Is(err, leasefence.ErrUnknownRequest) || l != nil {
				t.Errorf("= %+v, %v; want nil, ErrUnknownRequest", l, err)
			}
		})
	}
	// The kind checks did not use either request up.
	if _, err := client.CompleteRenewal(ren, rout.Grant); err != nil {
		t.Errorf("renewal after the wrong-kind attempt: %v", err)
	}
	// The acquire was completed before all this: used, whatever the kind
	// mix-ups did.
	if _, err := client.CompleteAcquire(acq, g); !errors.Is(err, leasefence.ErrRequestUsed) {
		t.Errorf("acquire: %v, want ErrRequestUsed", err)
	}
}

func TestCompleteGrantMismatch(t *testing.T) {
	type setup struct {
		client *leasefence.Client
		coord  *leasefence.Coordinator
		agent  *leasefence.ManualClock
	}
	newSetup := func(t *testing.T) setup {
		agent := leasefence.NewManualClock("agent-a", leasefence.WithStart(time.Second))
		return setup{
			client: newClient(t, agent, "agent-a", ms(10)),
			coord:  newCoordinator(t, leasefence.NewManualClock("coordinator"), time.Second),
			agent:  agent,
		}
	}
	acquireTests := []struct {
		name   string
		mangle func(g *leasefence.Grant)
	}{
		{"another request id", func(g *leasefence.Grant) { g.RequestID = "someone-elses" }},
		{"another holder", func(g *leasefence.Grant) { g.Token.Holder = "agent-b" }},
		{"another resource", func(g *leasefence.Grant) { g.Token.Resource = "r2" }},
		{"fence 0", func(g *leasefence.Grant) { g.Token.Fence = 0 }},
		{"no TTL", func(g *leasefence.Grant) { g.TTL = 0 }},
		{"negative TTL", func(g *leasefence.Grant) { g.TTL = -time.Second }},
		{"empty grant", func(g *leasefence.Grant) { *g = leasefence.Grant{} }},
	}
	for _, tt := range acquireTests {
		t.Run("acquire: "+tt.name, func(t *testing.T) {
			s := newSetup(t)
			req, _ := s.client.BeginAcquire("r")
			g := grantFor(t, s.coord, req)
			bad := g
			tt.mangle(&bad)
			s.agent.Advance(time.Minute) // completion time never matters
			for range 2 {
				if l, err := s.client.CompleteAcquire(req, bad); !errors.Is(err, leasefence.ErrGrantMismatch) || l != nil {
					t.Fatalf("= %+v, %v; want nil, ErrGrantMismatch", l, err)
				}
			}
			// Not used up: the right grant still completes it.
			l, err := s.client.CompleteAcquire(req, g)
			if err != nil {
				t.Fatalf("correct completion after the mismatch: %v", err)
			}
			if l.Deadline != leasefence.At("agent-a", time.Second+time.Second-ms(10)) || l.Token != g.Token {
				t.Errorf("lease = %+v", l)
			}
		})
	}

	renewTests := []struct {
		name   string
		mangle func(g *leasefence.Grant)
	}{
		{"another fence", func(g *leasefence.Grant) { g.Token.Fence++ }},
		{"a lower fence", func(g *leasefence.Grant) { g.Token.Fence-- }},
		{"another request id", func(g *leasefence.Grant) { g.RequestID = "x" }},
		{"another holder", func(g *leasefence.Grant) { g.Token.Holder = "agent-b" }},
		{"another resource", func(g *leasefence.Grant) { g.Token.Resource = "r2" }},
		{"the acquire's grant", nil},
	}
	for _, tt := range renewTests {
		t.Run("renewal: "+tt.name, func(t *testing.T) {
			s := newSetup(t)
			// Burn a fence so fence-1 is still a real fence.
			if _, err := s.coord.Acquire(leasefence.AcquireRequest{RequestID: "x", Holder: "z", Resource: "z"}); err != nil {
				t.Fatal(err)
			}
			req, _ := s.client.BeginAcquire("r")
			acqGrant := grantFor(t, s.coord, req)
			lease, err := s.client.CompleteAcquire(req, acqGrant)
			if err != nil {
				t.Fatal(err)
			}
			s.agent.Advance(ms(300))
			rreq, _ := s.client.BeginRenewal(lease)
			out, _ := s.coord.Renew(rreq)
			bad := out.Grant
			if tt.mangle != nil {
				tt.mangle(&bad)
			} else {
				bad = acqGrant
			}
			if l, err := s.client.CompleteRenewal(rreq, bad); !errors.Is(err, leasefence.ErrGrantMismatch) || l != nil {
				t.Fatalf("= %+v, %v; want nil, ErrGrantMismatch", l, err)
			}
			l, err := s.client.CompleteRenewal(rreq, out.Grant)
			if err != nil {
				t.Fatalf("correct completion after the mismatch: %v", err)
			}
			if l.Token != lease.Token || l.Deadline != leasefence.At("agent-a", ms(1300+1000-10)) {
				t.Errorf("renewed lease = %+v", l)
			}
		})
	}
}

func TestCompleteAnchorsAtTheRecordedSendInstant(t *testing.T) {
	agent := leasefence.NewManualClock("agent-a", leasefence.WithStart(ms(200)))
	coord := newCoordinator(t, leasefence.NewManualClock("coordinator"), time.Second)
	client := newClient(t, agent, "agent-a", ms(50))

	tests := []struct {
		name string
		edit func(r *leasefence.AcquireRequest)
	}{
		{"SentAt moved later", func(r *leasefence.AcquireRequest) { r.SentAt = r.SentAt.Add(time.Hour) }},
		{"SentAt moved earlier", func(r *leasefence.AcquireRequest) { r.SentAt = r.SentAt.Add(-time.Hour) }},
		{"SentAt in another domain", func(r *leasefence.AcquireRequest) { r.SentAt = leasefence.At("coordinator", time.Hour) }},
		{"SentAt zeroed", func(r *leasefence.AcquireRequest) { r.SentAt = leasefence.Instant{} }},
		{"SentAt replaced by the reply time", func(r *leasefence.AcquireRequest) { r.SentAt, _ = agent.Now() }},
	}
	for n, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := fmt.Sprint("r", n)
			req, _ := client.BeginAcquire(res)
			sent := req.SentAt
			g := grantFor(t, coord, req)
			agent.Advance(ms(700)) // the reply arrives 700ms later
			tt.edit(&req)
			l, err := client.CompleteAcquire(req, g)
			if err != nil {
				t.Fatal(err)
			}
			if want := sent.Add(time.Second - ms(50)); l.Deadline != want {
				t.Errorf("deadline %v, want %v: the edited SentAt moved the anchor", l.Deadline, want)
			}
		})
	}

	t.Run("renewal SentAt edited", func(t *testing.T) {
		req, _ := client.BeginAcquire("renew-me")
		lease, err := client.CompleteAcquire(req, grantFor(t, coord, req))
		if err != nil {
			t.Fatal(err)
		}
		rreq, _ := client.BeginRenewal(lease)
		sent := rreq.SentAt
		out, _ := coord.Renew(rreq)
		agent.Advance(ms(700))
		rreq.SentAt = rreq.SentAt.Add(time.Hour)
		l, err := client.CompleteRenewal(rreq, out.Grant)
		if err != nil {
			t.Fatal(err)
		}
		if want := sent.Add(time.Second - ms(50)); l.Deadline != want {
			t.Errorf("deadline %v, want %v", l.Deadline, want)
		}
	})
}

func TestClientRequestRecordIsBounded(t *testing.T) {
	if leasefence.DefaultRequestRecord != 1024 {
		t.Errorf("DefaultRequestRecord = %d", leasefence.DefaultRequestRecord)
	}
	coord := newCoordinator(t, leasefence.NewManualClock("coordinator"), time.Second)
	client, err := leasefence.NewClient(leasefence.ClientOptions{
		Clock: leasefence.NewManualClock("agent-a"), Holder: "agent-a", RequestRecord: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	var reqs []leasefence.AcquireRequest
	var grants []leasefence.Grant
	for n := range 3 {
		req, err := client.BeginAcquire(fmt.Sprint("r", n))
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, req)
		grants = append(grants, grantFor(t, coord, req))
	}
	// The oldest was forgotten when the third was begun.
	if _, err := client.CompleteAcquire(reqs[0], grants[0]); !errors.Is(err, leasefence.ErrUnknownRequest) {
		t.Errorf("oldest request: %v, want ErrUnknownRequest", err)
	}
	for n := 1; n < 3; n++ {
		if _, err := client.CompleteAcquire(reqs[n], grants[n]); err != nil {
			t.Errorf("request %d: %v", n, err)
		}
	}
	// Completed requests count against the bound too, and stay used while
	// remembered: one more begin forgets reqs[1] but not reqs[2].
	if _, err := client.BeginAcquire("r3"); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CompleteAcquire(reqs[1], grants[1]); !errors.Is(err, leasefence.ErrUnknownRequest) {
		t.Errorf("evicted completed request: %v, want ErrUnknownRequest", err)
	}
	if _, err := client.CompleteAcquire(reqs[2], grants[2]); !errors.Is(err, leasefence.ErrRequestUsed) {
		t.Errorf("remembered completed request: %v, want ErrRequestUsed", err)
	}
}

func TestRequestIDsAreUnique(t *testing.T) {
	const clients, each = 10, 1000
	seen := make(map[string]bool, clients*each)
	for c := range clients {
		// Identical clients: same holder, same clock readings. Nothing
		// per-client can make the ids differ; only randomness can.
		client := newClient(t, leasefence.NewManualClock("agent"), "agent", 0)
		for n := range each {
			var id string
			if n%2 == 0 {
				req, err := client.BeginAcquire("r")
				if err != nil {
					t.Fatal(err)
				}
				id = req.RequestID
			} else {
				req, err := client.BeginRenewal(&leasefence.Lease{Token: tok("r", "agent", 1)})
				if err != nil {
					t.Fatal(err)
				}
				id = req.RequestID
			}
			if len(id) < 16 {
				t.Fatalf("request id %q is too short to be unique across processes", id)
			}
			if seen[id] {
				t.Fatalf("client %d request %d: id %q repeated", c, n, id)
			}
			seen[id] = true
		}
	}
}

func TestRequestIDsConcurrent(t *testing.T) {
	client := newClient(t, leasefence.NewMonotonicClock("agent"), "agent", 0)
	const goroutines, each = 8, 250
	ids := make([][]string, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for range each {
				req, err := client.BeginAcquire("r")
				if err != nil {
					t.Error(err)
					return
				}
				ids[g] = append(ids[g], req.RequestID)
			}
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, l := range ids {
		for _, id := range l {
			if seen[id] {
				t.Fatalf("id %q repeated", id)
			}
			seen[id] = true
		}
	}
	if len(seen) != goroutines*each {
		t.Fatalf("%d ids", len(seen))
	}
}

func TestClientEntropyOption(t *testing.T) {
	idsFrom := func(seed uint64) []string {
		client, err := leasefence.NewClient(leasefence.ClientOptions{
			Clock: leasefence.NewManualClock("agent"), Holder: "agent",
			Entropy: rand.NewChaCha8([32]byte{byte(seed)}),
		})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for range 5 {
			req, err := client.BeginAcquire("r")
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, req.RequestID)
		}
		return ids
	}
	a, b, c := idsFrom(1), idsFrom(1), idsFrom(2)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("same seed, different ids:\n%v\n%v", a, b)
	}
	if fmt.Sprint(a) == fmt.Sprint(c) {
		t.Errorf("different seeds, same ids: %v", a)
	}
	for n := 1; n < len(a); n++ {
		if a[n] == a[n-1] {
			t.Errorf("one source repeated an id: %v", a)
		}
	}

	t.Run("exhausted entropy", func(t *testing.T) {
		var begun int
		client, err := leasefence.NewClient(leasefence.ClientOptions{
			Clock: leasefence.NewManualClock("agent"), Holder: "agent",
			Entropy: bytes.NewReader(make([]byte, 20)), // one id's worth, and a bit
			Trace:   &leasefence.ClientTrace{Begin: func(leasefence.BeginInfo) { begun++ }},
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.BeginAcquire("r"); err != nil {
			t.Fatal(err)
		}
		req, err := client.BeginAcquire("r")
		if err == nil || req != (leasefence.AcquireRequest{}) {
			t.Errorf("BeginAcquire with no entropy = %+v, %v; want an error", req, err)
		}
		if begun != 1 {
			t.Errorf("Begin hook ran %d times, want 1", begun)
		}
	})
}

func TestHasExpired(t *testing.T) {
	agent := leasefence.NewManualClock("agent-a", leasefence.WithStart(ms(100)))
	coord := newCoordinator(t, leasefence.NewManualClock("coordinator"), ms(1000))
	client := newClient(t, agent, "agent-a", ms(200))
	lease, _ := acquireLease(t, client, coord, "r")
	if lease.Deadline != leasefence.At("agent-a", ms(900)) {
		t.Fatalf("deadline %v", lease.Deadline)
	}
	steps := []struct {
		advance time.Duration
		want    bool
	}{
		{0, false},           // 100ms
		{ms(800) - 1, false}, // 900ms - 1ns
		{1, true},            // exactly the deadline
		{1, true},            // after
		{time.Hour, true},    // long after
	}
	for n, s := range steps {
		agent.Advance(s.advance)
		got, err := lease.HasExpired()
		if err != nil || got != s.want {
			now, _ := agent.Now()
			t.Errorf("step %d at %v: HasExpired() = %v, %v; want %v", n, now, got, err, s.want)
		}
	}

	t.Run("hand-built lease has no clock", func(t *testing.T) {
		l := &leasefence.Lease{Token: lease.Token, Deadline: leasefence.At("agent-a", time.Hour), TTL: time.Second}
		got, err := l.HasExpired()
		if !errors.Is(err, leasefence.ErrNoClock) || got {
			t.Errorf("HasExpired() = %v, %v; want false, ErrNoClock", got, err)
		}
		// A copy of a real lease is fine: it carries the clock.
		cp := *lease
		if got, err := cp.HasExpired(); err != nil || !got {
			t.Errorf("copy of a lease: HasExpired() = %v, %v", got, err)
		}
	})

	t.Run("deadline edited into another domain", func(t *testing.T) {
		cp := *lease
		cp.Deadline = leasefence.At("coordinator", time.Hour)
		_, err := cp.HasExpired()
		wantDomainError(t, err, "agent-a", "coordinator")
	})

	t.Run("clock stepped backwards", func(t *testing.T) {
		src := steppingSource(10*time.Second, 10*time.Second, 9*time.Second)
		client := newClient(t, leasefence.NewClock("agent-a", src), "agent-a", 0)
		coord := newCoordinator(t, leasefence.NewManualClock("coordinator"), time.Second)
		l, _ := acquireLease(t, client, coord, "r")
		if got, err := l.HasExpired(); err != nil || got {
			t.Fatalf("HasExpired() = %v, %v", got, err)
		}
		if got, err := l.HasExpired(); !errors.Is(err, leasefence.ErrClockBackwards) || got {
			t.Errorf("HasExpired() on a backwards step = %v, %v; want false, ErrClockBackwards", got, err)
		}
	})
}

func TestRenewalKeepsTheFence(t *testing.T) {
	agent := leasefence.NewManualClock("agent-a")
	coordClock := leasefence.NewManualClock("coordinator")
	coord := newCoordinator(t, coordClock, time.Second)
	client := newClient(t, agent, "agent-a", 0)
	lease, _ := acquireLease(t, client, coord, "r")
	want := lease.Token
	for n := 1; n <= 5; n++ {
		agent.Advance(ms(600))
		coordClock.Advance(ms(600))
		req, err := client.BeginRenewal(lease)
		if err != nil {
			t.Fatal(err)
		}
		if req.Token != want || req.SentAt != leasefence.At("agent-a", ms(600*int64(n))) {
			t.Fatalf("renew request %+v", req)
		}
		out, err := coord.Renew(req)
		if err != nil || !out.OK {
			t.Fatal(out, err)
		}
		lease, err = client.CompleteRenewal(req, out.Grant)
		if err != nil {
			t.Fatal(err)
		}
		if lease.Token != want || lease.Deadline != leasefence.At("agent-a", ms(600*int64(n)+1000)) {
			t.Fatalf("renewal %d: lease %+v", n, lease)
		}
	}
	if coord.IssuedFence() != want.Fence {
		t.Errorf("IssuedFence() = %d after renewals of fence %d", coord.IssuedFence(), want.Fence)
	}
}

func TestBeginErrors(t *testing.T) {
	client := newClient(t, leasefence.NewManualClock("agent-a"), "agent-a", 0)
	tests := []struct {
		name  string
		begin func() error
	}{
		{"acquire with no resource", func() error { _, err := client.BeginAcquire(""); return err }},
		{"renewal of a nil lease", func() error { _, err := client.BeginRenewal(nil); return err }},
		{"renewal of another holder's lease", func() error {
			_, err := client.BeginRenewal(&leasefence.Lease{Token: tok("r", "agent-b", 1)})
			return err
		}},
		{"renewal of a fence-0 lease", func() error {
			_, err := client.BeginRenewal(&leasefence.Lease{Token: tok("r", "agent-a", 0)})
			return err
		}},
		{"renewal of a lease with no resource", func() error {
			_, err := client.BeginRenewal(&leasefence.Lease{Token: tok("", "agent-a", 1)})
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.begin(); !errors.Is(err, leasefence.ErrInvalidRequest) {
				t.Errorf("err = %v, want ErrInvalidRequest", err)
			}
		})
	}

	t.Run("clock stepped backwards", func(t *testing.T) {
		client := newClient(t, leasefence.NewClock("agent-a", steppingSource(time.Second, 0)), "agent-a", 0)
		if _, err := client.BeginAcquire("r"); err != nil {
			t.Fatal(err)
		}
		req, err := client.BeginAcquire("r")
		var ce *leasefence.ClockError
		if !errors.As(err, &ce) || req != (leasefence.AcquireRequest{}) {
			t.Errorf("BeginAcquire = %+v, %v; want a *ClockError", req, err)
		}
	})
}

func TestNewClientOptions(t *testing.T) {
	clock := leasefence.NewManualClock("agent-a")
	bad := []struct {
		name string
		opts leasefence.ClientOptions
	}{
		{"no clock", leasefence.ClientOptions{Holder: "a"}},
		{"no holder", leasefence.ClientOptions{Clock: clock}},
		{"negative skew", leasefence.ClientOptions{Clock: clock, Holder: "a", ClockSkew: -1}},
		{"negative record", leasefence.ClientOptions{Clock: clock, Holder: "a", RequestRecord: -1}},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			c, err := leasefence.NewClient(tt.opts)
			if !errors.Is(err, leasefence.ErrInvalidRequest) || c != nil {
				t.Errorf("NewClient = %v, %v; want nil, ErrInvalidRequest", c, err)
			}
		})
	}
	c, err := leasefence.NewClient(leasefence.ClientOptions{Clock: clock, Holder: "a"})
	if err != nil || c.Holder() != "a" {
		t.Errorf("NewClient = %v, %v", c, err)
	}
}

func TestClientTrace(t *testing.T) {
	var begins []leasefence.BeginInfo
	var completes []leasefence.CompleteInfo
	agent := leasefence.NewManualClock("agent-a", leasefence.WithStart(ms(5)))
	client, err := leasefence.NewClient(leasefence.ClientOptions{
		Clock: agent, Holder: "agent-a", ClockSkew: ms(1),
		Trace: &leasefence.ClientTrace{
			Begin:    func(i leasefence.BeginInfo) { begins = append(begins, i) },
			Complete: func(i leasefence.CompleteInfo) { completes = append(completes, i) },
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	coord := newCoordinator(t, leasefence.NewManualClock("coordinator"), time.Second)

	req, _ := client.BeginAcquire("r")
	g := grantFor(t, coord, req)
	bad := g
	bad.Token.Resource = "x"
	_, mismatchErr := client.CompleteAcquire(req, bad)
	lease, _ := client.CompleteAcquire(req, g)
	agent.Advance(ms(10))
	rreq, _ := client.BeginRenewal(lease)
	rout, _ := coord.Renew(rreq)
	renewedLease, _ := client.CompleteRenewal(rreq, rout.Grant)
	client.BeginAcquire("") // malformed: not begun, not traced

	wantBegins := []leasefence.BeginInfo{
		{Kind: leasefence.KindAcquire, RequestID: req.RequestID, Token: leasefence.Token{Resource: "r", Holder: "agent-a"}, SentAt: leasefence.At("agent-a", ms(5))},
		{Kind: leasefence.KindRenew, RequestID: rreq.RequestID, Token: lease.Token, SentAt: leasefence.At("agent-a", ms(15))},
	}
	if fmt.Sprint(begins) != fmt.Sprint(wantBegins) {
		t.Errorf("Begin hook saw\n%+v\nwant\n%+v", begins, wantBegins)
	}
	if len(completes) != 3 {
		t.Fatalf("Complete hook ran %d times, want 3", len(completes))
	}
	c0, c1, c2 := completes[0], completes[1], completes[2]
	if c0.Kind != leasefence.KindAcquire || c0.RequestID != req.RequestID || c0.Grant != bad ||
		!errors.Is(c0.Err, leasefence.ErrGrantMismatch) || c0.Err.Error() != mismatchErr.Error() || c0.Lease.Token != (leasefence.Token{}) {
		t.Errorf("mismatched completion reported as %+v", c0)
	}
	if c1.Kind != leasefence.KindAcquire || c1.RequestID != req.RequestID || c1.Grant != g || c1.Err != nil ||
		c1.Lease.Token != lease.Token || c1.Lease.Deadline != leasefence.At("agent-a", ms(1004)) || c1.Lease.TTL != time.Second {
		t.Errorf("completion reported as %+v", c1)
	}
	if c2.Kind != leasefence.KindRenew || c2.RequestID != rreq.RequestID || c2.Grant != rout.Grant || c2.Err != nil ||
		c2.Lease.Token != renewedLease.Token || c2.Lease.Deadline != leasefence.At("agent-a", ms(1014)) {
		t.Errorf("renewal completion reported as %+v", c2)
	}
	// The reported lease is a working copy.
	if exp, err := c2.Lease.HasExpired(); err != nil || exp {
		t.Errorf("reported lease HasExpired() = %v, %v", exp, err)
	}
}

// TestClientConcurrent runs whole round trips from many goroutines through
// one client and one coordinator under -race.
func TestClientConcurrent(t *testing.T) {
	coord := newCoordinator(t, leasefence.NewMonotonicClock("coordinator"), time.Hour)
	const goroutines, rounds = 8, 100
	// A record big enough for every request: with the default bound, a
	// goroutine descheduled between begin and complete can see its request
	// forgotten after the others have begun 1024 more (the documented limit).
	client, err := leasefence.NewClient(leasefence.ClientOptions{
		Clock: leasefence.NewMonotonicClock("agent"), Holder: "agent", RequestRecord: 2 * goroutines * rounds,
	})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			res := fmt.Sprint("r", g)
			for range rounds {
				req, err := client.BeginAcquire(res)
				if err != nil {
					t.Error(err)
					return
				}
				out, err := coord.Acquire(req)
				if err != nil || !out.OK {
					t.Error(out, err)
					return
				}
				lease, err := client.CompleteAcquire(req, out.Grant)
				if err != nil {
					t.Error(err)
					return
				}
				rreq, _ := client.BeginRenewal(lease)
				rout, _ := coord.Renew(rreq)
				if _, err := client.CompleteRenewal(rreq, rout.Grant); err != nil {
					t.Error(err)
					return
				}
				if rel, _ := coord.Release(lease.Token); !rel.OK {
					t.Error(rel)
					return
				}
			}
		})
	}
	wg.Wait()
	if coord.IssuedFence() != goroutines*rounds {
		t.Errorf("IssuedFence() = %d", coord.IssuedFence())
	}
}

func TestCompleteTamperedOrForeignID(t *testing.T) {
	// The client finds a request's record from its id alone, so any id it
	// did not make, however close to one it did, is unknown, and the
	// genuine request survives every such attempt unused.
	coord := newCoordinator(t, leasefence.NewManualClock("coordinator"), time.Second)
	client, err := leasefence.NewClient(leasefence.ClientOptions{Clock: leasefence.NewManualClock("agent-a"), Holder: "agent-a", RequestRecord: 16})
	if err != nil {
		t.Fatal(err)
	}
	other := newClient(t, leasefence.NewManualClock("agent-a"), "agent-a", 0)
	var reqs []leasefence.AcquireRequest
	var others []leasefence.AcquireRequest
	for n := range 12 {
		req, err := client.BeginAcquire(fmt.Sprint("r", n))
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, req)
		// The other client has records in the same places.
		oreq, err := other.BeginAcquire(fmt.Sprint("r", n))
		if err != nil {
			t.Fatal(err)
		}
		others = append(others, oreq)
	}
	genuine := reqs[10]
	grant := grantFor(t, coord, genuine)
	id := genuine.RequestID
	flip := func(i int) string {
		b := []byte(id)
		if b[i] == '0' {
			b[i] = '1'
		} else {
			b[i] = '0'
		}
		return string(b)
	}
	// The ids of the requests begun just before and after, which share
	// everything with id but their random bits and their place.
	before, after := reqs[9].RequestID, reqs[11].RequestID
	tests := []struct{ name, id string }{
		{"another client's id for the same place", others[10].RequestID},
		{"first character changed", flip(0)},
		{"last character changed", flip(len(id) - 1)},
		{"a middle character changed", flip(len(id) / 2)},
		{"the previous request's id with this id's tail", before[:len(before)-1] + id[len(id)-1:]},
		{"this id's head with the next request's tail", id[:len(id)-1] + after[len(after)-1:]},
		{"upper case", strings.ToUpper(id)},
		{"a character appended", id + "0"},
		{"a character prepended", "0" + id},
		{"a character dropped", id[:len(id)-1]},
		{"first character dropped", id[1:]},
		{"half of it", id[:len(id)/2]},
		{"not hex", id[:len(id)-1] + "z"},
		{"a huge tail", id + "ffffffffffffffffffffffff"},
		{"empty", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.id == id {
				t.Fatalf("the tampered id is the genuine one: %q", id)
			}
			req, g := genuine, grant
			req.RequestID, g.RequestID = tt.id, tt.id
			if l, err := client.CompleteAcquire(req, g); !errors.Is(err, leasefence.ErrUnknownRequest) || l != nil {
				t.Errorf("CompleteAcquire with id %q (genuine %q) = %+v, %v; want ErrUnknownRequest", tt.id, id, l, err)
			}
			if _, err := client.CompleteRenewal(leasefence.RenewRequest{RequestID: tt.id, Token: g.Token}, g); !errors.Is(err, leasefence.ErrUnknownRequest) {
				t.Errorf("CompleteRenewal with id %q = %v; want ErrUnknownRequest", tt.id, err)
			}
		})
	}
	if _, err := client.CompleteAcquire(genuine, grant); err != nil {
		t.Errorf("the genuine request after the tampered ones: %v", err)
	}
	// And the other client does not know this client's id either.
	if _, err := other.CompleteAcquire(genuine, grant); !errors.Is(err, leasefence.ErrUnknownRequest) {
		t.Errorf("the other client completing this client's request: %v; want ErrUnknownRequest", err)
	}
}

func TestRequestIDsStayUniqueAsTheRecordWraps(t *testing.T) {
	// A small record reuses its places over and over; the ids never repeat
	// and stay long enough to carry 128 random bits.
	client, err := leasefence.NewClient(leasefence.ClientOptions{Clock: leasefence.NewManualClock("agent"), Holder: "agent", RequestRecord: 3})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for n := range 300 {
		req, err := client.BeginAcquire("r")
		if err != nil {
			t.Fatal(err)
		}
		if len(req.RequestID) < 32 || seen[req.RequestID] {
			t.Fatalf("request %d: id %q is short or repeated", n, req.RequestID)
		}
		seen[req.RequestID] = true
	}
}

// Ids and leases are carved from chunks, so a busy client allocates about
// once per 8 requests: AllocsPerRun's integer average rounds that to 0.
func TestRequestsAllocateAmortizedNothing(t *testing.T) {
	client := newClient(t, leasefence.NewManualClock("agent"), "agent", 0)
	lease := &leasefence.Lease{Token: tok("r", "agent", 1)}
	// Fill the record first: it grows to its bound once, then only reuses.
	for range leasefence.DefaultRequestRecord {
		if _, err := client.BeginAcquire("r"); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		call func() error
	}{
		{"BeginAcquire", func() error { _, err := client.BeginAcquire("r"); return err }},
		{"BeginRenewal", func() error { _, err := client.BeginRenewal(lease); return err }},
		{"BeginAcquire+CompleteAcquire", func() error {
			req, err := client.BeginAcquire("r")
			if err != nil {
				return err
			}
			_, err = client.CompleteAcquire(req, leasefence.Grant{RequestID: req.RequestID, Token: tok("r", "agent", 1), TTL: time.Second})
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			allocs := testing.AllocsPerRun(1000, func() { err = tt.call() })
			if err != nil {
				t.Fatal(err)
			}
			if allocs != 0 {
				t.Errorf("%s allocates %v times per call, want amortized 0", tt.name, allocs)
			}
		})
	}
}

// Ids share their backing bytes; one handed out earlier must never change.
func TestIDsStayIntact(t *testing.T) {
	client := newClient(t, leasefence.NewManualClock("agent"), "agent", 0)
	var kept, copies []string
	for i := range 5000 {
		req, err := client.BeginAcquire("r")
		if err != nil {
			t.Fatal(err)
		}
		if i%97 == 0 {
			kept = append(kept, req.RequestID)
			copies = append(copies, strings.Clone(req.RequestID))
		}
	}
	for i := range kept {
		if kept[i] != copies[i] {
			t.Fatalf("id %d changed from %q to %q", i, copies[i], kept[i])
		}
	}
}
