package redislease_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/redislease"
)

// A queued command Redis refuses at EXEC (it was queued fine, it fails when
// run): Redis applies the other commands and the raise of the floor all the
// same. The caller is told ErrCommandFailed, naming the command and wrapping
// Redis's own error; each queued command has its own reply (the one that
// landed its value, the failed one its error); and the floor stays raised, so
// the same token commits again while a lower one is refused.
func TestGateCommandFailingInsideExec(t *testing.T) {
	c := needRedis(t)
	prefix := newPrefix(t)
	g := openGate(t, c, prefix, "r", redislease.GateOptions{})
	ctx := t.Context()
	str := "{" + prefix + "}app:a-string"
	if err := c.Set(ctx, str, "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	var before, failed, after *redis.IntCmd
	err := g.Gate.Commit(ctx, tok("r", "a", 4), func(ctx context.Context, p redis.Pipeliner) error {
		before = p.RPush(ctx, g.data, "before")
		failed = p.LPush(ctx, str, "wrong type")
		after = p.RPush(ctx, g.data, "after")
		return nil
	})
	var rerr redis.Error
	if !errors.Is(err, redislease.ErrCommandFailed) || !errors.As(err, &rerr) || !strings.Contains(err.Error(), "lpush") {
		t.Fatalf("Commit = %v; want ErrCommandFailed naming lpush and wrapping Redis's error", err)
	}
	if !strings.HasPrefix(rerr.Error(), "WRONGTYPE") {
		t.Fatalf("the wrapped Redis error is %v, want WRONGTYPE", rerr)
	}
	if n, err := before.Result(); n != 1 || err != nil {
		t.Errorf("the command before the failed one: %d, %v; want 1, nil (applied)", n, err)
	}
	if n, err := after.Result(); n != 2 || err != nil {
		t.Errorf("the command after the failed one: %d, %v; want 2, nil (applied)", n, err)
	}
	if err := failed.Err(); err == nil || !strings.HasPrefix(err.Error(), "WRONGTYPE") {
		t.Errorf("the failed command's own error: %v, want WRONGTYPE", err)
	}
	wantState(t, g, tok("r", "a", 4), []string{"before", "after"})
	if err := g.Commit(ctx, tok("r", "a", 4), "again"); err != nil {
		t.Fatalf("the same token after the failure: %v", err)
	}
	if err := g.Commit(ctx, tok("r", "b", 3), "stale"); !errors.Is(err, leasefence.ErrStaleFence) {
		t.Fatalf("a lower fence after the failure: %v, want ErrStaleFence", err)
	}
}

// A command Redis refuses while queueing (a wrong number of arguments)
// aborts the whole transaction: EXECABORT, nothing applied, the floor not
// raised; the error says so, and blames no command that Redis queued
// (go-redis gives each the EXECABORT error).
func TestGateCommandRefusedWhileQueued(t *testing.T) {
	c := needRedis(t)
	g := openGate(t, c, newPrefix(t), "r", redislease.GateOptions{})
	ctx := t.Context()
	err := g.Gate.Commit(ctx, tok("r", "a", 4), func(ctx context.Context, p redis.Pipeliner) error {
		p.RPush(ctx, g.data, "never")
		p.Do(ctx, "set", "app:k") // SET with one argument
		return nil
	})
	if err == nil || errors.Is(err, redislease.ErrCommandFailed) || !redis.IsExecAbortError(errors.Unwrap(err)) ||
		!strings.Contains(err.Error(), "nothing was applied") || strings.Contains(err.Error(), "rpush") {
		t.Fatalf("Commit = %v; want EXECABORT, nothing applied, rpush not blamed", err)
	}
	wantState(t, g, leasefence.Token{}, nil)
	if err := g.Commit(ctx, tok("r", "a", 4), "v"); err != nil {
		t.Fatalf("Commit after the aborted one: %v", err)
	}
}

// RejectionsSince across a stretch the log no longer holds: for every
// cursor, the retained refusals above it, oldest first, and exactly how many
// above it were trimmed.
func TestGateRejectionsSinceAcrossTrimmedStretch(t *testing.T) {
	c := needRedis(t)
	const retain, total = 3, 10
	g := openGate(t, c, newPrefix(t), "r", redislease.GateOptions{RejectionLog: retain})
	ctx := t.Context()
	if err := g.Commit(ctx, tok("r", "new", 100), "new"); err != nil {
		t.Fatal(err)
	}
	for f := range leasefence.Fence(total) {
		if err := g.Commit(ctx, tok("r", "old", f+1), "old"); !errors.Is(err, leasefence.ErrStaleFence) {
			t.Fatalf("stale Commit = %v", err)
		}
	}
	if n, err := g.RejectionCount(ctx); n != total || err != nil {
		t.Fatalf("RejectionCount = %d, %v; want %d", n, err, total)
	}
	const oldest = total - retain + 1 // the oldest Seq retained
	for seq := uint64(0); seq <= total+1; seq++ {
		rs, missed, err := g.RejectionsSince(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		wantMissed := uint64(0)
		if seq+1 < oldest {
			wantMissed = oldest - (seq + 1)
		}
		first := max(seq+1, oldest)
		wantLen := 0
		if first <= total {
			wantLen = int(total - first + 1)
		}
		if missed != wantMissed || len(rs) != wantLen {
			t.Fatalf("RejectionsSince(%d) = %d refusals, missed %d; want %d, missed %d", seq, len(rs), missed, wantLen, wantMissed)
		}
		for i, r := range rs {
			if r.Seq != first+uint64(i) || r.Fence != leasefence.Fence(r.Seq) || r.FloorFence != 100 || r.Holder != "old" {
				t.Fatalf("RejectionsSince(%d)[%d] = %+v", seq, i, r)
			}
		}
		if uint64(len(rs))+missed != total-min(seq, total) {
			t.Fatalf("RejectionsSince(%d): %d + %d missed do not account for the %d refusals above it", seq, len(rs), missed, total-min(seq, total))
		}
	}
}

// A lease at its PTTL boundary: while the holder key lives, another holder
// is refused with RetryAfter its PTTL (at least 1ms, at most the TTL) and
// the holder can renew; once Redis has expired it, the other holder is
// granted a higher fence, no earlier than the first holder's send-anchored
// deadline, the first holder's renewal is refused and its client already
// counts the lease expired, and the gate refuses it once the new holder has
// written. Asserted: the order of events, never a duration.
func TestLeaseAtItsPTTLBoundary(t *testing.T) {
	c := needRedis(t)
	prefix := newPrefix(t)
	const ttl = 150 * time.Millisecond
	coord := newCoordinator(t, c, redislease.Options{Prefix: prefix, TTL: ttl})
	g := openGate(t, c, prefix, "r", redislease.GateOptions{})
	ctx := t.Context()
	a, b := newClient(t, "agent-a"), newClient(t, "agent-b")
	reqA, _ := a.BeginAcquire("r")
	sentA := time.Now()
	ga, err := coord.Acquire(ctx, reqA)
	if err != nil || !ga.OK || ga.Grant.TTL != ttl {
		t.Fatalf("Acquire by agent-a = %+v, %v", ga, err)
	}
	leaseA, err := a.CompleteAcquire(reqA, ga.Grant)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Commit(ctx, leaseA.Token, "a"); err != nil {
		t.Fatal(err)
	}
	holderKey := "{" + prefix + "}holder:r"
	var gb leasefence.AcquireOutcome
	refusals := 0
	for deadline := time.Now().Add(30 * time.Second); ; {
		if time.Now().After(deadline) {
			t.Fatalf("agent-b was never granted r; PTTL %v", c.PTTL(ctx, holderKey).Val())
		}
		reqB, _ := b.BeginAcquire("r")
		gb, err = coord.Acquire(ctx, reqB)
		if err != nil {
			t.Fatal(err)
		}
		if gb.OK {
			break
		}
		refusals++
		if gb.Reason != leasefence.ReasonHeld || gb.HeldBy != "agent-a" || gb.RetryAfter < time.Millisecond || gb.RetryAfter > ttl {
			t.Fatalf("Acquire by agent-b while agent-a's key lives = %+v; want held by agent-a, RetryAfter in [1ms, %v]", gb, ttl)
		}
	}
	grantedB := time.Now()
	if refusals == 0 {
		t.Fatal("agent-b was granted r at once, while agent-a's key was live")
	}
	if gb.Grant.Token.Fence <= leaseA.Token.Fence {
		t.Fatalf("agent-b's fence %d is not above agent-a's %d", gb.Grant.Token.Fence, leaseA.Token.Fence)
	}
	if !grantedB.After(sentA.Add(ttl)) {
		t.Fatalf("agent-b granted %v after agent-a's acquire was sent, within its TTL %v", grantedB.Sub(sentA), ttl)
	}
	if expired, err := leaseA.HasExpired(); err != nil || !expired {
		t.Fatalf("agent-a's client counts its lease live (%v, %v) after another was granted", expired, err)
	}
	if pttl := c.PTTL(ctx, holderKey).Val(); pttl <= 0 {
		t.Fatalf("the holder key's PTTL is %v just after agent-b's grant", pttl)
	}
	renewA, _ := a.BeginRenewal(leaseA)
	if out, err := coord.Renew(ctx, renewA); err != nil || out.OK {
		t.Fatalf("agent-a's renewal after its key expired = %+v, %v; want refused", out, err)
	}
	if err := g.Commit(ctx, gb.Grant.Token, "b"); err != nil {
		t.Fatal(err)
	}
	if err := g.Commit(ctx, leaseA.Token, "a late"); !errors.Is(err, leasefence.ErrStaleFence) {
		t.Fatalf("agent-a's write after agent-b's = %v, want ErrStaleFence", err)
	}
	wantState(t, g, gb.Grant.Token, []string{"a", "b"}, leasefence.Rejection{
		Seq: 1, Resource: "r", Holder: "agent-a", Fence: leaseA.Token.Fence, FloorHolder: "agent-b", FloorFence: gb.Grant.Token.Fence,
	})
}

// A renewal just before the boundary (the key has a few milliseconds left)
// is accepted and gives the key a whole TTL again.
func TestRenewJustBeforeThePTTLBoundary(t *testing.T) {
	c := needRedis(t)
	prefix := newPrefix(t)
	const ttl = 2 * time.Second
	coord := newCoordinator(t, c, redislease.Options{Prefix: prefix, TTL: ttl})
	a := newClient(t, "agent-a")
	req, _ := a.BeginAcquire("r")
	ga, err := coord.Acquire(t.Context(), req)
	if err != nil || !ga.OK {
		t.Fatalf("Acquire = %+v, %v", ga, err)
	}
	lease, _ := a.CompleteAcquire(req, ga.Grant)
	holderKey := "{" + prefix + "}holder:r"
	// Bring the key to its boundary, as the passing of time would.
	if err := c.PExpire(t.Context(), holderKey, 5*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	renew, _ := a.BeginRenewal(lease)
	out, err := coord.Renew(t.Context(), renew)
	switch {
	case err != nil:
		t.Fatal(err)
	case out.OK:
		if pttl := c.PTTL(t.Context(), holderKey).Val(); pttl <= ttl/2 || pttl > ttl {
			t.Fatalf("PTTL after a renewal at the boundary = %v, want about %v", pttl, ttl)
		}
	case out.Reason == leasefence.ReasonExpired || out.Reason == leasefence.ReasonUnknown:
		// The 5ms passed before the script ran (a loaded machine): then the
		// key is gone, and stays gone.
		if n := c.Exists(t.Context(), holderKey).Val(); n != 0 {
			t.Fatalf("renewal refused as %s but the key exists", out.Reason)
		}
	default:
		t.Fatalf("Renew at the boundary = %+v", out)
	}
}
