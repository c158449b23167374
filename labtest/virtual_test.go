package labtest_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/labtest"
)

// A correct SET NX PX lock passes the battery in virtual time: the lock
// finding held in every scenario, its naive writes' stale writes
// reported and not failed.
func TestCheckVirtualCorrectLock(t *testing.T) {
	began := time.Now()
	res := labtest.CheckVirtual(t, func(rdb *redis.Client) labtest.Lock { return &setnx{rdb: rdb} })
	t.Logf("the battery in virtual time took %s of wall time", time.Since(began).Round(time.Millisecond))
	if res == nil || res.Failed || len(res.Scenarios) < 4 {
		t.Fatalf("a correct lock: %+v", res)
	}
	stale := 0
	for _, r := range res.Scenarios {
		if r.Findings.Lock.Verdict != history.FindingHeld {
			t.Errorf("a correct lock's lock finding: %+v", r.Findings.Lock)
		}
		stale += r.StaleWritesLanded
	}
	if w := res.Findings.Writes; stale == 0 || w.Verdict != history.FindingBroken || !strings.Contains(w.Reason, "kept exclusion; writes without a fence landed") {
		t.Errorf("%d stale writes, writes finding %+v: want the naive discipline's stale writes reported", stale, w)
	}
	if l := res.Findings.Lock; l.Verdict != history.FindingHeld {
		t.Errorf("the battery's lock finding: %+v", l)
	}
}

// Over drawn fault mixes too, seed after seed, the correct lock passes.
func TestCheckVirtualSeedsCorrectLock(t *testing.T) {
	res := labtest.CheckVirtual(t, func(rdb *redis.Client) labtest.Lock { return &setnx{rdb: rdb} }, labtest.Seeds(3))
	if res == nil || res.Failed {
		t.Fatalf("a correct lock over 3 seeds: %+v", res)
	}
}

// A lock that leaves a goroutine of its own blocked for good (a pool's,
// a refresher's) when the run is over passes on its merits: the bubble
// would call it a deadlock, which ends the test binary.
func TestCheckVirtualLockLeavesAGoroutineBlocked(t *testing.T) {
	res := labtest.CheckVirtual(t, func(rdb *redis.Client) labtest.Lock {
		go func() { <-make(chan struct{}) }()
		return &setnx{rdb: rdb}
	})
	if res == nil || res.Failed {
		t.Fatalf("a correct lock with a goroutine left blocked: %+v", res)
	}
}

// subjects are the locks TestCheckVirtualSubject puts through
// CheckVirtual, in a test process of its own, for TestCheckVirtualFails.
var subjects = map[string]struct {
	newLock func(rdb *redis.Client) labtest.Lock
	opts    []labtest.Option
}{
	"unconditional DEL": {newLock: func(rdb *redis.Client) labtest.Lock { return &setnx{rdb: rdb, releaseDel: true} }},
	"unconditional DEL, seeds": {newLock: func(rdb *redis.Client) labtest.Lock { return &setnx{rdb: rdb, releaseDel: true} },
		opts: []labtest.Option{labtest.Seeds(20)}},
	"mutex across a wait": {newLock: func(rdb *redis.Client) labtest.Lock { return &mutexLock{setnx: setnx{rdb: rdb}} }},
	"real address": {newLock: func(*redis.Client) labtest.Lock {
		return &setnx{rdb: redis.NewClient(&redis.Options{Addr: os.Getenv("LABTEST_ADDR"), ReadTimeout: -1})}
	}},
	"refused address": {newLock: func(*redis.Client) labtest.Lock {
		return &setnx{rdb: redis.NewClient(&redis.Options{Addr: os.Getenv("LABTEST_CLOSED"), MaxRetries: -1})}
	}},
	"panic in Renew": {newLock: func(rdb *redis.Client) labtest.Lock { return &setnx{rdb: rdb, panicIn: "Renew"} }},
	"panic in the probe": {newLock: func(rdb *redis.Client) labtest.Lock {
		return &setnx{rdb: rdb, panicIn: "Acquire " + labtest.ProbeResource}
	}},
	"panic in newLock":     {newLock: func(*redis.Client) labtest.Lock { panic("no client for you") }},
	"blocked on a channel": {newLock: func(rdb *redis.Client) labtest.Lock { return &setnx{rdb: rdb, blockIn: "Release"} }},
}

// TestCheckVirtualSubject is CheckVirtual on the subject LABTEST_SUBJECT
// names, its history kept in LABTEST_DIR: run by TestCheckVirtualFails.
func TestCheckVirtualSubject(t *testing.T) {
	name := os.Getenv("LABTEST_SUBJECT")
	if name == "" {
		t.Skip("TestCheckVirtualFails runs it in a process of its own")
	}
	s := subjects[name]
	labtest.CheckVirtual(t, s.newLock, append([]labtest.Option{labtest.HistoryDir(os.Getenv("LABTEST_DIR"))}, s.opts...)...)
}

// A broken lock, or one that blocks the bubble, dials a real address or
// panics, fails CheckVirtual with a failure that names what happened (the
// agent, the call), the scenario and the seed, keeps the history lab check
// judges the same way, and never hangs the test binary. Each runs in a
// test process of its own, since it must fail its test.
func TestCheckVirtualFails(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() { // accepts, and never answers
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed.Close() // a port nothing listens on
	reran := regexp.MustCompile(`failed again in [1-5] of 5 reruns`)
	for _, tc := range []struct {
		subject string
		wants   []string
		rerun   bool // the failure says how often the seed failed again
		kept    bool // a history is kept
	}{
		{"unconditional DEL", []string{"on paused-holder", "seed 12", "the lock is broken", "mutual-exclusion violation", "answered nil for a lease no longer live"}, true, true},
		{"unconditional DEL, seeds", []string{"swarm seed ", "drew drop requests", "the lock is broken", "answered nil for a lease no longer live"}, true, true},
		{"mutex across a wait", []string{"'s Acquire of res-", "(mode lock)", "clock stopped", "scenario contention", "seed 11", "not rerun"}, false, true},
		{"real address", []string{"the probe's Acquire of labtest-probe", "contention, seed 11", "stood still", "no run was made"}, false, false},
		{"refused address", []string{"the probe's Acquire of labtest-probe", "contention, seed 11", "connection refused", "the lock reached the real network"}, false, false},
		{"panic in Renew", []string{"Renew panicked: setnx: Renew", "agent-", "the lock is broken", "seed "}, true, true},
		{"panic in the probe", []string{"the probe's Acquire of labtest-probe panicked", "contention, seed 11", "no run was made"}, false, false},
		{"panic in newLock", []string{"newLock panicked: no client for you", "contention, seed 11"}, false, false},
		{"blocked on a channel", []string{"'s Release of res-", "never returned", "after the run's end", "seed "}, true, true},
	} {
		t.Run(tc.subject, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestCheckVirtualSubject$", "-test.v", "-test.count=1", "-test.timeout=2m")
			cmd.Env = append(os.Environ(), "LABTEST_SUBJECT="+tc.subject, "LABTEST_DIR="+dir, "LABTEST_ADDR="+ln.Addr().String(), "LABTEST_CLOSED="+closed.Addr().String())
			began := time.Now()
			out, err := cmd.CombinedOutput()
			took := time.Since(began)
			t.Logf("failed in %s of wall time", took.Round(time.Millisecond))
			failure := string(out)
			if err == nil || !strings.Contains(failure, "--- FAIL: TestCheckVirtualSubject") {
				t.Fatalf("the subject's test did not fail as a test fails (%v): it passed, or the binary ended:\n%s", err, failure)
			}
			if took > 60*time.Second {
				t.Errorf("the test took %s to fail", took)
			}
			for _, want := range tc.wants {
				if !strings.Contains(failure, want) {
					t.Errorf("the failure does not say %q:\n%s", want, failure)
				}
			}
			if got := reran.MatchString(failure); got != tc.rerun {
				t.Errorf("the failure says how often the seed failed again: %v, want %v:\n%s", got, tc.rerun, failure)
			}
			files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
			if !tc.kept {
				if len(files) != 0 {
					t.Errorf("a run that never began kept %v", files)
				}
				return
			}
			if len(files) != 1 || !strings.Contains(failure, "history: "+files[0]) {
				t.Fatalf("kept %v; the failure must name the one history kept:\n%s", files, failure)
			}
			h, events, err := history.ReadFile(files[0])
			if err != nil {
				t.Fatal(err)
			}
			if again := history.Check(h, events); !again.Failed() {
				t.Errorf("lab check passes the kept history %s", files[0])
			}
		})
	}
}

// mutexLock is setnx with its calls serialised by a sync.Mutex held
// across a wait on the clock, as a client that serialises its calls with
// one does: in a bubble, a goroutine waiting on the mutex is not durably
// blocked, so the clock stops once two calls overlap.
type mutexLock struct {
	setnx
	mu sync.Mutex
}

func (l *mutexLock) Acquire(ctx context.Context, resource, holder string, ttl time.Duration) (labtest.Lease, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	time.Sleep(time.Millisecond)
	return l.setnx.Acquire(ctx, resource, holder, ttl)
}
